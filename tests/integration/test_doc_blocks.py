"""Every code block of the README and of docs/ runs as written (tests/doc_blocks.py runs
them page by page, each page in a fresh directory and namespace), or says on the line
before it why it is not run.

The pages run in this process, on the tests' shared local Ray (``ray_local``): a page's
``connect`` joins it and takes the tests' shared embedder pool, and a command a page starts
(``memorybus mcp``) joins it through ``RAY_ADDRESS``, as a command started on a Ray node does;
a Ray and a model load less for each (the commands starting their own local Ray are
tested as written by tests/integration/test_mcp_server.py, test_simulation.py and
test_sigterm.py). After each page, what its script's exit would end is ended: its callback
listeners stop and the actors it started (not detached) are killed, so nothing of a page
outlives it on the shared Ray."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.doc_blocks import RUNNABLE, blocks, run_page

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: the reason a python block is not run here: ``... tests/x.py runs it ...``
RUN_ELSEWHERE = re.compile(r"(tests/[\w/]+\.py) runs it")

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def ran(ray_local) -> dict:
    import ray

    address = ray.get_runtime_context().gcs_address
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", RAY_ADDRESS=address)
    return {str(page): run_page(page, env) for page in PAGES}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_code_block_of_the_page_runs_as_written(ran, page):
    result = ran[str(page)]
    assert result["error"] is None, result["error"]
    runnable = [b for b in blocks(page) if b.lang in RUNNABLE]
    assert result["ran"] + len(result["skipped"]) == len(runnable)
    assert result["left_open"] == 0, "the page leaves a bus open"


def test_a_block_is_left_out_only_with_a_reason():
    skipped = [b for page in PAGES for b in blocks(page) if b.not_run is not None]
    assert all(len(b.not_run) >= 10 for b in skipped), [(b.page, b.line) for b in skipped]
    # every python block runs: only shell commands (set-up, cloud, minutes-long runs) are left
    # out here, and python blocks that a named test runs as written elsewhere (CrewAI's, in its venv)
    elsewhere = [b for b in skipped if b.lang == "python"]
    assert all((m := RUN_ELSEWHERE.search(b.not_run or "")) and (ROOT / m.group(1)).is_file()
               and Path(b.page).name in (ROOT / m.group(1)).read_text() for b in elsewhere), \
        [(b.page, b.line) for b in elsewhere]
    assert all(b.lang in RUNNABLE | {"", "text", "yaml", "json", "toml"}
               for page in PAGES for b in blocks(page)), "a block in a language the runner does not know"
