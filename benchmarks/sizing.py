"""Storage per memory, measured: Redis memory (INFO used_memory) and AOF, SQLite file, Qdrant Edge vectors.

Writes N memories of realistic length (about 150-250 characters, 384-dim vectors) through a
real shard (:func:`memorybus.shard.build.open_shard`, the same write path the shard actor
runs: records, event log, operation records, audit chain, vector index) into a private
redis-server and into the embedded backend, then prints bytes per memory and the figure
extrapolated to one million memories. No model and no Ray: vectors are random unit
vectors (the store holds them as float32 whatever the encoder).

    python benchmarks/sizing.py --memories 20000
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import emit, parser

_WORDS = ("the deploy of the billing service moved to friday because the database migration needs a "  # noqa: SIM905
          "second review alice prefers postgres over mysql for analytics bob owns the frontend release "
          "and asked for a rollback plan the customer in berlin reported slow searches after the "
          "upgrade carol will pair with dave on the cache layer next sprint").split()


def _text(rng: random.Random) -> str:
    """A memory's content: 150-250 characters of plausible note text."""
    want = rng.randint(150, 250)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < want:
        words.append(rng.choice(_WORDS))
    return (" ".join(words)[:want]).capitalize() + "."


def _du(path: str | os.PathLike[str]) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def _write(config: Any, n: int, batch: int, seed: int) -> float:
    from memorybus import Context, MemoryNode, Scope
    from memorybus.shard.build import open_shard

    rng = random.Random(seed)
    vec_rng = np.random.default_rng(seed)
    shard = open_shard(config, "shard-0")
    ctx = Context("acme", "u1", "planner", "s1")
    scope = Scope("acme", "u1")
    started = time.perf_counter()
    try:
        for start in range(0, n, batch):
            m = min(batch, n - start)
            nodes = [MemoryNode(content=_text(rng), scope=scope) for _ in range(m)]
            vecs = vec_rng.standard_normal((m, config.vector_dim())).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            shard.put_many(ctx, nodes, vecs)
        shard.flush()
    finally:
        shard.close()
    return time.perf_counter() - started


def _redis(n: int, batch: int, seed: int, tmp: str) -> dict[str, float]:
    import redis

    from memorybus import Config

    port = 20000 + os.getpid() % 10000
    rdir = os.path.join(tmp, "redis")
    os.makedirs(rdir)
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", rdir, "--appendonly", "yes",
         "--appendfsync", "always", "--save", ""],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        client = redis.Redis(port=port)
        for _ in range(100):
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
        before = int(client.info("memory")["used_memory"])
        config = Config.redis(f"redis://127.0.0.1:{port}/0", data_dir=os.path.join(tmp, "redis-bus"), num_shards=1)
        seconds = _write(config, n, batch, seed)
        after = int(client.info("memory")["used_memory"])
        dataset = int(client.info("memory")["used_memory_dataset"])
        client.bgrewriteaof()  # the AOF as a restart would find it after a rewrite
        for _ in range(600):
            if int(client.info("persistence")["aof_rewrite_in_progress"]) == 0:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        aof = _du(rdir)
        vectors = _du(os.path.join(tmp, "redis-bus"))
        client.shutdown(nosave=True)
    finally:
        server.terminate()
        server.wait(10)
    return {"write_seconds": seconds, "used_memory_per_memory": (after - before) / n,
            "used_memory_dataset_bytes": dataset, "aof_after_rewrite_per_memory": aof / n,
            "vectors_on_node_disk_per_memory": vectors / n}  # fmt: skip


def _embedded(n: int, batch: int, seed: int, tmp: str) -> dict[str, float]:
    from memorybus import Config
    from memorybus.storage.factory import local_index_dir, sqlite_path

    config = Config(data_dir=os.path.join(tmp, "embedded"), num_shards=1)
    seconds = _write(config, n, batch, seed)
    db = sqlite_path(config, "shard-0")
    sqlite = sum(os.path.getsize(db + s) for s in ("", "-wal", "-shm") if os.path.exists(db + s))
    vectors = _du(local_index_dir(config, "shard-0") or "")
    return {"write_seconds": seconds, "sqlite_per_memory": sqlite / n, "vectors_per_memory": vectors / n,
            "data_dir_per_memory": _du(os.path.join(tmp, "embedded")) / n}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--memories", type=int, default=20000)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mb-sizing-", ignore_cleanup_errors=True) as tmp:
        result: dict[str, Any] = {"memories": args.memories, "content_chars": "150-250", "embedding_dim": 384}
        result["redis"] = _redis(args.memories, args.batch, args.seed, tmp)
        result["embedded"] = _embedded(args.memories, args.batch, args.seed, tmp)
        per_million = {
            "redis_used_memory_GiB": result["redis"]["used_memory_per_memory"] * 1e6 / 2**30,
            "redis_aof_GiB": result["redis"]["aof_after_rewrite_per_memory"] * 1e6 / 2**30,
            "vectors_disk_GiB": result["embedded"]["vectors_per_memory"] * 1e6 / 2**30,
            "sqlite_GiB": result["embedded"]["sqlite_per_memory"] * 1e6 / 2**30,
        }
        result["per_million"] = per_million
        emit(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
