"""Recall latency through the bus at two sizes (10K and 1M memories by default), each
against a raw baseline that searches the same number of visible vectors.

For each size in ``--sizes`` a data directory of the embedded default (``--shards``
shards) is filled with that many memories spread round robin over ``--users`` user
scopes, written as the shard actors write them (the key ring ``connect`` makes, then
each shard opened with :func:`memorybus.shard.build.open_shard` and written through
``Shard.put_many``, one process per shard, ``--jobs`` at a time): the texts of
:func:`benchmarks.common.make_texts`, random unit vectors standing in for their
embeddings (embedding a million texts with the model takes hours on 2 cores; what a
search costs depends on how many vectors it scans, not their values). A shard holding
more than the exact-search limit gets its HNSW graph built as the maintenance actor
builds it (``Shard.build_vector_index``: a copy optimised in another process, swapped
in), so recall at size takes the index path a long-running bus takes. Then
``memorybus.connect`` opens the directory (timed: every shard rebuilds its in-memory
indexes from SQLite), and ``--queries`` recalls (``k=10``, default hybrid ranking,
query embedded by the model in this process) are timed, each paired with the raw
baseline's: the model encodes the query and numpy brute-forces its top 10 over as
many random unit vectors as the user's recall may return (``size / users``).

Reported per size: bus and raw p50/p95 and their ratio; and across sizes the bus's
p50 at the largest size over its p50 at the smallest (target for 1M against 10K:
<= 2x), with the raw baseline's ratio beside it. The directories are kept under
``--dir`` and reused by later runs (``--rebuild`` starts them again), so two versions
of the code can be timed on the same data.

Example::

    python benchmarks/recall_at_size.py --sizes 10000,1000000 --dir /tmp/mb-size
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, log, make_queries, make_texts, parser, percentiles_ms  # noqa: E402

NAMESPACE = "mb_size"
ORG = "bench"
DIM = 384
BATCH = 1000
DONE = "prefill.json"


def _config(data_dir: str, shards: int) -> Any:
    from memorybus.config import Config

    return Config.embedded(data_dir, num_shards=shards, namespace=NAMESPACE)


def users_of(shard: int, users: int, shards: int) -> list[int]:
    """The users whose scope the router puts on ``shard``."""
    from memorybus.scopes import Router, Scope

    router = Router(shards)
    return [u for u in range(users) if router.shard_for(Scope(ORG, f"u{u}").key) == shard]


def fill_shard(data_dir: str, shard: int, n: int, users: int, shards: int) -> dict[str, Any]:
    """Write shard ``shard``'s share of ``n`` memories (memory ``i`` belongs to user
    ``i % users``), then build its vector index's HNSW graph when it is big enough."""
    import numpy as np

    from memorybus.auth.keyring import derived_key
    from memorybus.memory.model import MemoryNode
    from memorybus.scopes import Context, Scope, shard_name
    from memorybus.shard.build import open_shard

    cfg = _config(data_dir, shards)
    mine = users_of(shard, users, shards)
    texts = make_texts(n)
    s = open_shard(cfg, shard_name(shard), audit_key=derived_key(cfg, "audit checkpoint"))
    t0 = time.perf_counter()
    written = 0
    try:
        for u in mine:
            rng = np.random.default_rng(1000 + u)
            ctx = Context(ORG, f"u{u}", "writer", "s1")
            scope = Scope(ORG, f"u{u}")
            rows = range(u, n, users)
            for lo in range(0, len(rows), BATCH):
                part = rows[lo : lo + BATCH]
                vecs = rng.standard_normal((len(part), DIM), dtype=np.float32)
                vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
                s.put_many(ctx, [MemoryNode(content=texts[i], scope=scope) for i in part], vecs)
                written += len(part)
        write_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        build = s.build_vector_index()
        return {"shard": shard, "users": mine, "memories": written, "write_s": round(write_s, 1),
                "build": build, "build_s": round(time.perf_counter() - t1, 1)}  # fmt: skip
    finally:
        s.close()


def prefill(data_dir: str, n: int, users: int, shards: int, jobs: int) -> dict[str, Any]:
    """The data directory for ``n`` memories, made once (a marker file records it)."""
    marker = os.path.join(data_dir, DONE)
    if os.path.exists(marker):
        done: dict[str, Any] = json.loads(Path(marker).read_text())
        if (done["n"], done["users"], done["shards"]) == (n, users, shards):
            return done
        raise SystemExit(f"{data_dir} holds another corpus ({done}); pass --rebuild")
    from memorybus.auth.keyring import derived_key

    os.makedirs(data_dir, exist_ok=True)
    derived_key(_config(data_dir, shards), "audit checkpoint")  # the key ring, once, before the shards' processes
    t0 = time.perf_counter()
    pending = list(range(shards))
    running: list[tuple[int, subprocess.Popen[str]]] = []
    results = []
    while pending or running:
        while pending and len(running) < jobs:
            i = pending.pop(0)
            cmd = [sys.executable, __file__, "--fill-shard", str(i), "--dir", data_dir,
                   "--n", str(n), "--users", str(users), "--shards", str(shards)]  # fmt: skip
            running.append((i, subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)))
        i, proc = running.pop(0)
        out, _ = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"filling shard {i} failed ({proc.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
        log(f"  shard {i}: {results[-1]}")
    done = {"n": n, "users": users, "shards": shards, "seconds": round(time.perf_counter() - t0, 1),
            "shards_filled": results}  # fmt: skip
    Path(marker).write_text(json.dumps(done))
    return done


