"""Multi-hop recall through the shard's temporal knowledge graph (real model and files)."""

import pytest

from memorybus import Context, ManualClock, MemoryKind, MemoryNode, Scope
from memorybus.config import GraphPolicy
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

pytestmark = pytest.mark.model
DAY = 86400.0
CTX = Context("acme", "u1", "analyst")
Q = "Which city is Alice's employer headquartered in?"


def make(tmp_path, clock, hops):
    return Shard("shard-0", SqliteStore(tmp_path / f"r{hops}.sqlite"), EdgeVectorIndex(tmp_path / f"v{hops}", 384),
                 dim=384, clock=clock, graph=GraphPolicy(hops=hops))


def fill(shard, embedder, clock):
    texts = ["Alice works at Acme", "Acme is headquartered in Boston"] + [
        f"Employee handbook section {i}: the city office policy for remote work" for i in range(12)
    ] + ["Bob lives in Denver", "The Denver office is headquartered downtown"]
    nodes = [MemoryNode(content=t, scope=Scope("acme"), kind=MemoryKind.SEMANTIC, valid_from=clock.now())
             for t in texts]
    return shard.put_many(CTX, nodes, embedder.encode(texts))


def test_two_hop_expansion_recalls_both_facts_then_follows_supersession(tmp_path, embedder):
    clock = ManualClock(1_700_000_000.0)
    shard = make(tmp_path, clock, hops=2)
    stored = fill(shard, embedder, clock)
    works, hq = stored[0].id, stored[1].id
    q = embedder.encode([Q])[0]
    top = [h.node.id for h in shard.search(CTX, q, 2, query=Q)]
    assert set(top) == {works, hq}
    # Alice moves on: the old works_at edge is closed, not deleted
    clock.advance(days=10)
    move = MemoryNode(content="Alice now works at Globex", scope=Scope("acme"), kind=MemoryKind.SEMANTIC,
                      valid_from=clock.now())
    shard.put_many(CTX, [move], embedder.encode([move.content]))
    old_edges = [e for e in shard.graph.edges("alice") if e.predicate == "works_at"]
    assert len(old_edges) == 2
    closed = [e for e in old_edges if e.valid_to is not None]
    assert len(closed) == 1 and closed[0].valid_to == clock.now()
    now_reach = shard.graph.expand(["alice"], at=clock.now(), hops=2)
    assert "boston" not in now_reach and "globex" in now_reach
    before = shard.graph.expand(["alice"], at=clock.now() - 5 * DAY, hops=2)
    assert "boston" in before
    hits = shard.search(CTX, q, 3, query=Q)
    assert all(h.signals.get("graph", 0) == 0 or h.node.id != hq for h in hits)
    shard.close()


def test_without_the_graph_the_second_hop_is_missed(tmp_path, embedder):
    clock = ManualClock(1_700_000_000.0)
    shard = make(tmp_path, clock, hops=0)
    stored = fill(shard, embedder, clock)
    q = embedder.encode([Q])[0]
    top = [h.node.id for h in shard.search(CTX, q, 2, query=Q)]
    assert stored[1].id not in top  # dense + keyword alone do not connect Alice to Boston
    shard.close()


def test_graph_is_rebuilt_from_the_store(tmp_path, embedder):
    clock = ManualClock(1_700_000_000.0)
    shard = make(tmp_path, clock, hops=2)
    fill(shard, embedder, clock)
    shard.close()
    again = make(tmp_path, clock, hops=2)
    assert "boston" in again.graph.expand(["alice"], at=clock.now(), hops=2)
    again.close()
