"""Listing without a query (Shard.list_memories) and recall restricted to a key prefix."""

import numpy as np
import pytest

from memorybus import InvalidRequest, ManualClock, MemoryKind, MemoryStatus, RecallOptions, Scope
from tests.unit.test_shard import U1, U2, open_shard, put

pytestmark = pytest.mark.model


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def shard(tmp_path, clock):
    s = open_shard(tmp_path, clock)
    yield s
    s.close()


def test_list_is_ordered_paged_and_visibility_bound(shard, embedder, clock):
    mine = []
    for i in range(5):
        clock.advance(1.0)
        mine += put(shard, embedder, U1, [f"u1 note number {i}"], scope=Scope("acme", "u1"))
    put(shard, embedder, U2, ["u2 private note"], scope=Scope("acme", "u2"))
    clock.advance(1.0)
    org = put(shard, embedder, U1, ["org wide rule"], scope=Scope("acme"))
    seen = shard.list_memories(U1, limit=100)
    assert [n.id for n in seen] == [n.id for n in mine + org]  # created_at order, u2's note absent
    assert {n.content for n in shard.list_memories(U2)} == {"u2 private note", "org wide rule"}
    first = shard.list_memories(U1, limit=2)
    rest = shard.list_memories(U1, limit=100, after=(first[-1].created_at, first[-1].id))
    assert [n.id for n in first + rest] == [n.id for n in seen]
    assert [n.id for n in shard.list_memories(U1, scope_key=Scope("acme").key)] == [org[0].id]
    # a scope the caller cannot see lists nothing, even when asked by exact key
    assert shard.list_memories(U1, scope_key=Scope("acme", "u2").key) == []


def test_list_filters_keys_kinds_statuses_and_expiry(shard, embedder, clock):
    a = put(shard, embedder, U1, ["keyed alpha"], key="ns/a//1", kind=MemoryKind.SEMANTIC)
    b = put(shard, embedder, U1, ["keyed beta"], key="ns/ab//1", kind=MemoryKind.SEMANTIC)
    put(shard, embedder, U1, ["plain episode"])
    assert [n.id for n in shard.list_memories(U1, key_prefix="ns/a/")] == [a[0].id]
    assert {n.id for n in shard.list_memories(U1, key_prefix="ns/")} == {a[0].id, b[0].id}
    assert len(shard.list_memories(U1, kinds=[MemoryKind.EPISODIC])) == 1
    shard.update(U1, b[0].id, 1, {"status": MemoryStatus.DEPRECATED})
    assert [n.id for n in shard.list_memories(U1, key_prefix="ns/")] == [a[0].id]
    assert {n.id for n in shard.list_memories(U1, key_prefix="ns/", statuses=[MemoryStatus.DEPRECATED])} == {b[0].id}
    shard.update(U1, a[0].id, 1, {"expires_at": clock.now() + 5})
    assert len(shard.list_memories(U1, key_prefix="ns/")) == 1
    clock.advance(6)
    assert shard.list_memories(U1, key_prefix="ns/") == []
    with pytest.raises(InvalidRequest):
        shard.list_memories(U1, limit=0)


def test_recall_key_prefix_keeps_only_matching_keys(shard, embedder):
    inside = put(shard, embedder, U1, ["the user likes dark mode"], key="lg/prefs//theme", kind=MemoryKind.SEMANTIC)
    put(shard, embedder, U1, ["the user likes dark mode in every editor"], kind=MemoryKind.SEMANTIC)
    put(shard, embedder, U1, ["the user likes dark mode, says the sibling"], key="lg/prefsx//t", kind="semantic")
    vec = embedder.encode(["dark mode"])[0]
    everything = shard.search(U1, vec, 10, query="dark mode")
    assert len(everything) == 3
    hits = shard.search(U1, vec, 10, query="dark mode", options=RecallOptions(key_prefix="lg/prefs/"))
    assert [h.node.id for h in hits] == [inside[0].id]
    assert np.isfinite(hits[0].score)
    with pytest.raises(InvalidRequest):
        RecallOptions(key_prefix="").validate()
