"""The shard's in-memory mirror of its records: one Scope object per scope, shared by
its memories, and nothing else about a memory changed by sharing it."""

from __future__ import annotations

from pathlib import Path

from memorybus.memory.model import MemoryNode
from memorybus.retrieval.text import split_time_prefix
from memorybus.retrieval.timeparse import parse_datetime
from memorybus.scopes import Scope
from memorybus.shard.records import Records
from memorybus.storage.sqlite import SqliteStore


def test_mirrored_memories_of_one_scope_share_one_scope_object_and_keep_their_fields(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "r.sqlite")
    try:
        records = Records(store)
        a = MemoryNode(content="alpha", scope=Scope("acme", "u1"), importance=7.0, tags=("x",))
        b = MemoryNode(content="beta", scope=Scope("acme", "u1"))
        c = MemoryNode(content="gamma", scope=Scope("acme", "u2"))
        assert a.scope is not b.scope  # equal scopes, distinct objects, as decoding makes them
        for n in (a, b, c):
            records.put(n)
        ma, mb, mc = (records.nodes[n.id] for n in (a, b, c))
        assert ma.scope is mb.scope and ma.scope == Scope("acme", "u1")
        assert mc.scope is not ma.scope and mc.scope == Scope("acme", "u2")
        assert ma.content_equal(a) and ma.embedding is None and ma.importance == 7.0 and ma.tags == ("x",)
        assert records.twins(MemoryNode(content=" alpha ", scope=Scope("acme", "u1"))) == [ma]
        # a new version keeps sharing; a memory moved to another scope takes that scope's object
        records.put(MemoryNode(content="alpha 2", scope=Scope("acme", "u2"), id=a.id))
        assert records.nodes[a.id].scope is mc.scope and records.nodes[a.id].content == "alpha 2"
        assert records.twins(a) == []
        # a scope's shared object goes with its last memory: scopes seen once are not kept
        assert records.pop(b.id) is not None
        assert Scope("acme", "u1") not in records._scopes and len(records._scopes) == 1
        records.pop(a.id)
        records.pop(c.id)
        assert records._scopes == {} and not records._scope_uses
        records.reset()
        assert records.nodes == {}
        records.put(b)
        assert records.nodes[b.id].scope == Scope("acme", "u1")
    finally:
        store.close()


def test_a_remembered_date_stamp_splits_as_parsed_every_time() -> None:
    """The stamp parse is remembered: a second read of the same stamp answers what the
    parser answers, and a bracket that is no date stays in place each time."""
    for _ in range(3):
        when, rest = split_time_prefix("(10:30 am on 8 May, 2024) standup notes")
        assert when == parse_datetime("10:30 am on 8 May, 2024") and rest == "standup notes"
        assert when is not None
        assert split_time_prefix("(sprint review) notes") == (None, "(sprint review) notes")