def measure(data_dir: str, n: int, users: int, shards: int, queries: list[str], warm: list[str]) -> dict[str, Any]:
    """connect() to the filled directory, then paired raw / bus recalls."""
    import numpy as np

    import memorybus
    from memorybus.evaluation.raw import RawModel
    from memorybus.scopes import Context

    raw = RawModel(_config(data_dir, shards).resolved_model_path())
    visible = max(1, n // users)
    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((visible, DIM), dtype=np.float32)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    for q in warm:
        raw.query(q, corpus)
    t0 = time.perf_counter()
    bus = memorybus.connect(_config(data_dir, shards), num_cpus=3, include_dashboard=False, log_to_driver=False)
    connect_s = time.perf_counter() - t0
    try:
        bus.warm_up()
        count = bus.count()
        ctxs = [Context(ORG, f"u{u}", "reader", "s2") for u in range(users)]
        for i, q in enumerate(warm):
            bus.recall(q, ctxs[i % users], k=10)
        raw_lat, bus_lat, returned = [], [], []
        for i, q in enumerate(queries):
            raw_lat.append(raw.query(q, corpus)[1])
            t1 = time.perf_counter()
            hits = bus.recall(q, ctxs[i % users], k=10)
            bus_lat.append(time.perf_counter() - t1)
            returned.append(len(hits))
    finally:
        bus.shutdown()
        import ray

        ray.shutdown()
        raw.close()
    raw_ms, bus_ms = percentiles_ms(raw_lat), percentiles_ms(bus_lat)
    return {
        "memories": count,
        "visible_per_user": visible,
        "connect_s": round(connect_s, 1),
        "raw_ms": raw_ms,
        "bus_ms": bus_ms,
        "ratio_p50": bus_ms["p50"] / raw_ms["p50"],
        "ratio_p95": bus_ms["p95"] / raw_ms["p95"],
        "hits_mean": float(np.mean(returned)),
    }


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--sizes", default="10000,1000000")
    p.add_argument("--users", type=int, default=10)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--jobs", type=int, default=2, help="shards filled at once (one process each)")
    p.add_argument("--dir", default="/tmp/memorybus-size", help="where the data directories live (reused)")
    p.add_argument("--rebuild", action="store_true", help="fill the directories again")
    p.add_argument("--fill-shard", type=int, default=None, help=argparse_hidden())
    p.add_argument("--measure", type=int, default=None, help=argparse_hidden())
    p.add_argument("--n", type=int, default=None, help=argparse_hidden())
    args = p.parse_args(argv)
    sizes = sorted(int(x) for x in args.sizes.split(",") if x)
    if args.fill_shard is not None:  # a child of prefill()
        print(json.dumps(fill_shard(args.dir, args.fill_shard, args.n, args.users, args.shards), default=float))
        return 0
    if args.measure is not None:  # a child of main(): a fresh process (and Ray, and query cache) per size
        from benchmarks.common import prepare_env

        ray_tmp = prepare_env()
        qs = make_queries(args.queries + 10, exclude=set(make_texts(min(sizes))))
        try:
            got = measure(os.path.join(args.dir, f"n{args.measure}"), args.measure, args.users, args.shards,
                          qs[10:], qs[:10])  # fmt: skip
        finally:
            import shutil

            shutil.rmtree(ray_tmp, ignore_errors=True)
        print(json.dumps({**got, "loadavg": os.getloadavg()}, default=float))
        return 0
    import shutil

    res: dict[str, Any] = {"users": args.users, "shards": args.shards, "queries": args.queries, "cpus": os.cpu_count()}
    for n in sizes:
        data_dir = os.path.join(args.dir, f"n{n}")
        if args.rebuild:
            shutil.rmtree(data_dir, ignore_errors=True)
        log(f"size {n}: filling {data_dir} (reused when present) ...")
        filled = prefill(data_dir, n, args.users, args.shards, args.jobs)
        log(f"size {n}: connect and {args.queries} recalls, in a fresh process ...")
        cmd = [sys.executable, __file__, "--measure", str(n), "--sizes", args.sizes, "--dir", args.dir,
               "--users", str(args.users), "--shards", str(args.shards), "--queries", str(args.queries)]  # fmt: skip
        done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
        if done.returncode:
            raise SystemExit(f"measuring size {n} failed ({done.returncode})")
        res[str(n)] = {"prefill": filled, **json.loads(done.stdout.strip().splitlines()[-1])}
    lo, hi = res[str(sizes[0])], res[str(sizes[-1])]
    res["growth"] = {
        "bus_p50": hi["bus_ms"]["p50"] / lo["bus_ms"]["p50"],
        "raw_p50": hi["raw_ms"]["p50"] / lo["raw_ms"]["p50"],
        "target": "bus p50 at the largest size <= 2x its p50 at the smallest",
    }
    res["note"] = "random unit vectors stand in for the memories' embeddings; measured on a shared machine"
    emit(res, args.out)
    return 0


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    sys.exit(main())
