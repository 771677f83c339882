"""What remember accepts (memorybus.memory.items): conversation fields, remember_turns, the default source."""

import pytest

from memorybus import Context, InvalidMemory, InvalidRequest, MemoryKind, MemoryNode, ScopeViolation
from memorybus.memory.items import build_memory, turn_items

CTX = Context("acme", "u1", "planner", "s1")
NOW = 1_700_000_000.0


def test_source_is_the_writing_agent_unless_given():
    assert build_memory("the deploy is at noon", CTX, NOW).source == "agent:planner"
    assert build_memory({"content": "x", "source": "tool:search"}, CTX, NOW).source == "tool:search"
    node = MemoryNode(content="y", scope=CTX.scope)
    assert build_memory(node, CTX, NOW).source == "agent:planner"
    assert build_memory("z", Context("acme", "u1"), NOW).source == ""  # no agent: nobody to name


def test_conversation_fields_are_declared_on_remember():
    node = build_memory({"content": "ok", "thread": "standup", "position": 4, "speaker": "agent:critic"}, CTX, NOW)
    assert (node.thread, node.position, node.speaker) == ("standup", 4, "agent:critic")
    plain = build_memory("ok", CTX, NOW)
    assert (plain.thread, plain.position, plain.speaker) == (None, None, None)
    with pytest.raises(InvalidMemory):
        build_memory({"content": "ok", "position": 1}, CTX, NOW)  # a position needs a thread
    with pytest.raises(InvalidMemory):
        build_memory({"content": "ok", "thread": ""}, CTX, NOW)


def test_turns_get_the_thread_and_their_positions_in_order():
    items = turn_items(["hi", ("Ben", "hello"), {"content": "bye", "speaker": "Ana"}], "t1", 5, {"scope": "user"})
    nodes = [build_memory(i, CTX, NOW) for i in items]
    assert [(n.thread, n.position, n.speaker) for n in nodes] == [("t1", 5, None), ("t1", 6, "Ben"), ("t1", 7, "Ana")]
    assert all(n.kind is MemoryKind.EPISODIC and n.scope == CTX.scope.widen("user") for n in nodes)
    assert [n.content for n in nodes] == ["hi", "hello", "bye"]
    # a turn may name its own position; common fields apply to every turn
    (own,) = turn_items([{"content": "x", "position": 42}], "t1", 0, {"importance": 9})
    assert own["position"] == 42 and own["importance"] == 9


@pytest.mark.parametrize(
    ("turns", "thread", "start", "common", "error"),
    [
        ("one string", "t", 0, {}, InvalidRequest),
        (["ok"], "", 0, {}, InvalidRequest),
        (["ok"], "t", -1, {}, InvalidRequest),
        (["ok"], "t", 0, {"content": "x"}, InvalidMemory),
        (["ok"], "t", 0, {"thread": "other"}, InvalidMemory),
        (["ok"], "t", 0, {"colour": "red"}, InvalidMemory),
        ([42], "t", 0, {}, InvalidMemory),
        ([("a", "b", "c")], "t", 0, {}, InvalidMemory),
    ],
)
def test_bad_turns_are_refused(turns, thread, start, common, error):
    with pytest.raises(error):
        turn_items(turns, thread, start, common)


def test_a_memory_outside_the_context_is_refused():
    other = MemoryNode(content="x", scope=Context("acme", "u2").scope)
    with pytest.raises(ScopeViolation):
        build_memory(other, CTX, NOW)
