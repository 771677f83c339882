"""Every code block of the README and of docs/ runs as written (tests/doc_blocks.py runs
them page by page, each page in a fresh directory, against one local Ray), or says on the
line before it why it is not run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_blocks import RUNNABLE, blocks

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: the reason a python block is not run here: ``... tests/x.py runs it ...``
RUN_ELSEWHERE = re.compile(r"(tests/[\w/]+\.py) runs it")

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("doc-blocks") / "result.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "tests.doc_blocks", str(out), *map(str, PAGES)],
                          check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1100)
    assert out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


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
