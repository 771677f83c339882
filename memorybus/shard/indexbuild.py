"""The vector index's HNSW graph, built off the hot path.

Qdrant Edge searches a segment without its HNSW graph by scanning it; the graph is
built by ``optimize``, which holds the interpreter lock for the whole build (minutes
at 100,000 points: :mod:`memorybus.storage.edge_build`). So the shard builds a copy:
under its write gate it flushes and copies the index directory and starts journaling
the index's changes (writes wait for the copy, not the build); another process
optimizes the copy, while this shard serves reads and writes from the old index;
then, under the write gate again, the journal is replayed onto the copy and the copy
replaces the old directory. Anything that fails or overtakes the build (the index
going stale, a rebuild from the store, the build process failing or timing out)
leaves the old index serving and the copy removed. The maintenance schedule calls
it after each consolidation run (:class:`~memorybus.actors.maintenance.ConsolidationActor`).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from memorybus.storage.vectors import EdgeVectorIndex

if TYPE_CHECKING:
    from memorybus.shard.core import ShardCore

log = logging.getLogger("memorybus")

#: below this many points a build is not worth its minutes: recall searches a shard's
#: visible vectors exactly up to ``RankingWeights.exact_dense_limit`` (15,000) anyway
MIN_POINTS = 15_000
#: build again once this share of the points changed since the last build
REBUILD_SHARE = 0.1


class IndexBuilds:
    def __init__(self, core: ShardCore) -> None:
        self.core = core
        self._one = threading.Lock()

    def build_vector_index(
        self, min_points: int = MIN_POINTS, rebuild_share: float = REBUILD_SHARE, timeout: float = 6 * 3600.0
    ) -> dict[str, Any]:
        """Build the vector index's HNSW graph in another process and swap it in, when
        it holds at least ``min_points`` points of which ``rebuild_share`` changed since
        the last build. Returns ``{"built": bool, "reason": str, "points": int,
        "seconds": float, "paused_seconds": float}`` (``paused_seconds``: how long
        writes waited, for the copy and the swap; a built index's ``reason`` is
        ``optimized``, or ``unchanged`` when Qdrant found nothing to build: under its
        indexing threshold a segment is searched by scanning, which is fast there)."""
        index = self.core.index
        out: dict[str, Any] = {"built": False, "points": 0, "seconds": 0.0, "paused_seconds": 0.0}
        if not index.buildable():
            return {**out, "reason": f"{index.backend} builds its own index"}
        if not self._one.acquire(blocking=False):
            return {**out, "reason": "a build is running"}
        try:
            return self._build(out, min_points, rebuild_share, timeout)
        finally:
            self._one.release()

    def _build(self, out: dict[str, Any], min_points: int, share: float, timeout: float) -> dict[str, Any]:
        index, gate = self.core.index, self.core.gate
        with gate.read():  # the index answers one caller at a time (the gate's state lock)
            points = out["points"] = index.count()
        if points < min_points or index.changes_since_build < max(1.0, share * points):
            return {**out, "reason": "not due"}
        edge = index.index
        if not isinstance(edge, EdgeVectorIndex):
            return {**out, "reason": f"{index.backend} builds its own index"}
        dest = f"{edge.path}.build"
        shutil.rmtree(dest, ignore_errors=True)
        started = time.monotonic()
        with gate.write():
            copied = index.begin_build(dest)
        out["paused_seconds"] = time.monotonic() - started
        if not copied:
            return {**out, "reason": "the index is stale: it is rebuilt from the store first"}
        ok, reason = _run(dest, timeout)
        paused = time.monotonic()
        with gate.write():
            built = index.finish_build(dest if ok else None, lambda p: EdgeVectorIndex(p, self.core.dim))
        out["paused_seconds"] += time.monotonic() - paused
        out["seconds"] = time.monotonic() - started
        if not built:
            shutil.rmtree(dest, ignore_errors=True)
            if ok:
                reason = "overtaken: the index changed in a way the copy cannot follow"
        log.info("vector index build of %d points: %s in %.1f s", points,
                 f"swapped in ({reason})" if built else reason, out["seconds"])  # fmt: skip
        return {**out, "built": built, "reason": reason}


def _run(path: str, timeout: float) -> tuple[bool, str]:
    """Optimize the copy at ``path`` in a process of its own: (ok, what it did or why not)."""
    try:
        proc = subprocess.run([sys.executable, "-m", "memorybus.storage.edge_build", path], capture_output=True,
                              text=True, timeout=timeout, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return False, f"the build ran past {timeout:.0f} s"
    except OSError as exc:
        return False, f"the build process did not start: {exc}"
    if proc.returncode != 0:
        return False, f"the build process failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"
    return True, proc.stdout.strip()
