"""Store ingest and recall on one Redis against a Redis Cluster of 1, 2 and 3 primaries.

Every setting holds the same data: ``--shards`` shard stores (``RedisStore``, one hash
tag each), ``--n`` memories in all (384-dimension vectors, the bus's model size) written
in batches of ``--batch`` (each batch one commit script: its memories and one event),
one client process per shard, as one shard actor per shard writes. Recall reads what a
shard's recall reads from its store after the vector search: ``get_many`` of 10 of the
shard's memories, ``--queries`` per shard. Every server runs ``appendonly yes`` with
``appendfsync always`` on loopback; cluster nodes are started as tests/redis_cluster.py
starts them (``--replicas``: replicas per primary, then every commit waits for them
with ``WAIT``).

Every setting is started first, then measured in ``--rounds`` interleaved rounds (medians
reported), so that a busy spell on a shared machine hits every setting alike.
It prints memories/s and recalls/s for each setting and the ratios ``cluster/single``
(target for 3 primaries: >= 0.9, judged on the ratios paired round by round) and ``N
primaries / 1 primary`` (the scaling figure).
A shared 2-core machine cannot show scaling: the servers and clients share its cores;
run it where there are more. Example::

    python benchmarks/redis_cluster.py --n 20000 --shards 6
"""

from __future__ import annotations

import multiprocessing as mp
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from benchmarks.common import emit, log, parser  # noqa: E402

DIM = 384
TARGET_RATIO = 0.9


def _worker(args: tuple[str, str, int, int, int, int, int]) -> tuple[float, float]:
    """Write ``n`` memories into one shard, then time ``queries`` recalls; returns the
    seconds of each phase."""
    import random

    import numpy as np

    from memorybus import MemoryNode, Scope
    from memorybus.storage import WriteBatch
    from memorybus.storage.redis import RedisStore

    url, namespace, n, batch, queries, wait, seed = args
    store = RedisStore(url, namespace, "shard-0", wait_replicas=wait, wait_timeout=5.0)
    rng = np.random.default_rng(seed)
    scope = Scope("acme", f"u{seed}")
    ids: list[str] = []
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        nodes = [MemoryNode(content=f"memory {seed}-{i} about the project", scope=scope,
                            embedding=rng.standard_normal(DIM).astype(np.float32))
                 for i in range(start, min(n, start + batch))]
        store.commit(WriteBatch(puts=nodes, events=[(scope.key, b"e" * 64)]))
        ids += [node.id for node in nodes]
    ingest = time.perf_counter() - t0
    pick = random.Random(seed)
    t0 = time.perf_counter()
    for _ in range(queries):
        got = store.get_many(pick.sample(ids, 10))
        assert all(node is not None for node in got)
    recall = time.perf_counter() - t0
    store.clear()
    store.close()
    return ingest, recall


def measure(url: str, label: str, opts: Any, wait: int = 0) -> dict[str, Any]:
    per = opts.n // opts.shards
    jobs = [(url, f"bench{i}", per, opts.batch, opts.queries, wait, i) for i in range(opts.shards)]
    with mp.get_context("spawn").Pool(opts.shards) as pool:
        times = pool.map(_worker, jobs)
    ingest = per * opts.shards / max(t for t, _ in times)
    recall = opts.queries * opts.shards / max(r for _, r in times)
    log(f"{label:<22} ingest {ingest:9.0f} memories/s   recall {recall:9.0f} recalls/s")
    return {"setting": label, "ingest_per_s": round(ingest), "recall_per_s": round(recall)}


def servers(tmp: Path, opts: Any) -> list[tuple[str, str, int, Any]]:
    """Start every setting: ``(label, url, replicas to wait for, stop)``."""
    from tests.conftest import RedisServer
    from tests.redis_cluster import LocalRedisCluster

    server = RedisServer(tmp / "single")
    server.dir.mkdir()
    server.start()
    out: list[tuple[str, str, int, Any]] = [("single Redis", server.url, 0, server.stop)]
    for masters in (int(m) for m in opts.masters.split(",")):
        c = LocalRedisCluster(tmp / f"cluster-{masters}", masters=masters, replicas=opts.replicas)
        c.start()
        label = f"cluster, {masters} primar{'y' if masters == 1 else 'ies'}"
        out.append((label, c.url, opts.replicas, c.stop))
    return out


