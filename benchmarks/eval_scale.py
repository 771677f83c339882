"""How recall inside one shard scales with its size (plain Shard, no Ray, no model).

Fills one shard (SQLite + Qdrant Edge + the recall indexes) with ``--n``
synthetic memories in ``--users`` user scopes, with random unit vectors
standing in for embeddings (search cost depends on counts, not values), and
times ``Shard.search`` (hybrid, default weights) at each size in ``--at``, in
one user's context, next to a numpy brute-force top 10 over the vectors that
user's recall may return (that user's memories: what a raw-model baseline that
does the same job pays at that size). The bus adds the same Ray hops at every
size, so this is the part of recall that could grow. A brute force over every
user's vectors is reported beside it, labelled, for scale.

Example::

    python benchmarks/eval_scale.py --n 100000 --at 1000,10000,100000
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import make_queries, make_texts, parser, percentiles_ms  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, out=False, corpus=True)
    p.add_argument("--at", default="1000,10000,100000")
    args = p.parse_args(argv)
    import numpy as np

    from memorybus.clock import ManualClock
    from memorybus.memory.model import MemoryNode
    from memorybus.retrieval import RecallOptions
    from memorybus.scopes import Context
    from memorybus.shard import Shard
    from memorybus.storage.sqlite import SqliteStore
    from memorybus.storage.vectors import EdgeVectorIndex

    rng = np.random.default_rng(0)
    texts = make_texts(args.n)
    queries = make_queries(args.queries, exclude=set(texts))
    qvecs = rng.standard_normal((len(queries), 384), dtype=np.float32)
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    marks = sorted(int(x) for x in args.at.split(",") if x)
    d = tempfile.mkdtemp(prefix="mb-scale-")
    shard = Shard(
        "shard-0", SqliteStore(f"{d}/r.sqlite"), EdgeVectorIndex(f"{d}/v", 384), dim=384,
        clock=ManualClock(1_700_000_000.0), dedupe=False, detect_contradictions=False,
    )  # fmt: skip
    ctxs = [Context("bench", f"u{i}") for i in range(args.users)]
    out = []
    done = 0
    opts = RecallOptions(touch=False)
    for mark in marks:
        t0 = time.perf_counter()
        while done < min(mark, args.n):
            end = min(mark, done + 1000)
            vecs = rng.standard_normal((end - done, 384), dtype=np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            for u, ctx in enumerate(ctxs):
                rows = [i for i in range(done, end) if i % args.users == u]
                if rows:
                    nodes = [MemoryNode(content=texts[i], scope=ctx.scope.widen("user")) for i in rows]
                    shard.put_many(ctx, nodes, vecs[[i - done for i in rows]])
            done = end
        fill_s = time.perf_counter() - t0
        lat = []
        for j, q in enumerate(queries):
            t1 = time.perf_counter()
            shard.search(ctxs[j % args.users], qvecs[j], 10, query=q, options=opts)
            lat.append(time.perf_counter() - t1)
        visible = max(10, done // args.users)
        corpus = rng.standard_normal((done, 384), dtype=np.float32)

        def brute_force(count: int, corpus: np.ndarray = corpus) -> list[float]:
            out_s = []
            for j in range(len(queries)):
                t1 = time.perf_counter()
                scores = corpus[:count] @ qvecs[j]
                top = np.argpartition(-scores, 9)[:10]
                top[np.argsort(-scores[top])]
                out_s.append(time.perf_counter() - t1)
            return out_s

        row = {
            "memories": done,
            "per_user_scope": visible,
            "shard_search_ms": percentiles_ms(lat),
            "numpy_brute_force_top10_visible_ms": percentiles_ms(brute_force(visible)),
            "numpy_brute_force_top10_all_users_ms (not the same job)": percentiles_ms(brute_force(done)),
            "fill_s": fill_s,
        }
        out.append(row)
        print(json.dumps(row), flush=True)
    shard.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
