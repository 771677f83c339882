import math

import numpy as np
import pytest

from memorybus import InvalidMemory, MemoryKind, MemoryNode, MemoryStatus, Scope
from memorybus.salience import effective_decay_rate, salience, salience_array

S = Scope("acme", "u1")


def node(**kw):
    base = {"content": "hello", "scope": S}
    base.update(kw)
    return MemoryNode(**base)


def test_valid_node_normalises_strings_and_lists():
    n = node(kind="semantic", status="archived", tags=["a"], parents=["p"]).validate()
    assert n.kind is MemoryKind.SEMANTIC and n.status is MemoryStatus.ARCHIVED
    assert n.tags == ("a",) and n.parents == ("p",)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": "   "}, "content"),
        ({"content": "x" * 20_000}, "content"),
        ({"content": 5}, "content"),
        ({"kind": "dream"}, "kind"),
        ({"status": "zombie"}, "status"),
        ({"confidence": 1.5}, "confidence"),
        ({"confidence": -0.1}, "confidence"),
        ({"confidence": float("nan")}, "confidence"),
        ({"importance": 0}, "importance"),
        ({"importance": 11}, "importance"),
        ({"embedding": np.array([1.0, float("nan")], dtype=np.float32)}, "embedding"),
        ({"embedding": np.zeros((2, 2), dtype=np.float32)}, "embedding"),
        ({"id": "not-a-uuid"}, "id"),
        ({"structured": {"x": object()}}, "structured"),
        ({"structured": {1: "a"}}, "structured"),
        ({"tags": "abc"}, "tags"),
        ({"key": ""}, "key"),
        ({"valid_from": 10.0, "valid_to": 5.0}, "valid_to"),
        ({"access_count": -1}, "access_count"),
        ({"thread": ""}, "thread"),
        ({"thread": 5}, "thread"),
        ({"thread": "t" * 600}, "thread"),
        ({"speaker": " "}, "speaker"),
        ({"speaker": ["ann"]}, "speaker"),
        ({"thread": "t", "position": -1}, "position"),
        ({"thread": "t", "position": 1.5}, "position"),
        ({"thread": "t", "position": True}, "position"),
        ({"position": 3}, "position"),  # a position needs a thread
    ],
)
def test_bad_nodes_are_rejected(kw, field):
    with pytest.raises(InvalidMemory) as exc:
        node(**kw).validate()
    assert exc.value.field == field


def test_conversation_fields_are_optional_and_typed():
    plain = node().validate()
    assert (plain.thread, plain.position, plain.speaker) == (None, None, None)
    turn = node(thread="standup-2024-05-08", position=0, speaker="agent:planner").validate()
    assert (turn.thread, turn.position, turn.speaker) == ("standup-2024-05-08", 0, "agent:planner")


def test_wrong_dimension_rejected():
    with pytest.raises(InvalidMemory, match="dimension 3 != 384"):
        node(embedding=np.ones(3, dtype=np.float32)).validate(dim=384)


def test_scope_without_org_rejected():
    with pytest.raises(Exception, match="org"):
        Scope("")


def test_salience_curve():
    now = 1_000_000.0
    fresh = node(last_accessed=now, confidence=0.8)
    assert salience(fresh, now) == pytest.approx(0.8)
    old = node(last_accessed=now - 30 * 86400, confidence=0.8, importance=1, decay_rate=0.05)
    assert salience(old, now) == pytest.approx(0.8 * math.exp(-0.05 * 30))
    important = node(last_accessed=now - 30 * 86400, confidence=0.8, importance=10, decay_rate=0.05)
    assert salience(important, now) > salience(old, now)
    accessed = node(last_accessed=now - 30 * 86400, confidence=0.8, importance=1, access_count=5)
    assert salience(accessed, now) == pytest.approx(salience(old, now) * (1 + 0.5 * math.log(6)))
    assert effective_decay_rate(0.1, 10) == pytest.approx(0.01)


def test_salience_array_matches_scalar():
    rng = np.random.default_rng(0)
    now = 2e9
    nodes = [
        node(
            confidence=float(rng.uniform(0, 1)),
            access_count=int(rng.integers(0, 50)),
            last_accessed=float(now - rng.uniform(0, 200 * 86400)),
            decay_rate=float(rng.uniform(0, 0.3)),
            importance=float(rng.uniform(1, 10)),
        )
        for _ in range(50)
    ]
    arr = salience_array(
        np.array([n.confidence for n in nodes]),
        np.array([n.access_count for n in nodes]),
        np.array([n.last_accessed for n in nodes]),
        np.array([n.decay_rate for n in nodes]),
        np.array([n.importance for n in nodes]),
        now,
    )
    assert np.allclose(arr, [salience(n, now) for n in nodes])


def test_stamped_fills_only_unset_times():
    n = node(created_at=5.0).stamped(100.0)
    assert n.created_at == 5.0 and n.valid_from == 5.0 and n.last_accessed == 5.0
    m = node().stamped(100.0)
    assert m.created_at == 100.0 and m.valid_from == 100.0
