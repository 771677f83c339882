"""Run the code blocks of the README and of docs/ as a reader would, page by page.

``python -m tests.doc_blocks OUT.json PAGE.md [PAGE.md ...]``

Each page runs in a fresh directory of its own with a fresh namespace: its ``python``
blocks are executed in order (a later block sees what an earlier one defined), its
``bash`` blocks run with ``bash -c`` in the same directory (a command sent to the
background with ``&`` keeps running until the page ends, then its process group is
stopped). A block right after a ``<!-- not run: why -->`` line is not run; blocks without
a language (directory trees, output) are not code. One Ray is started for the whole run
(``connect`` joins a Ray already initialised in its process), so pages pay for their
bus's actors, not for a Ray each.

The result file maps each page to ``{"ran": n, "skipped": [[line, why], ...],
"error": null | "line N: traceback"}``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RUNNABLE = {"python", "bash"}
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    not_run: str | None  # the reason given, when the page says not to run it


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown page, with the reason it is not run (if any)."""
    text = path.read_text()
    found = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = NOT_RUN.search(before)
        found.append(Block(str(path), line, m.group(1), m.group(2), reason.group(1) if reason else None))
    return found


def run_page(path: Path, env: dict[str, str]) -> dict:
    result: dict = {"ran": 0, "skipped": [], "error": None, "seconds": 0.0}
    started = time.monotonic()
    background: list[subprocess.Popen] = []
    namespace: dict = {"__name__": "__main__"}
    old = os.getcwd()
    before = _live_actors()
    with tempfile.TemporaryDirectory(prefix="doc-") as work:
        os.chdir(work)
        try:
            for block in blocks(path):
                if block.lang not in RUNNABLE:
                    continue
                if block.not_run is not None:
                    result["skipped"].append([block.line, block.not_run])
                    continue
                try:
                    if block.lang == "python":
                        out = io.StringIO()
                        with contextlib.redirect_stdout(out):
                            exec(compile(block.code, f"{path}:{block.line}", "exec"), namespace)
                    else:
                        log = Path(work) / f".block-{block.line}.log"
                        with log.open("w") as sink:  # a file: a background child may keep it open
                            proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", block.code], cwd=work,
                                                    env=env, start_new_session=True,
                                                    stdout=sink, stderr=subprocess.STDOUT)
                        background.append(proc)
                        if proc.wait(timeout=300):
                            raise RuntimeError(f"exit {proc.returncode}: {log.read_text()[-2000:]}")
                    result["ran"] += 1
                except BaseException:  # reported; the run goes on to the next page
                    result["error"] = f"line {block.line}: {traceback.format_exc()[-4000:]}"
                    break
        finally:
            result["left_open"] = _close_buses(namespace)
            _end_like_a_script(namespace, before)
            for proc in background:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
            for proc in background:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=30)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
            os.chdir(old)
    result["seconds"] = round(time.monotonic() - started, 1)
    return result


def _live_actors() -> dict[str, bool]:
    """The actors alive in this process's Ray (id -> detached); {} without Ray."""
    import ray

    if not ray.is_initialized():
        return {}
    import ray._private.state as ray_state

    return {aid: bool(info.get("IsDetached")) for aid, info in ray_state.actors().items() if info["State"] != "DEAD"}


def _end_like_a_script(namespace: dict, before: dict[str, bool]) -> None:
    """What a page's script leaves when it exits, when the page ran in this process: its
    callback listeners stop, and the actors it started that are not detached die (Ray
    ends a driver's actors with it). Without this an in-process page left them running
    on the shared Ray for the modules after it."""
    import ray

    from memorybus.client.subscriptions import stop_listeners

    stop_listeners(lambda sub: True)
    if not ray.is_initialized():
        return
    worker: Any = ray._private.worker.global_worker
    for aid, detached in _live_actors().items():
        if aid not in before and not detached:
            with contextlib.suppress(Exception):  # gone meanwhile
                worker.core_worker.kill_actor(ray.ActorID.from_hex(aid), True)


def _close_buses(namespace: dict) -> int:
    """Close the buses a page left open (a page should close what it opens); how many."""
    from memorybus.client import MemoryBus

    left = [v for v in namespace.values()
            if isinstance(v, MemoryBus) and not v.closed and getattr(v, "_owns_actors", False)]
    for bus in left:
        with contextlib.suppress(Exception):
            bus.close()
    return len(left)


def main(argv: list[str]) -> int:
    out, pages = Path(argv[0]), [Path(p).resolve() for p in argv[1:]]
    import ray

    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    env = dict(os.environ)
    results = {}
    try:
        for page in pages:
            results[str(page)] = run_page(page, env)
            out.write_text(json.dumps(results, indent=1))
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
