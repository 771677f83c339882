"""A broadcast copy and its original are one memory in recall and in prompt context."""

from memorybus import MemoryNode, RecallHit, Scope
from memorybus.memory.model import broadcast_copy_id, broadcast_origin
from memorybus.prompt import ContextBuilder
from memorybus.retrieval import merge_hits

AGENT = Scope("acme", "u1", "planner")
USER = Scope("acme", "u1")
ORG = Scope("acme")


def original_and_copies():
    original = MemoryNode(content="Customer data stays in the EU region", scope=AGENT, created_at=1.0, valid_from=1.0)
    to_user = MemoryNode(content=original.content, scope=USER, id=broadcast_copy_id(original.id, USER),
                         parents=(original.id,), created_at=1.0, valid_from=1.0)
    to_org = MemoryNode(content=original.content, scope=ORG, id=broadcast_copy_id(original.id, ORG),
                        parents=(original.id,), created_at=1.0, valid_from=1.0)
    return original, to_user, to_org


def test_a_copy_is_recognised_by_its_derived_id_only():
    original, to_user, _ = original_and_copies()
    assert broadcast_origin(to_user) == original.id
    assert broadcast_origin(original) is None
    # naming a parent is not enough to pass for a copy
    lookalike = MemoryNode(content="x", scope=USER, parents=(original.id,))
    assert broadcast_origin(lookalike) is None


def test_recall_returns_one_hit_per_memory_noting_the_widest_scope():
    original, to_user, to_org = original_and_copies()
    other = MemoryNode(content="Sprint planning is on Mondays", scope=ORG)
    shard_a = [RecallHit(to_user, 0.91, 0.9), RecallHit(other, 0.5, 0.5)]
    shard_b = [RecallHit(original, 0.93, 0.9), RecallHit(to_org, 0.90, 0.9)]
    hits = merge_hits([shard_a, shard_b], k=10)
    assert [h.node.id for h in hits] == [original.id, other.id]
    assert set(hits[0].copies) == {to_user.id, to_org.id}
    assert hits[0].widest_scope == ORG
    assert hits[1].copies == () and hits[1].widest_scope is None
    # the copy ranked first: it is the one kept, the original folded into it
    hits = merge_hits([[RecallHit(to_user, 0.95, 0.9)], [RecallHit(original, 0.93, 0.9)]], k=10)
    assert [h.node.id for h in hits] == [to_user.id] and hits[0].copies == (original.id,)
    assert hits[0].widest_scope == USER


def test_context_block_lists_a_broadcast_memory_once():
    original, to_user, _ = original_and_copies()
    pinned_copy = MemoryNode(content=to_user.content, scope=USER, id=to_user.id, parents=to_user.parents,
                             tags=("pinned",), created_at=1.0, valid_from=1.0)
    builder = ContextBuilder([pinned_copy], [RecallHit(original, 0.9, 0.9), RecallHit(to_user, 0.8, 0.8)], 500)
    assert [n.id for n in builder.core] == [to_user.id]
    assert builder.hits == []
    builder = ContextBuilder([], [RecallHit(original, 0.9, 0.9), RecallHit(to_user, 0.8, 0.8)], 500)
    block = builder.build(dict.fromkeys(builder.texts_to_count(), 5))
    assert block.text.count("Customer data stays in the EU region") == 1
