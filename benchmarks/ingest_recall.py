"""Ingest and recall through memorybus, against the raw model on the same machine.

One run measures, in this order:

1. raw batched encode rate: ``Embedder(model, threads=2)`` in this process,
   on the bus's encoder path (lean transformer + mean pooling), the N texts in
   calls of 1024 (texts/s); the ``SentenceTransformer.encode`` path is timed
   beside it and reported under its own label;
2. raw single-query latency: encode one query + brute-force numpy cosine
   top-10 over exactly the vectors the bus may return for that query: those of
   the caller's user (one of ``NUM_USERS``) (p50/p95 ms);
   the raw model is then deleted so it does not compete with the bus;
3. ``remember_many`` throughput through the real bus (embedded backend,
   Qdrant Edge), calls of ``--batch`` items, each call in one user's context
   (users u0..u7 round-robin by call) with ``scope="user"`` (memories/s);
4. ``recall`` (k=10) latency over the same queries, contexts round-robin over
   the users that hold memories, after 10 warm-up queries (p50/p95 ms);
   then ``bus.embed([q])`` alone on up to 50 other queries, to split recall
   latency into embedding and the rest.

It prints a table and the ratios ``ingest_ratio = bus/raw`` (target >= 0.9)
and ``recall_p50_ratio = bus/raw`` (target <= 1.3), and writes JSON to
``--out`` if given. Progress goes to stderr. On a shared machine the figures
are indicative only.

Example::

    python benchmarks/ingest_recall.py --n 600 --queries 40
"""

from __future__ import annotations

import argparse
import gc
import json
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

from benchmarks.common import (  # noqa: E402
    Progress,
    log,
    make_queries,
    make_texts,
    parser,
    percentiles_ms,
    prepare_env,
)

RAW_BATCH = 32
RAW_CALL = 1024  # texts per raw encode call (SentenceTransformer length-sorts within a call)
TOP_K = 10
WARMUP_QUERIES = 10
NUM_USERS = 8
TARGET_INGEST_RATIO = 0.9
TARGET_RECALL_P50_RATIO = 1.3
BUSY_LOADAVG = 0.5
RAY_CPUS = 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = parser(__doc__, data_dir=True)
    p.add_argument("--n", type=int, default=10_000, help="memories to ingest (default 10000)")
    p.add_argument("--queries", type=int, default=200, help="recall queries to time (default 200)")
    p.add_argument("--shards", type=int, default=2, help="Config.num_shards (default 2)")
    p.add_argument("--embedders", type=int, default=1, help="Config.embedder_replicas (default 1)")
    p.add_argument(
        "--embedder-cpus",
        type=float,
        default=None,
        help="Config.embedder_num_cpus (default: the config's, shrunk if the actors do not fit)",
    )
    p.add_argument("--batch", type=int, default=1000, help="items per remember_many call (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic texts and queries")
    args = p.parse_args(argv)
    if args.n < 1 or args.queries < 1 or args.batch < 1:
        p.error("--n, --queries and --batch must be >= 1")
    return args


# ---------------------------------------------------------------------- raw


def model_texts(texts: list[str]) -> tuple[list[str], str]:
    """The strings the bus hands its model for these memories, and how they were made.

    Newer memorybus versions embed a memory's content without its leading date
    stamp (``index_text``); the raw baseline must encode the same strings or it
    does more model work than the bus. Falls back to the content as is.
    """
    try:
        from memorybus.retrieval.structure import split_time_prefix
    except ImportError:
        try:
            from memorybus.retrieval.text import split_time_prefix
        except ImportError:
            return list(texts), "content"
    out = []
    for t in texts:
        _, rest = split_time_prefix(t)
        out.append(rest if rest.strip() else t)
    return out, "content without date stamp (as memorybus index_text)"


def user_counts(n: int, batch: int) -> list[int]:
    """Memories per user, as ``measure_bus`` stores them (calls of ``batch`` round robin
    over the users), in the order ``measure_bus`` asks the users' recalls."""
    per: dict[str, int] = {}
    for call, start in enumerate(range(0, n, batch)):
        user = f"u{call % NUM_USERS}"
        per[user] = per.get(user, 0) + min(batch, n - start)
    return [per[u] for u in sorted(per)]


