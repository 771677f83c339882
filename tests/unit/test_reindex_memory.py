"""Re-indexing a memory reuses its rows: 3,000 updates of one memory grow neither the
shard's derived indexes nor its memory (issue 10, item 17)."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

from memorybus import Context, ManualClock, MemoryNode
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

DIM = 384
CTX = Context("acme", "u1", "planner", "s1")


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.mark.slow
def test_updating_one_memory_3000_times_does_not_grow_the_shard(tmp_path):
    rng = np.random.default_rng(0)
    shard = Shard("shard-0", SqliteStore(tmp_path / "r.sqlite"), EdgeVectorIndex(tmp_path / "v", DIM), dim=DIM,
                  clock=ManualClock(), dedupe=False, detect_contradictions=False)
    others = shard.put_many(CTX, [MemoryNode(content=f"other memory {i}", scope=CTX.scope) for i in range(7)],
                            np.stack([unit(rng) for _ in range(7)]))
    node = shard.put_many(CTX, [MemoryNode(content="the hot memory v0", scope=CTX.scope)], unit(rng)[None, :])[0]
    structure = shard._recall.structure
    version = 1

    def churn(n: int) -> None:
        nonlocal version
        for i in range(n):
            if i % 2:
                changes = {"importance": float(1 + i % 9)}
                vector = None
            else:
                changes = {"content": f"the hot memory v{version}"}
                vector = unit(rng)
            shard.update(CTX, node.id, version, changes, vector)
            version += 1

    churn(300)  # warm up: buffers reach their working size
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    churn(3000)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert shard.index.count() == 8 and shard.count() == 8
    assert len(structure.vectors) == 8
    assert structure.vectors.rows() <= 64  # vector rows allocated, live or dead
    assert structure.keywords.slots() <= 64  # keyword document slots, live or dead
    assert grown < 1_000_000, f"{grown} bytes retained by 3,000 re-indexes"
    hits = shard.search(CTX, shard.get(CTX, node.id, with_embedding=True).embedding, 3, query="hot memory")
    assert hits[0].node.id == node.id and hits[0].node.version == version
    assert {o.id for o in others} <= {n.id for n in shard.list_memories(CTX, scope_key=CTX.scope.key, limit=10_000)}
    shard.close()
