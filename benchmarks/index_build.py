"""The vector index's HNSW build, off the hot path: search before, during and after.

A plain shard (real SQLite and Qdrant Edge, no Ray, no model: random unit vectors)
holds ``--n`` memories over ``--users`` user scopes. Timed: the on-disk index's
search filtered to one user's scope (what recall asks of it above
``RankingWeights.exact_dense_limit`` visible vectors), ``--queries`` queries each
(p50/p95 ms): before the build (Qdrant Edge scanning its segments: the baseline),
while the build runs in its own process (searches and a write every 50 ms go on in
the shard's process), and after the swap. Also the build's seconds, how long writes
waited (copy and swap), and how many writes went in during the build. Left out:
recall's ranking around the search, Ray, the model.

Example::

    python benchmarks/index_build.py --n 100000 --out /tmp/build.json
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, log, parser, percentiles_ms  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, corpus=True)
    args = p.parse_args(argv)
    import numpy as np

    from memorybus import Context, ManualClock, MemoryNode
    from memorybus.shard import Shard
    from memorybus.storage.sqlite import SqliteStore
    from memorybus.storage.vectors import EdgeVectorIndex

    dim, rng = 384, np.random.default_rng(0)
    tmp = Path(tempfile.mkdtemp(prefix="index-build-"))
    shard = Shard("shard-0", SqliteStore(tmp / "r.sqlite"), EdgeVectorIndex(tmp / "v", dim), dim=dim,
                  clock=ManualClock())  # fmt: skip
    ctxs = [Context("bench", f"u{i}") for i in range(args.users)]

    def unit(n: int) -> Any:
        v = rng.standard_normal((n, dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    try:
        started = time.monotonic()
        for start in range(0, args.n, 2000):
            n = min(2000, args.n - start)
            ctx = ctxs[(start // 2000) % len(ctxs)]
            shard.put_many(ctx, [MemoryNode(content=f"m {start + i}", scope=ctx.scope) for i in range(n)], unit(n))
        log(f"{args.n} memories in {time.monotonic() - started:.1f} s")
        queries, scope = unit(args.queries), [ctxs[3].scope.key]

        def search_all() -> list[float]:
            out = []
            for q in queries:
                t = time.perf_counter()
                with shard.gate.read():
                    shard.index.search(q, 10, scope_keys=scope)
                out.append(time.perf_counter() - t)
            return out

        before = search_all()
        result: dict[str, Any] = {}
        builder = threading.Thread(target=lambda: result.update(shard.build_vector_index(min_points=0)))
        builder.start()
        during: list[float] = []
        writes = 0
        while builder.is_alive():
            during += search_all()[:5]
            shard.put_many(ctxs[0], [MemoryNode(content=f"during {writes}", scope=ctxs[0].scope)], unit(1))
            writes += 1
            time.sleep(0.05)
        builder.join()
        after = search_all()
        emit({"n": args.n, "users": args.users, "build": result, "writes_during_build": writes,
              "search_ms": {"before": percentiles_ms(before), "during": percentiles_ms(during),
                            "after": percentiles_ms(after)},
              "p50_after_over_before": round(float(np.median(after) / np.median(before)), 3)}, args.out)  # fmt: skip
    finally:
        shard.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
