"""The on-disk vector index is trusted on restart only when its checkpoint matches the
store (real SQLite, real Qdrant Edge; random unit vectors, no model)."""

import numpy as np
import pytest

from memorybus import Context, ManualClock, MemoryNode, MemoryStatus
from memorybus.config import RankingWeights
from memorybus.memory.model import evolve
from memorybus.shard import Shard
from memorybus.storage.base import WriteBatch
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex, point_payload

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


def payloads(tmp_path):
    index = EdgeVectorIndex(tmp_path / "v", DIM)
    try:
        return index.payloads(page=7)  # several pages
    finally:
        index.close()


def test_a_crash_restart_checks_the_index_in_place_and_writes_nothing_that_matches(tmp_path, written, monkeypatch):
    shard, stored = written
    crash(shard)  # 30 writes since the checkpoint of the empty index: not vouched for
    written_again = []
    real = EdgeVectorIndex.upsert
    monkeypatch.setattr(EdgeVectorIndex, "upsert", lambda self, nodes: (written_again.extend(nodes), real(self, nodes)))
    again = open_shard(tmp_path)
    assert not again.core.index_trusted and again.index.count() == 30
    assert written_again == []  # every point already held its record: checked, not rewritten
    assert top(again, vecs(30, 1)[7]) == stored[7].id
    again.close()
    assert payloads(tmp_path) == {n.id: point_payload(n) for n in stored}


def test_a_crash_restart_repairs_every_way_the_index_can_disagree_with_the_store(tmp_path, written):
    """The points a crash can leave behind, and worse: a point missing, one whose record is
    gone, one holding an older version's vector, one under another user's scope, one with
    a stale status. The restart leaves exactly the store's points, each with its vector."""
    shard, stored = written
    new = vecs(1, 9)[0]
    updated = shard.update(CTX, stored[5].id, 1, {"content": "memory rewritten"}, new)
    crash(shard)
    other = Context("acme", "u2", "planner", "s1")
    index = EdgeVectorIndex(tmp_path / "v", DIM)
    index.delete([stored[0].id])  # missing
    ghost = evolve(MemoryNode(content="never stored", scope=CTX.scope), embedding=vecs(1, 7)[0])
    old = evolve(stored[5], embedding=vecs(30, 1)[5])  # version 1's vector again
    moved = evolve(stored[6], scope=other.scope, embedding=vecs(30, 1)[6])  # visible to u2
    archived = evolve(stored[8], status=MemoryStatus.ARCHIVED, embedding=vecs(30, 1)[8])
    index.upsert([ghost, old, moved, archived])
    index.close()
    assert payloads(tmp_path)[stored[5].id]["version"] == 1 and updated.version == 2

    again = open_shard(tmp_path)
    assert again.index.count() == 30
    records = {n.id: n for n in again.core.nodes.values()}
    assert again.core.index.index.payloads() == {i: point_payload(n) for i, n in records.items()}
    assert top(again, new) == updated.id  # the new version's vector
    assert top(again, vecs(30, 1)[0]) == stored[0].id  # the missing point is back
    assert again.index.search(vecs(30, 1)[6], 5, scope_keys=[other.scope.key]) == []  # nothing leaks to u2
    active = again.index.search(vecs(30, 1)[8], 1, scope_keys=[CTX.scope.key], statuses=[MemoryStatus.ACTIVE])
    assert active[0][0] == stored[8].id  # active again, as its record says
    assert ghost.id not in {i for i, _ in again.index.search(vecs(1, 7)[0], 30, scope_keys=[CTX.scope.key])}
    again.close()


def test_an_index_whose_points_carry_no_version_is_written_again_once(tmp_path, written, monkeypatch):
    """Points written before the payload carried the version (an older index on disk) do
    not vouch for their vectors: each is written again, and the next crash restart finds
    them matching."""
    shard, stored = written
    crash(shard)
    index = EdgeVectorIndex(tmp_path / "v", DIM)
    index._call("update", index._m.UpdateOperation.overwrite_payload(
        [n.id for n in stored], {"scope": CTX.scope.key, "kind": "episodic", "status": "active"}))  # fmt: skip
    index.close()
    written_again = []
    real = EdgeVectorIndex.upsert
    monkeypatch.setattr(EdgeVectorIndex, "upsert", lambda self, nodes: (written_again.extend(nodes), real(self, nodes)))
    again = open_shard(tmp_path)
    assert sorted(n.id for n in written_again) == sorted(n.id for n in stored)
    (late,) = put(again, 1, 3)
    crash(again)
    written_again.clear()
    third = open_shard(tmp_path)
    assert written_again == [] and third.index.count() == 31 and top(third, vecs(1, 3)[0]) == late.id
    third.close()


def test_a_point_is_matched_to_its_record_whatever_the_case_of_the_id():
    from memorybus.shard.index import _point_id

    canonical = "aeeb0000-0ac6-8ce5-9b5b-ac463a4827a6"
    assert _point_id(canonical.upper()) == canonical == _point_id(canonical)
    assert _point_id("not-a-uuid") == "not-a-uuid"


def test_an_index_that_cannot_be_read_back_is_rebuilt_from_the_store(tmp_path, written, monkeypatch):
    from memorybus.errors import IndexUnavailable

    shard, stored = written
    crash(shard)
    index = EdgeVectorIndex(tmp_path / "v", DIM)
    index.delete([stored[2].id])
    index.close()

    def unreadable(self, page=5000):
        raise IndexUnavailable("qdrant-edge", "scroll failed")

    monkeypatch.setattr(EdgeVectorIndex, "payloads", unreadable)
    again = open_shard(tmp_path)
    assert not again.index.stale and again.index.count() == 30
    assert top(again, vecs(30, 1)[2]) == stored[2].id  # rebuilt: the missing point is back
    again.close()
