import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorybus import InvalidMemory, MemoryKind, MemoryNode, MemoryStatus, Scope
from memorybus.memory.codec import SCHEMA_VERSION, decode_node, encode_node, node_to_dict

text = st.text(min_size=1, max_size=40).filter(lambda s: s.strip() and "\x00" not in s)
ident = st.text(alphabet="abcdefghij0123456789-", min_size=1, max_size=12)
scope_field = st.text(alphabet="abcxyz0123", max_size=5)
times = st.floats(min_value=0, max_value=2e9, allow_nan=False)
structured = st.dictionaries(
    st.text(max_size=5),
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**40), 2**40),
        st.text(max_size=8),
        st.floats(allow_nan=False),
        st.lists(st.integers(0, 9), max_size=3),
    ),
    max_size=4,
)


@st.composite
def nodes(draw):
    emb = draw(st.one_of(st.none(), st.lists(st.floats(-1, 1, width=32), min_size=4, max_size=4)))
    return MemoryNode(
        content=draw(text),
        scope=Scope(draw(ident), draw(scope_field), draw(scope_field), draw(scope_field)),
        kind=draw(st.sampled_from(list(MemoryKind))),
        status=draw(st.sampled_from(list(MemoryStatus))),
        version=draw(st.integers(0, 10**6)),
        structured=draw(structured),
        embedding=None if emb is None else np.array(emb, dtype=np.float32),
        key=draw(st.one_of(st.none(), text)),
        created_at=draw(times),
        last_accessed=draw(times),
        access_count=draw(st.integers(0, 10**6)),
        decay_rate=draw(st.floats(0, 5, allow_nan=False)),
        valid_from=draw(times),
        valid_to=draw(st.one_of(st.none(), times)),
        expires_at=draw(st.one_of(st.none(), times)),
        parents=tuple(draw(st.lists(ident, max_size=3))),
        children=tuple(draw(st.lists(ident, max_size=3))),
        related=tuple(draw(st.lists(ident, max_size=3))),
        contradicts=tuple(draw(st.lists(ident, max_size=3))),
        confidence=draw(st.floats(0, 1)),
        importance=draw(st.floats(1, 10)),
        source=draw(st.text(max_size=10)),
        source_ids=tuple(draw(st.lists(ident, max_size=3))),
        tags=tuple(draw(st.lists(ident, max_size=3))),
        fact_seq=draw(st.integers(0, 10**6)),
        thread=draw(st.one_of(st.none(), text)),
        position=draw(st.one_of(st.none(), st.integers(0, 10**9))),
        speaker=draw(st.one_of(st.none(), text)),
    )


@settings(max_examples=200, deadline=None)
@given(nodes())
def test_round_trip_of_every_field_is_exact(n):
    back = decode_node(encode_node(n))
    assert back.same_as(n)
    if n.embedding is not None:
        assert back.embedding.dtype == np.float32


def test_unknown_schema_version_rejected():
    blob = msgpack.packb({"v": SCHEMA_VERSION + 1, "t": "node", "d": {}})
    with pytest.raises(InvalidMemory, match="schema"):
        decode_node(blob)


def test_garbage_rejected():
    with pytest.raises(InvalidMemory):
        decode_node(b"\xc1\xff not msgpack")
    with pytest.raises(InvalidMemory):
        decode_node(msgpack.packb({"v": SCHEMA_VERSION, "t": "node", "d": {"id": "x"}}))


def test_version_1_records_still_load_without_conversation_fields():
    """A record written before the conversation fields existed (schema 1) reads with
    them unset, and everything else intact."""
    node = MemoryNode(content="old record", scope=Scope("acme", "u1"), thread="t", position=3, speaker="ann")
    old = node_to_dict(node)
    for name in ("thread", "position", "speaker"):
        del old[name]
    back = decode_node(msgpack.packb({"v": 1, "t": "node", "d": old}, use_bin_type=True))
    assert (back.thread, back.position, back.speaker) == (None, None, None)
    assert back.content == "old record" and back.id == node.id and back.scope == node.scope


def test_new_records_carry_the_conversation_fields():
    node = MemoryNode(content="x", scope=Scope("acme"), thread="t1", position=7, speaker="agent:planner")
    env = msgpack.unpackb(encode_node(node), raw=False)
    assert env["v"] == SCHEMA_VERSION == 2
    assert (env["d"]["thread"], env["d"]["position"], env["d"]["speaker"]) == ("t1", 7, "agent:planner")
