"""A vector index that fails after the store commit never fails a durable write.

The index is a real Qdrant Edge index whose engine is closed under the shard (as a
disk error or a crashed engine would leave it); the store is real SQLite. The write
is acknowledged, recallable at once (served from memory), answered from its
operation record on retry without a second event, and the index is rebuilt from the
store at the next write."""

import numpy as np
import pytest

from memorybus import Context, EventKind, ManualClock, MemoryNode
from memorybus.config import RankingWeights
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

pytestmark = pytest.mark.model

CTX = Context("acme", "u1", "planner", "s1")


class BreakableIndex(EdgeVectorIndex):
    """Qdrant Edge whose engine can be closed under the shard: every later call fails
    inside Qdrant Edge itself until the shard rebuilds the index (``reset`` reopens)."""

    def break_engine(self) -> None:
        self._shard.close()


def open_shard(tmp_path, clock):
    index = BreakableIndex(tmp_path / "v", 384)
    # exact_dense_limit=0: every search asks the vector index (no in-memory shortcut)
    shard = Shard("shard-0", SqliteStore(tmp_path / "r.sqlite"), index, dim=384, clock=clock,
                  ranking=RankingWeights(exact_dense_limit=0))
    return shard, index


def remembered(shard, memory_id):
    events, _ = shard.read_events(CTX, {})
    return [e for e in events if e.kind is EventKind.REMEMBERED and e.node.id == memory_id]


def test_index_failure_after_commit_keeps_the_write(tmp_path, embedder):
    clock = ManualClock()
    shard, index = open_shard(tmp_path, clock)
    texts = ["The deploy runs on Fridays", "Lunch was pasta", "The database is Postgres 16"]
    shard.put_many(CTX, [MemoryNode(content=t, scope=CTX.scope) for t in texts], embedder.encode(texts))
    index.break_engine()
    with pytest.raises(Exception, match="not initialized"):
        index.count()  # the engine really is broken

    text = "The staging cluster moved to eu-west-2"
    node = MemoryNode(content=text, scope=CTX.scope)
    vec = embedder.encode([text])
    (stored,) = shard.put_many(CTX, [node], vec, op="op-1")  # acknowledged: the commit is durable
    assert stored.id == node.id and shard.store.get(node.id) is not None
    assert shard.index.stale

    # recallable at once, from memory, with the older memories
    hits = shard.search(CTX, embedder.encode(["where is the staging cluster"])[0], 2, query="staging cluster")
    assert hits[0].node.id == node.id
    hits = shard.search(CTX, embedder.encode(["which database"])[0], 1, query="database")
    assert hits[0].node.content == "The database is Postgres 16"

    # a retry of the same operation answers from its record: no second copy, no second event
    (again,) = shard.put_many(CTX, [node], vec, op="op-1")
    assert again.id == stored.id and again.version == stored.version
    assert shard.store.count() == 4 and len(remembered(shard, node.id)) == 1

    # the next write rebuilds the index from the store
    later = MemoryNode(content="Backups run nightly at 02:00", scope=CTX.scope)
    shard.put_many(CTX, [later], embedder.encode([later.content]))
    assert not shard.index.stale and index.count() == 5
    raw = index.search(np.asarray(vec[0]), 1, scope_keys=[CTX.scope.key])
    assert raw[0][0] == node.id  # the write that missed the index is in it now
    shard.close()

    reopened, _ = open_shard(tmp_path, clock)
    assert reopened.count() == 5 and reopened.index.count() == 5
    reopened.close()


def test_index_rebuilt_by_the_timer_without_a_write(tmp_path, embedder):
    shard, index = open_shard(tmp_path, ManualClock())
    index.break_engine()
    node = MemoryNode(content="The on-call rota changes on Monday", scope=CTX.scope)
    shard.put_many(CTX, [node], embedder.encode([node.content]))
    assert shard.index.stale
    assert shard.repair_index()  # what the actor's timer calls between requests
    assert index.count() == 1 and not shard.index.stale
    shard.close()
