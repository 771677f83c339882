"""Recall latency and ingest rate through memorybus at a given size, against the raw model.

The raw model runs in this process beside the bus, and every raw timing is
paired with a bus timing under the same load: before each ``remember_many``
call the raw model encodes a same-share chunk (at least 256 texts, in one call)
of a ``--raw-sample`` sample (batched encode rate), and before each
``recall(k=10)`` it encodes the query and brute-forces the top 10 over exactly
as many vectors as the bus may return for that query: the memories of the
caller's visible scope (its user's, ``--n / --users``; the cost of brute force
depends on the count, not the values, so random unit vectors stand in). The
raw side uses the bus's encoder path (the lean transformer + pooling of
``memorybus.encoder.embedding``, which the bus's in-process query encoder and its
embedder run); the ``SentenceTransformer.encode`` path is timed beside it and
reported under its own label. The bus ingests all ``--n`` texts (``--users``
user scopes, round robin by call); recall uses the default, hybrid
configuration. Taken on a shared machine, the figures are indicative only.

Example::

    python benchmarks/eval_speed.py --n 100000 --users 10 --out /tmp/speed100k.json
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, make_queries, make_texts, parser, percentiles_ms, prepare_env  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, corpus=True)
    p.add_argument("--batch", type=int, default=1000, help="items per remember_many call")
    p.add_argument("--raw-sample", type=int, default=4000)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--weight", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument(
        "--query-encoder",
        choices=("auto", "local", "embedder"),
        default="auto",
        help="Config.query_encoder (auto: this script's synchronous recalls embed the query in this process)",
    )
    p.add_argument(
        "--direct-reads",
        choices=("on", "off"),
        default="on",
        help="Config.direct_reads (on: same-node recalls over the shards' direct channels; off: through Ray)",
    )
    args = p.parse_args(argv)
    ray_tmp = prepare_env()  # also: idle OpenMP and OpenBLAS threads sleep, not spin
    import numpy as np

    from memorybus.cli import _weights
    from memorybus.config import Config, RankingWeights
    from memorybus.evaluation.raw import RawModel
    from memorybus.evaluation.report import progress
    from memorybus.memory.model import MemoryNode
    from memorybus.scopes import Context, Scope
    from memorybus.shard.texts import embedding_texts

    ranking = RankingWeights(**_weights(args.weight))  # type: ignore[arg-type]
    texts = make_texts(args.n)
    queries = make_queries(args.queries + 10, exclude=set(texts))
    warm, queries = queries[:10], queries[10:]
    sample = [MemoryNode(content=t, scope=Scope("bench")) for t in texts[: args.raw_sample]]

    # the raw model stays loaded: every raw timing is paired with a bus timing under the same load
    raw = RawModel(Config().resolved_model_path())
    sample_texts = embedding_texts(sample, ranking.contextual_text)
    rng = np.random.default_rng(0)
    visible = max(1, args.n // args.users)  # what one user's recall may return: that user's memories
    corpus = rng.standard_normal((visible, 384), dtype=np.float32)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    for q in warm:
        raw.query(q, corpus)
        raw.query(q, corpus, path="st")
    raw_s = raw_n = 0.0
    raw_lat: list[float] = []
    raw_lat_st: list[float] = []
    _, st_rate = raw.encode_all(sample_texts, "st")

    import memorybus

    data_dir = tempfile.mkdtemp(prefix="mb-speed-")
    res: dict[str, Any] = {"n": args.n, "users": args.users, "shards": args.shards, "loadavg_start": os.getloadavg()}
    try:
        cfg = Config.embedded(
            data_dir,
            num_shards=args.shards,
            namespace="mb_speed",
            ranking=ranking,
            embedder_num_cpus=2.0,  # the embedder gets the raw model's two threads
            query_encoder=args.query_encoder,
            direct_reads=args.direct_reads == "on",
        )
        bus = memorybus.connect(cfg, num_cpus=3, include_dashboard=False, log_to_driver=False)
        bus.warm_up()  # this process's query model, loaded behind connect: timed recalls embed here
        try:
            bus.embed(["warm up"])
            ingest = 0.0
            calls = list(range(0, args.n, args.batch))
            # at least 256 texts per raw call: SentenceTransformer sorts a call's texts by
            # length, and a user encoding a corpus passes long lists
            per_call = max(256, len(sample_texts) * args.batch // args.n)
            for call, start in enumerate(progress(calls, "ingest (raw sample, bus)", len(calls))):
                chunk = [sample_texts[(start + i) % len(sample_texts)] for i in range(per_call)]
                _, rate = raw.encode_all(chunk)
                raw_s += len(chunk) / rate
                raw_n += len(chunk)
                ctx = Context("bench", f"u{call % args.users}")
                items = [{"content": t, "scope": "user"} for t in texts[start : start + args.batch]]
                t0 = time.perf_counter()
                bus.remember_many(items, ctx)
                ingest += time.perf_counter() - t0
            ctxs = [Context("bench", f"u{i}") for i in range(args.users)]
            for i, q in enumerate(warm):
                bus.recall(q, ctxs[i % len(ctxs)], k=10)
            lat = []
            for i, q in enumerate(progress(queries, "queries (raw, bus)", len(queries))):
                raw_lat.append(raw.query(q, corpus)[1])
                raw_lat_st.append(raw.query(q, corpus, path="st")[1])
                t0 = time.perf_counter()
                bus.recall(q, ctxs[i % len(ctxs)], k=10)
                lat.append(time.perf_counter() - t0)
            res["count"] = bus.count()
        finally:
            bus.shutdown()
            import ray

            ray.shutdown()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    raw.close()
    raw_rate = raw_n / max(1e-9, raw_s)
    raw_ms, bus_ms, st_ms = percentiles_ms(raw_lat), percentiles_ms(lat), percentiles_ms(raw_lat_st)
    res |= {
        "raw": {
            "encoder_path": "the bus's (lean transformer + mean pooling)",
            "visible_vectors_searched": visible,
            "encode_rate": raw_rate,
            "query_ms": raw_ms,
            "sentence_transformers_path": {"encode_rate": st_rate, "query_ms": st_ms},
        },
        "memorybus": {"ingest_rate": args.n / ingest, "recall_ms": bus_ms},
        "ratios": {
            "ingest": args.n / ingest / raw_rate,
            "recall_p50": bus_ms["p50"] / raw_ms["p50"],
            "recall_p95": bus_ms["p95"] / raw_ms["p95"],
            "recall_p50_vs_sentence_transformers_path": bus_ms["p50"] / st_ms["p50"],
            "ingest_vs_sentence_transformers_path": args.n / ingest / st_rate,
        },
        "note": "measured on a shared machine: indicative only",
        "loadavg_end": os.getloadavg(),
        "ranking": str(ranking),
        "query_encoder": args.query_encoder,
        "direct_reads": args.direct_reads,
    }
    emit(res, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
