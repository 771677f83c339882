"""What the audit trail costs the shard's write path: put_many per memory, in process.

A plain Shard over a real SQLite file and Qdrant Edge, random 384-d vectors (no
model: the embedder is not what is measured), batches of ``--batch`` new memories.
``--no-audit`` runs the same code with the audit trail switched off. Run it against
a checkout without the audit trail (PYTHONPATH) for the before/after.

    python benchmarks/audit_overhead.py --memories 3000 --batch 100 [--no-audit]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np

from memorybus import Context, MemoryNode
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex


def run(memories: int, batch: int, audit: bool, dim: int = 384) -> float:
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as d:
        shard = Shard("shard-0", SqliteStore(f"{d}/r.sqlite"), EdgeVectorIndex(f"{d}/v", dim), dim=dim)
        if not audit and getattr(shard.core, "audit", None) is not None:
            shard.core.commits.audit = None
            shard.core.audit = None
        ctx = Context("acme", "u1", "planner")
        spent = 0.0
        for start in range(0, memories, batch):
            nodes = [MemoryNode(content=f"memory {start + i}: the build {rng.integers(1e9)} passed on node "
                                f"{rng.integers(100)}", scope=ctx.scope) for i in range(batch)]  # fmt: skip
            vectors = rng.normal(size=(batch, dim)).astype(np.float32)
            t = time.perf_counter()
            shard.put_many(ctx, nodes, vectors)
            spent += time.perf_counter() - t
        shard.close()
    return spent / memories * 1e6


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--memories", type=int, default=3000)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-audit", action="store_true")
    args = p.parse_args()
    runs = [run(args.memories, args.batch, not args.no_audit) for _ in range(args.repeats)]
    print(f"put_many: {statistics.median(runs):.1f} us per memory (median of {runs!r})")


if __name__ == "__main__":
    main()
