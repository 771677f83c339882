"""No accidental duplicates through the client (issue 14): a repeated remember
reinforces the stored memory, a broadcast memory is one hit in recall and one line in
context_for, and remember's default scope outlives the session."""

import uuid

import pytest

import memorybus as mb
from memorybus import Config, Context, Scope

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def bus(ray_local, tmp_path_factory):
    cfg = Config.embedded(tmp_path_factory.mktemp("dups"), num_shards=2, namespace="dups_t", touch_flush_seconds=0.0)
    with mb.connect(cfg) as b:
        yield b


def org():
    return f"org{uuid.uuid4().hex[:8]}"


def test_double_remember_is_stored_once_and_reinforced(bus):
    ctx = Context(org(), "u1", "planner", "s1")
    first = bus.remember("The user asked for the Q3 report", ctx, confidence=0.7)
    again = bus.remember("The user asked for the Q3 report", ctx, confidence=0.9)
    assert again.id == first.id
    page = bus.list_memories(ctx)
    assert [n.content for n in page.memories] == ["The user asked for the Q3 report"]
    stored = bus.get(first.id, ctx)
    assert stored.access_count == 1 and stored.confidence == 0.9
    # remember_many with the same text twice: one memory
    a, b = bus.remember_many(["Standup moved to 10am", "Standup moved to 10am"], ctx)
    assert a.id == b.id and len(bus.list_memories(ctx).memories) == 2


def test_default_scope_is_the_agent_across_sessions(bus):
    o = org()
    monday = Context(o, "u1", "planner", "monday")
    node = bus.remember("The user prefers short answers", monday)
    assert node.scope == Scope(o, "u1", "planner")
    tuesday = Context(o, "u1", "planner", "tuesday")
    assert bus.recall("how long should answers be?", tuesday, k=1)[0].node.id == node.id
    other_agent = Context(o, "u1", "writer", "monday")
    assert all(h.node.id != node.id for h in bus.recall("how long should answers be?", other_agent, k=5))
    scratch = bus.remember("Draft 2 of the reply", monday, kind="working")
    assert scratch.scope == monday.scope


def test_broadcast_copy_and_original_are_one_hit_and_one_context_line(bus):
    o = org()
    ctx = Context(o, "u1", "planner", "s1")
    node = bus.remember("Customer data must stay in the EU region", ctx, importance=9)
    copy = bus.broadcast(node.id, "org", ctx)
    assert copy.id != node.id
    hits = bus.recall("where must customer data be stored?", ctx, k=5)
    same = [h for h in hits if h.node.content == node.content]
    assert len(same) == 1
    assert set(same[0].copies) | {same[0].node.id} == {node.id, copy.id}
    assert same[0].widest_scope == Scope(o)
    block = bus.context_for("where must customer data be stored?", ctx, token_budget=300)
    assert block.text.count("Customer data must stay in the EU region") == 1
    # someone who sees only the org copy gets it, plainly
    other = Context(o, "u2", "writer")
    (hit,) = [h for h in bus.recall("where must customer data be stored?", other, k=5) if h.node.content == node.content]
    assert hit.node.id == copy.id and hit.copies == ()