def measure_raw(
    model_path: str, texts: list[str], queries: list[str], warmup: list[str], batch: int, lean: bool = True
) -> dict[str, Any]:
    """Raw model in this process: batched encode rate, then single-query latency over the
    vectors of one user (what the bus may return for one user's recall)."""
    import numpy as np

    from memorybus.encoder.embedding import Embedder

    log(f"raw: loading model (threads=2, {'bus encoder path' if lean else 'SentenceTransformer.encode path'})")
    t0 = time.perf_counter()
    # cache_size=0: every text really goes through the model (texts are distinct anyway).
    emb = Embedder(model_path, threads=2, batch_size=RAW_BATCH, cache_size=0, lean=lean)
    load_s = time.perf_counter() - t0
    emb.encode(warmup[:RAW_BATCH])  # first call pays one-off allocation costs

    n = len(texts)
    vecs = np.empty((n, emb.dim), dtype=np.float32)
    prog = Progress("raw encode", n)
    t0 = time.perf_counter()
    for start in range(0, n, RAW_CALL):
        vecs[start : start + RAW_CALL] = emb.encode(texts[start : start + RAW_CALL])
        prog.update(min(n, start + RAW_CALL))
    encode_s = time.perf_counter() - t0

    for q in warmup:
        emb.encode([q])
    counts = user_counts(n, batch)  # recall i asks user i % len(counts): it may see that user's memories
    total: list[float] = []
    encode_only: list[float] = []
    prog = Progress("raw query", len(queries))
    for i, q in enumerate(queries):
        t0 = time.perf_counter()
        qv = emb.encode([q])[0]
        t1 = time.perf_counter()
        scores = vecs[: counts[i % len(counts)]] @ qv  # rows are L2-normalised: dot product = cosine
        k = min(TOP_K, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        t2 = time.perf_counter()
        total.append(t2 - t0)
        encode_only.append(t1 - t0)
        del top
        prog.update(i + 1)

    result = {
        "visible_vectors_searched": counts,
        "model_load_s": load_s,
        "encode_s": encode_s,
        "encode_rate": n / encode_s,
        "query_ms": percentiles_ms(total),
        "query_encode_only_ms": percentiles_ms(encode_only),
    }
    del emb, vecs
    gc.collect()
    return result


# ---------------------------------------------------------------------- bus


def bus_config(args: argparse.Namespace, data_dir: str) -> Any:
    """The bus config; embedder CPUs shrunk so every actor fits in ``RAY_CPUS``.

    ``connect`` waits up to 300 s for all of its actors; one that does not fit
    in the CPUs is never scheduled, so an over-subscribed config hangs that long
    and then fails. With the defaults (embedder 1.0 CPU; shards and bus
    partitions 0.05 CPU each) two embedders do not fit in 2 CPUs. Each embedder
    is shrunk to what is left (e.g. 0.92 CPU: still one torch thread, since the
    actor uses ``int(num_cpus)`` threads).
    """
    import memorybus

    cfg = memorybus.Config.embedded(data_dir, num_shards=args.shards, embedder_replicas=args.embedders)
    if args.embedder_cpus is not None:
        return cfg.with_(embedder_num_cpus=args.embedder_cpus)
    partitions = getattr(getattr(cfg, "bus", None), "partitions", 0)  # hub actors, where the package has them
    free = RAY_CPUS - (cfg.num_shards + partitions) * cfg.shard_num_cpus
    if free <= 0:
        raise SystemExit(
            f"{cfg.num_shards} shards + {partitions} hub actors x {cfg.shard_num_cpus} CPU"
            f" do not fit in {RAY_CPUS} CPUs"
        )
    if cfg.embedder_replicas * cfg.embedder_num_cpus > free:
        fit = int(100 * free / cfg.embedder_replicas) / 100
        log(f"bus: {cfg.embedder_replicas} embedders x {cfg.embedder_num_cpus} CPU do not fit; using {fit}")
        cfg = cfg.with_(embedder_num_cpus=fit)
    return cfg


def code_revision() -> dict[str, Any]:
    """The commit under test, and whether memorybus/ has uncommitted changes."""
    import subprocess

    def git(*cmd: str) -> str:
        try:
            out = subprocess.run(
                ["git", *cmd], cwd=_ROOT, capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return out.stdout.strip()

    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "memorybus")),
    }


