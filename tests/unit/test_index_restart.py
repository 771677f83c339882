"""The on-disk vector index is trusted on restart only when its checkpoint matches the
store (real SQLite, real Qdrant Edge; random unit vectors, no model)."""

import numpy as np
import pytest

from memorybus import Context, ManualClock, MemoryNode, MemoryStatus
from memorybus.config import RankingWeights
from memorybus.shard import Shard
from memorybus.storage.base import WriteBatch
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

DIM = 16
CTX = Context("acme", "u1", "planner", "s1")


def vecs(n, seed):
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def open_shard(tmp_path):
    # exact_dense_limit=0: every search asks the vector index
    return Shard("shard-0", SqliteStore(tmp_path / "r.sqlite"), EdgeVectorIndex(tmp_path / "v", DIM), dim=DIM,
                 clock=ManualClock(), ranking=RankingWeights(exact_dense_limit=0))


def put(shard, n, seed):
    nodes = [MemoryNode(content=f"memory {seed}-{i}", scope=CTX.scope) for i in range(n)]
    return shard.put_many(CTX, nodes, vecs(n, seed))


def crash(shard):
    """Stop without a clean close: no checkpoint is written, nothing is flushed."""
    shard.core.index.index.close()
    shard.store.close()


def top(shard, vector):
    return shard.index.search(vector, 1, scope_keys=[CTX.scope.key])[0][0]


@pytest.fixture
def written(tmp_path):
    shard = open_shard(tmp_path)
    stored = put(shard, 30, 1)
    return shard, stored


def test_a_clean_restart_trusts_the_index(tmp_path, written):
    shard, stored = written
    assert not shard.core.index_trusted  # a new, empty store: built (and checkpointed)
    shard.close()
    again = open_shard(tmp_path)
    assert again.core.index_trusted and again.index.count() == 30
    assert top(again, vecs(30, 1)[7]) == stored[7].id
    again.close()


def test_a_crash_after_a_write_rebuilds(tmp_path, written):
    shard, _ = written
    shard.close()
    again = open_shard(tmp_path)
    (late,) = put(again, 1, 2)  # the first change removes the checkpoint
    crash(again)
    third = open_shard(tmp_path)
    assert not third.core.index_trusted and third.index.count() == 31
    assert top(third, vecs(1, 2)[0]) == late.id
    third.close()


def test_an_idle_checkpoint_makes_a_crash_restart_cheap(tmp_path, written):
    shard, stored = written
    archived = shard.update(CTX, stored[0].id, 1, {"status": MemoryStatus.ARCHIVED})
    assert shard.checkpoint_index(idle=0.0)  # what the actor's timer does once writes pause
    crash(shard)
    again = open_shard(tmp_path)
    assert again.core.index_trusted
    active = again.index.search(vecs(30, 1)[0], 1, scope_keys=[CTX.scope.key], statuses=[MemoryStatus.ACTIVE])
    assert active[0][0] != archived.id  # the archived status is in the trusted index
    again.close()


def test_a_store_changed_while_down_is_not_trusted(tmp_path, written):
    shard, stored = written
    shard.close()
    store = SqliteStore(tmp_path / "r.sqlite")  # another process changes the store meanwhile
    store.commit(WriteBatch(deletes=[(stored[3].id, None)]))
    store.close()
    again = open_shard(tmp_path)
    assert not again.core.index_trusted and again.index.count() == 29
    assert top(again, vecs(30, 1)[3]) != stored[3].id
    again.close()


def test_a_stale_index_is_not_checkpointed(tmp_path, written):
    shard, _ = written
    shard.index.stale = True  # as after a failure following a commit
    shard.close()
    again = open_shard(tmp_path)
    assert not again.core.index_trusted and again.index.count() == 30
    again.close()
