"""Exact search in the shard's vector cache against a Qdrant Edge search, by visible size.

The figure behind ``RankingWeights.exact_dense_limit``: below it, recall ranks the
visible scopes' cached vectors exactly (one matrix-vector product per scope);
above it, it asks the vector index (Qdrant Edge, filtered to the visible scopes).
For each size, one visible scope of that many random unit vectors sits beside
``--others`` scopes as large (the index filters them out; the cache never reads
them), and both sides return the top ``--limit`` for ``--queries`` random
queries. Times are p50 milliseconds in this process: no Ray, no model.

Example::

    python benchmarks/dense_search.py --sizes 2000,10000,50000 --out /tmp/dense.json
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, parser  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--sizes", default="1000,2000,5000,10000,20000,50000")
    p.add_argument("--others", type=int, default=1, help="scopes beside the visible one, each as large")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--limit", type=int, default=100)
    args = p.parse_args(argv)
    import numpy as np

    from memorybus.memory.model import MemoryNode
    from memorybus.retrieval.vectorcache import VectorCache
    from memorybus.scopes import Scope
    from memorybus.storage.vectors import EdgeVectorIndex

    rng = np.random.default_rng(0)
    dim = 384
    rows: list[dict[str, Any]] = []
    for size in (int(s) for s in args.sizes.split(",")):
        tmp = tempfile.mkdtemp(prefix="mb-dense-")
        try:
            index = EdgeVectorIndex(tmp, dim)
            cache = VectorCache()
            scopes = [Scope("bench", f"u{j}") for j in range(1 + args.others)]
            for scope in scopes:
                vecs = rng.standard_normal((size, dim)).astype(np.float32)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                nodes = [MemoryNode(content="x", scope=scope, embedding=v) for v in vecs]
                for start in range(0, size, 2000):
                    index.upsert(nodes[start : start + 2000])
                for node, vec in zip(nodes, vecs, strict=True):
                    cache.add(node.id, scope.key, vec)
            index.optimize()
            visible = [scopes[0].key]
            queries = rng.standard_normal((args.queries, dim)).astype(np.float32)
            queries /= np.linalg.norm(queries, axis=1, keepdims=True)
            exact, indexed, overlap = [], [], []
            for q in queries:
                t0 = time.perf_counter()
                a = cache.search(q, visible, args.limit)
                t1 = time.perf_counter()
                b = index.search(q, args.limit, scope_keys=visible)
                t2 = time.perf_counter()
                exact.append(t1 - t0)
                indexed.append(t2 - t1)
                overlap.append(len({i for i, _ in a} & {i for i, _ in b}) / max(1, len(a)))
            index.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        row = {
            "visible": size,
            "exact_ms": statistics.median(exact) * 1000,
            "index_ms": statistics.median(indexed) * 1000,
            "index_recall_of_exact_top": statistics.mean(overlap),
        }
        print(f"{size:>8} visible: exact {row['exact_ms']:.3f} ms, index {row['index_ms']:.3f} ms "
              f"(index finds {row['index_recall_of_exact_top']:.3f} of the exact top {args.limit})", flush=True)
        rows.append(row)
    emit({"limit": args.limit, "others": args.others, "rows": rows}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