def measure_bus(
    args: argparse.Namespace,
    data_dir: str,
    texts: list[str],
    queries: list[str],
    warmup: list[str],
    probes: list[str],
) -> dict[str, Any]:
    import ray

    import memorybus
    from memorybus import actors
    from memorybus.scopes import Context, Router

    cfg = bus_config(args, data_dir)
    log(
        f"bus: connecting (shards={cfg.num_shards}, embedders={cfg.embedder_replicas}"
        f" x {cfg.embedder_num_cpus} CPU, data_dir={data_dir})"
    )
    bus = None
    try:
        t0 = time.perf_counter()
        bus = memorybus.connect(cfg, num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
        bus.warm_up()  # this process's query model, loaded behind connect: timed recalls embed here
        connect_s = time.perf_counter() - t0
        before = bus.count()
        if before:
            raise SystemExit(f"data dir {data_dir} already holds {before} memories; use an empty one")

        # ---- ingest
        n = len(texts)
        per_user: dict[str, int] = {}
        call_s: list[float] = []
        prog = Progress("bus ingest", n)
        t_start = time.perf_counter()
        for call, start in enumerate(range(0, n, args.batch)):
            user = f"u{call % NUM_USERS}"
            ctx = Context(org="bench", user=user)
            items = [{"content": t, "scope": "user"} for t in texts[start : start + args.batch]]
            t0 = time.perf_counter()
            stored = bus.remember_many(items, ctx)
            call_s.append(time.perf_counter() - t0)
            if len(stored) != len(items):
                raise RuntimeError(f"remember_many returned {len(stored)} of {len(items)}")
            per_user[user] = per_user.get(user, 0) + len(items)
            prog.update(start + len(items))
        ingest_s = time.perf_counter() - t_start
        count = bus.count()
        if count != n:
            raise RuntimeError(f"bus holds {count} memories after ingesting {n}")

        shard_of_user = {
            u: Router(bus.config.num_shards).shard_for(Context(org="bench", user=u).scope.key) for u in sorted(per_user)
        }

        # ---- recall
        users = sorted(per_user)

        def ctx_for(i: int) -> Context:
            return Context(org="bench", user=users[i % len(users)])

        for i, q in enumerate(warmup):
            bus.recall(q, ctx_for(i), k=TOP_K)
        lat: list[float] = []
        empty = 0
        prog = Progress("bus recall", len(queries))
        for i, q in enumerate(queries):
            ctx = ctx_for(i)
            t0 = time.perf_counter()
            hits = bus.recall(q, ctx, k=TOP_K)
            lat.append(time.perf_counter() - t0)
            empty += not hits
            prog.update(i + 1)

        # ---- embed alone (distinct probe texts, so the embedder's cache cannot answer)
        embed_lat: list[float] = []
        for q in probes:
            t0 = time.perf_counter()
            bus.embed([q])
            embed_lat.append(time.perf_counter() - t0)

        stats = []
        for i in range(cfg.embedder_replicas):
            handle = ray.get_actor(actors.embedder_actor_name(cfg, i), namespace=cfg.namespace)
            stats.append(ray.get(handle.stats.remote(), timeout=30))
    finally:
        if bus is not None:
            bus.shutdown()
        ray.shutdown()

    return {
        "embedder_num_cpus": cfg.embedder_num_cpus,
        "connect_s": connect_s,
        "ingest_s": ingest_s,
        "ingest_rate": n / ingest_s,
        "ingest_call_ms": percentiles_ms(call_s),
        "memories_per_user": per_user,
        "shard_of_user": shard_of_user,
        "recall_ms": percentiles_ms(lat),
        "recall_empty": empty,
        "embed_one_ms": percentiles_ms(embed_lat),
        "embedder_stats": stats,
    }


# -------------------------------------------------------------------- report


def report(res: dict[str, Any]) -> str:
    raw, bus, r = res["raw"], res["bus"], res["ratios"]
    rows = [
        ("encode / ingest rate (items/s)", f"{raw['encode_rate']:.1f}", f"{bus['ingest_rate']:.1f}"),
        ("query p50 (ms)", f"{raw['query_ms']['p50']:.2f}", f"{bus['recall_ms']['p50']:.2f}"),
        ("query p95 (ms)", f"{raw['query_ms']['p95']:.2f}", f"{bus['recall_ms']['p95']:.2f}"),
        ("query mean (ms)", f"{raw['query_ms']['mean']:.2f}", f"{bus['recall_ms']['mean']:.2f}"),
        ("query max (ms)", f"{raw['query_ms']['max']:.2f}", f"{bus['recall_ms']['max']:.2f}"),
        (
            "query encode-only p50 (ms)",
            f"{raw['query_encode_only_ms']['p50']:.2f}",
            f"{bus['embed_one_ms']['p50']:.2f}",
        ),
        ("setup (s)", f"{raw['model_load_s']:.1f} (model)", f"{bus['connect_s']:.1f} (connect)"),
    ]
    busy = res["machine"]["loadavg_start"][0] > BUSY_LOADAVG
    w0 = max(len(a) for a, _, _ in rows)
    w1 = max(len("raw"), *(len(b) for _, b, _ in rows))
    w2 = max(len("memorybus"), *(len(c) for _, _, c in rows))
    p = res["params"]
    lines = [
        f"ingest_recall: n={p['n']} queries={p['queries']} shards={p['shards']} "
        f"embedders={p['embedders']} batch={p['batch']} seed={p['seed']} "
        f"cpus={res['machine']['cpus']} loadavg start={res['machine']['loadavg_start']}"
        f" end={res['machine']['loadavg_end']}"
        f" code={res['code']['commit']}{'+dirty' if res['code']['dirty'] else ''}",
        f"{'':<{w0}}  {'raw':>{w1}}  {'memorybus':>{w2}}",
        f"{'-' * w0}  {'-' * w1}  {'-' * w2}",
        *(f"{a:<{w0}}  {b:>{w1}}  {c:>{w2}}" for a, b, c in rows),
        "",
        f"ingest_ratio      = {r['ingest_ratio']:.3f}   (target >= {TARGET_INGEST_RATIO})"
        f"  {'OK' if r['ingest_ratio'] >= TARGET_INGEST_RATIO else 'MISS'}",
        f"recall_p50_ratio  = {r['recall_p50_ratio']:.3f}   (target <= {TARGET_RECALL_P50_RATIO})"
        f"  {'OK' if r['recall_p50_ratio'] <= TARGET_RECALL_P50_RATIO else 'MISS'}",
        f"recall_p95_ratio  = {r['recall_p95_ratio']:.3f}",
        f"memories/user: {bus['memories_per_user']}  shard/user: {bus['shard_of_user']}",
        f"empty recalls: {bus['recall_empty']}  embedder stats: {bus['embedder_stats']}",
        f"raw encodes: {raw['texts']}; raw searches the asked user's vectors {raw['visible_vectors_searched']}",
        f"SentenceTransformer.encode path: encode {raw['sentence_transformers_path']['encode_rate']:.1f}/s,"
        f" query p50 {raw['sentence_transformers_path']['query_ms']['p50']:.2f} ms",
    ]
    if busy:
        lines.append(
            f"WARNING: 1-min loadavg was {res['machine']['loadavg_start'][0]} at start (> {BUSY_LOADAVG}):"
            " other processes share the CPUs, so rates and ratios are not reliable."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ray_tmp = prepare_env()  # before anything imports ray
    own_data = args.data_dir is None
    data_dir = tempfile.mkdtemp(prefix="mbb-data-") if own_data else os.path.abspath(args.data_dir)
    load_start = [round(x, 2) for x in os.getloadavg()]
    try:
        texts = make_texts(args.n, args.seed)
        n_probes = min(args.queries, 50)
        queries = make_queries(args.queries + WARMUP_QUERIES + n_probes, args.seed, exclude=set(texts))
        warmup, probes = queries[:WARMUP_QUERIES], queries[WARMUP_QUERIES : WARMUP_QUERIES + n_probes]
        queries = queries[WARMUP_QUERIES + n_probes :]
        words = [len(t.split()) for t in texts]
        log(
            f"texts: {len(texts)} (words/text min {min(words)} mean {sum(words) / len(words):.1f} "
            f"max {max(words)}), queries: {len(queries)} (+{len(warmup)} warm-up)"
        )
        log(f"example text:  {texts[0]}")
        log(f"example query: {queries[0]}")

        from memorybus.config import Config

        model_path = Config().resolved_model_path()
        raw_texts, raw_mode = model_texts(texts)
        log(f"raw baseline encodes: {raw_mode}")
        raw = measure_raw(model_path, raw_texts, queries, warmup, args.batch)
        raw["texts"] = raw_mode
        st = measure_raw(model_path, raw_texts, queries, warmup, args.batch, lean=False)
        raw["sentence_transformers_path"] = {"encode_rate": st["encode_rate"], "query_ms": st["query_ms"]}
        bus = measure_bus(args, data_dir, texts, queries, warmup, probes)
    finally:
        if own_data:
            shutil.rmtree(data_dir, ignore_errors=True)
        shutil.rmtree(ray_tmp, ignore_errors=True)

    res: dict[str, Any] = {
        "params": {
            "n": args.n,
            "queries": args.queries,
            "shards": args.shards,
            "embedders": args.embedders,
            "batch": args.batch,
            "seed": args.seed,
            "k": TOP_K,
        },
        "code": code_revision(),
        "machine": {
            "cpus": os.cpu_count(),
            "loadavg_start": load_start,
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        },
        "raw": raw,
        "bus": bus,
        "ratios": {
            "ingest_ratio": bus["ingest_rate"] / raw["encode_rate"],
            "recall_p50_ratio": bus["recall_ms"]["p50"] / raw["query_ms"]["p50"],
            "recall_p95_ratio": bus["recall_ms"]["p95"] / raw["query_ms"]["p95"],
            "ingest_ratio_vs_sentence_transformers_path": bus["ingest_rate"] / st["encode_rate"],
            "recall_p50_ratio_vs_sentence_transformers_path": bus["recall_ms"]["p50"] / st["query_ms"]["p50"],
        },
        "note": "raw side: the bus's encoder path over one user's vectors; on a shared machine: indicative",
        "targets": {"ingest_ratio_min": TARGET_INGEST_RATIO, "recall_p50_ratio_max": TARGET_RECALL_P50_RATIO},
    }
    print(report(res))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2, sort_keys=True) + "\n")
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
