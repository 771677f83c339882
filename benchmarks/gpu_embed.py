"""The embedder alone and the whole ingest path, on the CPU or a GPU node.

One run measures, in this order:

1. **embedder alone**: ``Embedder(model, device=...)`` in this process encodes the
   N texts in calls of 1024 (model batches of ``--model-batch``) after a warm-up
   call (texts/s). Nothing but the model and its tokenizer runs.
2. **whole ingest path**: ``remember_many`` through a real bus (embedded backend,
   SQLite + Qdrant Edge) whose embedder actor reserves ``--gpus`` GPUs
   (``Config.embedder_num_gpus``; 0: the CPU) and batches by
   ``embed_gpu_batch_size``; calls of ``--batch`` items, one user's context per
   call, round-robin over 8 users (memories/s). It includes everything the bus
   does per memory: validation, the Ray hops, the embedder actor, the shard's
   commit (fsync), the vector and keyword index, the hub's events.

It prints both rates and ``ingest / alone``. On a GPU node the model stops being
the limit and the ratio shows what the bus's own CPU costs; on this 2-core
machine (``--gpus 0``) the two share the cores. The first part's model is freed
before the bus starts, so they never run at once.

Examples::

    python benchmarks/gpu_embed.py --n 2000                       # CPU
    python benchmarks/gpu_embed.py --n 50000 --gpus 1 --cpus 16   # a GPU node
"""

from __future__ import annotations

import gc
import shutil
import sys
import tempfile
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, log, make_texts, parser, prepare_env  # noqa: E402

USERS = 8


def embedder_alone(model_path: str, texts: list[str], device: str, model_batch: int, threads: int) -> dict:
    from memorybus.encoder.embedding import Embedder

    t0 = time.perf_counter()
    emb = Embedder(model_path, threads=threads, batch_size=model_batch, cache_size=0, device=device)
    load_s = time.perf_counter() - t0
    emb.encode(texts[:model_batch])  # warm-up: kernels, allocator
    t0 = time.perf_counter()
    for i in range(0, len(texts), 1024):
        emb.encode(texts[i : i + 1024])
    secs = time.perf_counter() - t0
    result = {"device": emb.device, "load_s": load_s, "seconds": secs, "texts_per_s": len(texts) / secs}
    del emb
    gc.collect()
    return result


def whole_ingest(texts: list[str], args, data_dir: str) -> dict:  # type: ignore[no-untyped-def]
    import memorybus as mb

    cfg = mb.Config.embedded(data_dir, num_shards=args.shards, embedder_num_cpus=args.embedder_cpus,
                             embedder_num_gpus=args.gpus, embed_gpu_batch_size=args.model_batch)
    t0 = time.perf_counter()
    bus = mb.connect(cfg, num_cpus=args.cpus, num_gpus=args.gpus_on_node, include_dashboard=False,
                     log_to_driver=False)
    connect_s = time.perf_counter() - t0
    try:
        import ray

        from memorybus.actors import handle

        device = ray.get(handle(bus.config, "embedder", 0).device.remote())
        warm = [mb.Context("bench", "warm", "a")]
        bus.remember_many([{"content": f"warm-up {i}", "scope": "user"} for i in range(32)], warm[0])
        t0 = time.perf_counter()
        stored = 0
        for n, i in enumerate(range(0, len(texts), args.batch)):
            ctx = mb.Context("bench", f"u{n % USERS}", "a")
            stored += len(bus.remember_many([{"content": t, "scope": "user"} for t in texts[i : i + args.batch]], ctx))
        secs = time.perf_counter() - t0
        if stored != len(texts):
            raise RuntimeError(f"stored {stored} of {len(texts)}")
    finally:
        bus.shutdown()
    return {"device": device, "connect_s": connect_s, "seconds": secs, "memories_per_s": len(texts) / secs}


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__, data_dir=True)
    p.add_argument("--n", type=int, default=2000, help="texts (default 2000)")
    p.add_argument("--gpus", type=float, default=0.0, help="Config.embedder_num_gpus (default 0: CPU)")
    p.add_argument("--cpus", type=int, default=2, help="CPUs Ray offers (default 2)")
    p.add_argument("--embedder-cpus", type=float, default=1.0, help="Config.embedder_num_cpus (default 1)")
    p.add_argument("--shards", type=int, default=2, help="Config.num_shards (default 2)")
    p.add_argument("--batch", type=int, default=1000, help="items per remember_many call (default 1000)")
    p.add_argument("--model-batch", type=int, default=512,
                   help="model batch: the embedder alone's, and Config.embed_gpu_batch_size (default 512)")
    args = p.parse_args(argv)
    args.gpus_on_node = int(-(-args.gpus // 1)) if args.gpus > 0 else 0
    ray_tmp = prepare_env()
    from memorybus.config import Config

    texts = make_texts(args.n, seed=7)
    device = "cuda" if args.gpus > 0 else "cpu"
    log(f"embedder alone on {device}: {args.n} texts")
    alone = embedder_alone(Config().resolved_model_path(), texts, device, args.model_batch,
                           threads=max(1, int(args.embedder_cpus)))
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="mb-gpu-")
    try:
        log(f"whole ingest path, embedder_num_gpus={args.gpus}")
        ingest = whole_ingest(texts, args, data_dir)
    finally:
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    result = {"n": args.n, "embedder_alone": alone, "whole_ingest": ingest,
              "ingest_over_alone": ingest["memories_per_s"] / alone["texts_per_s"]}
    log(f"embedder alone ({alone['device']}): {alone['texts_per_s']:.0f} texts/s; "
        f"whole ingest ({ingest['device']}): {ingest['memories_per_s']:.0f} memories/s; "
        f"ratio {result['ingest_over_alone']:.2f}")
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
