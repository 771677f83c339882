"""Encoder speed, model by model, in one run: what a model choice costs on this machine.

For each model (``--model``, repeatable; the shipped all-MiniLM-L6-v2 always first) it
measures, through the bus's own encoder path (``memorybus.encoder.Embedder``, the class
the embedder actors and the query encoder run, with the thread count an embedder actor
gets):

- ``load_s``: constructing the Embedder (imports already done by the first model);
- ``ingest_texts_per_s``: ``--n`` distinct chat-like texts (``benchmarks.common.make_texts``)
  encoded in calls of 256, as the embedder actor receives them from ``remember_many``;
- ``query_ms_p50`` / ``query_ms_p95``: one text per call, ``--queries`` calls, as a
  synchronous recall encodes its query (the Embedder's result cache off);
- ``dim``: the vector size (the shards' vector memory and search cost scale with it).

The models are measured in rounds (``--rounds``, each model once per round, in turn), so
that a drift in the machine's speed falls on every model alike; each figure is the median
over rounds. Retrieval quality per model is a separate, slower measurement (the
evaluation protocol with cross-validation: ``benchmarks/tune_cv.py ... --model PATH``).
Nothing here downloads: a model is a directory or a name in the local Hugging Face cache.

Example::

    python benchmarks/encoders.py --model /path/to/all-mpnet-base-v2 --n 1000 --rounds 3
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, log, make_texts, parser  # noqa: E402

CALL = 256  # texts per ingest call


def measure(model_path: str, texts: list[str], queries: list[str], threads: int) -> dict:
    import gc

    import numpy as np

    from memorybus.encoder.embedding import Embedder

    t0 = time.perf_counter()
    emb = Embedder(model_path, threads=threads, cache_size=0)
    load_s = time.perf_counter() - t0
    emb.encode(texts[:32])  # warm-up
    t0 = time.perf_counter()
    for i in range(0, len(texts), CALL):
        emb.encode(texts[i : i + CALL])
    ingest_s = time.perf_counter() - t0
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        emb.encode([q])
        lat.append((time.perf_counter() - t0) * 1000)
    dim = emb.dim
    del emb
    gc.collect()
    return {"load_s": load_s, "ingest_texts_per_s": len(texts) / ingest_s,
            "query_ms_p50": float(np.percentile(lat, 50)), "query_ms_p95": float(np.percentile(lat, 95)),
            "dim": dim}


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--model", action="append", default=[], help="a model: a directory, or a name in the local "
                   "Hugging Face cache (repeatable)")
    p.add_argument("--n", type=int, default=1000, help="texts encoded per model and round (default 1000)")
    p.add_argument("--queries", type=int, default=100, help="single-text calls per model and round (default 100)")
    p.add_argument("--rounds", type=int, default=3, help="rounds over the models (default 3)")
    p.add_argument("--threads", type=int, default=1, help="torch threads, as an embedder actor with "
                   "embedder_num_cpus=1 gets (default 1)")
    args = p.parse_args(argv)
    from memorybus import env

    # the model's thread settings, as the embedder actors get them (defaults only: a
    # variable already set keeps its value); no Ray runs here, so no RAY_TMPDIR of its own
    env.prepare(**env.BESIDE_MODEL_ENV)
    from memorybus.config import Config
    from memorybus.encoder.modelinfo import model_dimension, model_dir

    # a name is resolved in the local Hugging Face cache; a directory that holds no model
    # fails here (EmbeddingError), before anything is timed
    models = [Config().resolved_model_path(), *(model_dir(m) for m in args.model)]
    for m in models:
        model_dimension(m)
    texts = make_texts(args.n, seed=11)
    queries = [f"what did they say about {t.split(') ', 1)[1][:40]}?" for t in make_texts(args.queries, seed=12)]
    runs: dict[str, list[dict]] = {m: [] for m in models}
    for r in range(args.rounds):
        for m in models:
            log(f"round {r + 1}/{args.rounds}: {m}")
            runs[m].append(measure(m, texts, queries, args.threads))
    out = {"n": args.n, "queries": args.queries, "rounds": args.rounds, "threads": args.threads, "models": {}}
    base = None
    for m in models:
        row = {k: statistics.median(run[k] for run in runs[m]) for k in runs[m][0]}
        row["runs"] = runs[m]
        if base is None:
            base = row
        row["ingest_vs_default"] = row["ingest_texts_per_s"] / base["ingest_texts_per_s"]
        row["query_p50_vs_default"] = row["query_ms_p50"] / base["query_ms_p50"]
        out["models"][m] = row
        log(f"{Path(m).name}: dim {row['dim']}, ingest {row['ingest_texts_per_s']:.0f} texts/s "
            f"({row['ingest_vs_default']:.2f}x the default), query p50 {row['query_ms_p50']:.1f} ms "
            f"({row['query_p50_vs_default']:.2f}x), load {row['load_s']:.1f} s")
    emit(out, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
