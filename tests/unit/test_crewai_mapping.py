"""The CrewAI storage's mapping of records to bus memories, without CrewAI or a bus
(tests/integration/test_crewai_storage.py runs it against CrewAI's own Memory)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

import memorybus as mb
from memorybus.integrations.crewai import (
    KEY_ROOT,
    MARK,
    BusStorage,
    matches,
    memory_fields,
    norm_path,
    record_fields,
    under,
)

SCOPE = mb.Context("acme", "alice", "researcher").scope


@dataclass
class Record:
    """The attributes of CrewAI's MemoryRecord that the mapping reads."""

    content: str = "We chose PostgreSQL for billing"
    id: str = "rec-1"
    scope: str = "/project/billing/"
    categories: list[str] = field(default_factory=lambda: ["decision"])
    metadata: dict[str, Any] = field(default_factory=lambda: {"ticket": 42, "when": datetime(2026, 1, 2)})
    importance: float = 0.8
    created_at: datetime = datetime(2026, 3, 4, 5, 6, 7, 890)
    source: str | None = "session-9"
    private: bool = True


def node_of(fields: dict[str, Any], name: str = "crew") -> mb.MemoryNode:
    return mb.MemoryNode(content=fields["content"], scope=fields["scope"], id=fields["id"], key=fields["key"],
                         structured=fields["structured"], importance=fields["importance"],
                         created_at=1.0e9, last_accessed=1.5e9)  # fmt: skip


def test_a_record_round_trips_through_its_memory():
    fields = memory_fields(Record(), SCOPE, "crew")
    assert fields["id"] == mb.derived_id(SCOPE, f"{KEY_ROOT}/crew/rec-1")  # the same record: the same memory
    assert fields["importance"] == pytest.approx(1 + 9 * 0.8) and fields["kind"] == "episodic"
    assert fields["decay_rate"] == 0.0 and fields["structured"]["crewai"]["store"] == MARK
    back = record_fields(node_of(fields), "crew")
    assert back is not None
    assert back["id"] == "rec-1" and back["scope"] == "/project/billing" and back["categories"] == ["decision"]
    assert back["created_at"] == Record.created_at and back["importance"] == 0.8
    assert back["source"] == "session-9" and back["private"] is True
    assert back["metadata"] == {"ticket": 42, "when": "2026-01-02 00:00:00"}  # made JSON-safe


def test_only_this_storages_records_are_read():
    fields = memory_fields(Record(), SCOPE, "crew")
    assert record_fields(node_of(fields), "other-crew") is None
    plain = mb.MemoryNode(content="a note", scope=SCOPE, key=f"{KEY_ROOT}/crew/rec-1")
    assert record_fields(plain, "crew") is None
    moved = node_of({**fields, "key": f"{KEY_ROOT}/crew/rec-2"})  # the mark says rec-1
    assert record_fields(moved, "crew") is None


@pytest.mark.parametrize("bad", [Record(content="  "), Record(id=""), Record(importance=1.5),
                                 Record(metadata={1: object()})])  # fmt: skip
def test_bad_records_are_refused(bad):
    with pytest.raises(mb.InvalidRequest):
        memory_fields(bad, SCOPE, "crew")


def test_scope_paths_match_at_segment_boundaries():
    assert norm_path(None) == norm_path("") == norm_path("/") == "/"
    assert norm_path("a//b/") == "/a/b"
    assert under("/a/b", "/a") and under("/a", "/a/") and under("/a", None)
    assert not under("/ab", "/a") and not under("/a", "/a/b")


def test_filters_combine():
    rec = record_fields(node_of(memory_fields(Record(), SCOPE, "crew")), "crew")
    assert rec is not None
    assert matches(rec, "/project", ["decision", "other"], {"ticket": 42}, ["rec-1"], Record.created_at + timedelta(1))
    assert not matches(rec, "/project/mobile")
    assert not matches(rec, categories=["design"])
    assert not matches(rec, metadata_filter={"ticket": 41})
    assert not matches(rec, record_ids=["rec-2"])
    assert not matches(rec, older_than=Record.created_at)  # strictly older


def test_a_query_vector_the_storage_did_not_make_is_refused_before_any_bus_call():
    storage = BusStorage(None, mb.Context("acme", "alice", "researcher"))  # type: ignore[arg-type]
    with pytest.raises(mb.InvalidRequest, match=r"storage\.embedder"):
        storage.search([0.1, 0.2, 0.3])
    with pytest.raises(mb.InvalidRequest):
        storage.search([0.1], limit=0)


def test_the_storage_writes_to_the_contexts_narrowest_level_unless_told():
    alice = mb.Context("acme", "alice", "researcher")
    assert BusStorage(None, alice).scope == alice.resolve_scope(mb.Level.AGENT)  # type: ignore[arg-type]
    assert BusStorage(None, alice, level="org").scope == alice.resolve_scope(mb.Level.ORG)  # type: ignore[arg-type]
    with pytest.raises(mb.InvalidRequest):
        BusStorage(None, alice, name="a/b")  # type: ignore[arg-type]


def test_copies_of_the_storage_share_it():
    storage = BusStorage(None, mb.Context("acme", "alice", "researcher"))  # type: ignore[arg-type]
    assert copy.deepcopy(storage) is storage and copy.copy(storage) is storage
