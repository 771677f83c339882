"""How long a shard takes to start over N memories (no Ray, no model): the time from
opening its SQLite store and Qdrant Edge index to serving, after a clean stop and
after a crash (no checkpoint).

    python benchmarks/restart_time.py --n 100000 --dir /tmp/restart-100k

The first run writes N memories with precomputed random unit vectors (dimension 384,
MiniLM's) into ``--dir``: short notes (``--texts short``, the default) or the chat-like
turns of ``benchmarks.common.make_texts`` (``--texts chat``: a dated prefix, names and
places, so the rebuild parses times and extracts entities as it does for conversation
turns); later runs reuse them, so two versions of the code can be
timed on the same data (run it with each on ``PYTHONPATH``). Each timing is printed
with the machine's load average: on a shared machine, compare runs of equal load.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

DIM = 384


def _open(directory: str):  # type: ignore[no-untyped-def]
    from memorybus.shard import Shard
    from memorybus.storage.sqlite import SqliteStore
    from memorybus.storage.vectors import EdgeVectorIndex

    return Shard("shard-0", SqliteStore(os.path.join(directory, "records.sqlite")),
                 EdgeVectorIndex(os.path.join(directory, "vectors"), DIM), dim=DIM)


def _build(directory: str, n: int, texts: str = "short", batch: int = 1000) -> float:
    from memorybus import Context, MemoryNode

    if texts == "chat":
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from benchmarks.common import make_texts

        contents = make_texts(n)
    else:
        contents = [f"note {i}: topic {i % 997} at step {i // 997}" for i in range(n)]

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    contexts = [Context("acme", f"u{i}", "agent") for i in range(10)]
    start = time.perf_counter()
    shard = _open(directory)
    for lo in range(0, n, batch):
        for ctx in contexts:  # ten users: ten scopes
            rows = [i for i in range(lo, min(n, lo + batch)) if i % len(contexts) == contexts.index(ctx)]
            if not rows:
                continue
            nodes = [MemoryNode(content=contents[i], scope=ctx.scope) for i in rows]
            shard.put_many(ctx, nodes, vectors[rows])
    shard.close()
    return time.perf_counter() - start


def _start(directory: str) -> dict[str, object]:
    load = os.getloadavg()[0]
    start = time.perf_counter()
    shard = _open(directory)
    seconds = time.perf_counter() - start
    out = {"seconds": round(seconds, 2), "memories": shard.count(), "load_1min": round(load, 1),
           "trusted": getattr(getattr(shard, "core", None), "index_trusted", None)}
    shard.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="memories in the shard")
    ap.add_argument("--dir", default="/tmp/memorybus-restart", help="where the shard lives (reused)")
    ap.add_argument("--texts", choices=("short", "chat"), default="short", help="what the memories say (see above)")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    report: dict[str, object] = {"n": args.n, "cpus": os.cpu_count(), "texts": args.texts}
    if not os.path.exists(os.path.join(args.dir, "records.sqlite")):
        report["build_seconds"] = round(_build(args.dir, args.n, args.texts), 1)
    report["first_start"] = _start(args.dir)  # after the build's (or a previous run's) clean stop
    report["clean_restart"] = _start(args.dir)
    checkpoint = os.path.join(args.dir, "vectors.checkpoint")
    if os.path.exists(checkpoint):
        os.remove(checkpoint)  # as a crash leaves it after a write: the index must be rebuilt
    report["restart_after_crash"] = _start(args.dir)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
