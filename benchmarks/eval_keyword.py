"""The keyword index: memorybus's in-shard BM25 against Qdrant Edge's sparse BM25.

Both index the same synthetic memories (``--users`` scopes) and answer the same
queries filtered to one scope. Measures write throughput, query latency
(p50/p95; tokenising the query included) and how often the two top-10 lists
agree. This is the measurement behind the choice of the in-shard index (see
``memorybus.retrieval.keyword``).

Example::

    python benchmarks/eval_keyword.py --n 100000
"""

from __future__ import annotations

import json
import shutil
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
    args = p.parse_args(argv)
    import qdrant_edge as qe

    from memorybus.retrieval.keyword import KeywordIndex
    from memorybus.retrieval.text import tokens

    texts = make_texts(args.n)
    queries = make_queries(args.queries, exclude=set(texts))
    scopes = [f"u{i % args.users}" for i in range(args.n)]
    ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(args.n)]
    out: dict[str, dict[str, object]] = {}

    # memorybus: in-shard BM25, partitioned by scope
    kw = KeywordIndex()
    t0 = time.perf_counter()
    for i, t in enumerate(texts):
        kw.add(ids[i], scopes[i], tokens(t))
    add_s = time.perf_counter() - t0
    lat, ours = [], []
    for j, q in enumerate(queries):
        t0 = time.perf_counter()
        hits = kw.search(tokens(q), [f"u{j % args.users}"], 10)
        lat.append(time.perf_counter() - t0)
        ours.append([h for h, _ in hits])
    out["memorybus_keyword"] = {"writes_per_s": args.n / add_s, "query_ms": percentiles_ms(lat)}

    # Qdrant Edge: sparse vectors with the IDF modifier, BM25 document weights, scope payload index
    path = tempfile.mkdtemp(prefix="mb-sparse-")
    try:
        cfg = qe.EdgeConfig(vectors={}, sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)})
        shard = qe.EdgeShard.create(path, cfg)
        shard.update(qe.UpdateOperation.create_field_index("scope", qe.PayloadSchemaType.Keyword))
        bm25 = qe.Bm25(qe.Bm25Config(language="english"))
        t0 = time.perf_counter()
        for start in range(0, args.n, 1000):
            points = [
                qe.Point(ids[i], {"bm25": bm25.embed_document(texts[i])}, {"scope": scopes[i]})
                for i in range(start, min(args.n, start + 1000))
            ]
            shard.update(qe.UpdateOperation.upsert_points(points))
        add_s = time.perf_counter() - t0
        lat, theirs = [], []
        for j, q in enumerate(queries):
            t0 = time.perf_counter()
            flt = qe.Filter(must=[qe.FieldCondition(key="scope", match=qe.MatchAny(any=[f"u{j % args.users}"]))])
            req = qe.SearchRequest(query=qe.Query.Nearest(bm25.embed_query(q), using="bm25"), limit=10, filter=flt)
            hits = shard.search(req)
            lat.append(time.perf_counter() - t0)
            theirs.append([str(h.id) for h in hits])
        shard.close()
        out["qdrant_edge_sparse"] = {"writes_per_s": args.n / add_s, "query_ms": percentiles_ms(lat)}
    finally:
        shutil.rmtree(path, ignore_errors=True)
    overlap = [len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(ours, theirs, strict=True)]
    out["agreement"] = {"top10_overlap": sum(overlap) / len(overlap)}
    out["params"] = {"n": args.n, "users": args.users, "queries": args.queries}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