def summarise(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per setting (the first is the single Redis, the second the 1-primary cluster):
    the median rates over the rounds, their ratios, and the ratios to the single Redis paired
    round by round (each round's rate over the single Redis's rate in that round: a busy
    spell of the shared machine moves both), as median, min and max."""
    labels = list(runs)
    rows: list[dict[str, Any]] = [
        {"setting": label, "ingest_per_s": int(statistics.median(x["ingest_per_s"] for x in runs[label])),
         "recall_per_s": int(statistics.median(x["recall_per_s"] for x in runs[label]))} for label in labels]
    base, one = rows[0], rows[1]
    for label, row in zip(labels[1:], rows[1:], strict=True):
        row["ingest_vs_single"] = round(row["ingest_per_s"] / base["ingest_per_s"], 3)
        row["recall_vs_single"] = round(row["recall_per_s"] / base["recall_per_s"], 3)
        row["ingest_vs_1_primary"] = round(row["ingest_per_s"] / one["ingest_per_s"], 3)
        row["recall_vs_1_primary"] = round(row["recall_per_s"] / one["recall_per_s"], 3)
        for what in ("ingest", "recall"):
            ratios = [mine[f"{what}_per_s"] / single[f"{what}_per_s"]
                      for mine, single in zip(runs[label], runs[labels[0]], strict=True)]
            row[f"{what}_vs_single_paired"] = {"median": round(statistics.median(ratios), 3),
                                               "min": round(min(ratios), 3), "max": round(max(ratios), 3)}
    return rows


def _spread(r: dict[str, float]) -> str:
    return f"{r['median']} ({r['min']}-{r['max']})"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = parser(__doc__)
    p.add_argument("--n", type=int, default=12_000, help="memories in all (default 12000)")
    p.add_argument("--shards", type=int, default=6, help="shard stores, one client process each (default 6)")
    p.add_argument("--batch", type=int, default=64, help="memories per commit (default 64)")
    p.add_argument("--queries", type=int, default=1000, help="recalls per shard (default 1000)")
    p.add_argument("--replicas", type=int, default=0, help="replicas per cluster primary, waited for (default 0)")
    p.add_argument("--masters", default="1,2,3", help="cluster sizes to run (default 1,2,3)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported (default 3)")
    opts = p.parse_args(argv)
    for tool in ("redis-server", "redis-cli"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} is not on PATH")
    tmp = Path(tempfile.mkdtemp(prefix="mb-rcluster-"))
    started: list[tuple[str, str, int, Any]] = []
    try:
        started = servers(tmp, opts)
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label, *_ in started}
        for r in range(opts.rounds):  # interleaved, so that a busy spell hits every setting alike
            log(f"round {r + 1}/{opts.rounds}")
            for label, url, wait, _ in started:
                runs[label].append(measure(url, label, opts, wait))
    finally:
        for *_, stop in started:
            stop()
        shutil.rmtree(tmp, ignore_errors=True)
    rows = summarise(runs)
    print(f"{'setting':<22} {'ingest/s':>9} {'recall/s':>9} {'ingest/single':>14} {'recall/single':>14} "
          f"{'ingest/1p':>10} {'recall/1p':>10}")
    for row in rows:
        print(f"{row['setting']:<22} {row['ingest_per_s']:>9} {row['recall_per_s']:>9} "
              f"{row.get('ingest_vs_single', 1.0):>14} {row.get('recall_vs_single', 1.0):>14} "
              f"{row.get('ingest_vs_1_primary', '-'):>10} {row.get('recall_vs_1_primary', '-'):>10}")
    cores = subprocess.run(["nproc"], capture_output=True, text=True, check=False).stdout.strip()
    result = {"n": opts.n, "shards": opts.shards, "batch": opts.batch, "queries": opts.queries,
              "replicas": opts.replicas, "rounds": opts.rounds, "cores": cores, "rows": rows}
    for row in rows[1:]:
        print(f"{row['setting']:<22} paired by round, median (min-max): ingest/single "
              f"{_spread(row['ingest_vs_single_paired'])}, recall/single {_spread(row['recall_vs_single_paired'])}")
    three = next((r for r in rows if r["setting"].startswith("cluster, 3")), None)
    if three is not None:
        ok = (three["ingest_vs_single_paired"]["median"] >= TARGET_RATIO
              and three["recall_vs_single_paired"]["median"] >= TARGET_RATIO)
        print(f"3 primaries within 10% of a single Redis (paired medians): {'yes' if ok else 'no'} "
              f"(cores here: {cores})")
    emit(result, opts.out)
    return result


if __name__ == "__main__":
    main()
