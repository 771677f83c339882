"""Bad input and poison values, on the plain classes: times bounded to what the code can
represent, text that has a UTF-8 form, limits on ``structured`` and tags, filters that
take one string as one value (issue 10, items 15 and 16)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import pytest

from memorybus import (
    Context,
    EventFilter,
    InvalidMemory,
    InvalidRequest,
    ManualClock,
    MemoryNode,
    Scope,
)
from memorybus.prompt import ContextBuilder
from memorybus.retrieval.options import RecallOptions
from memorybus.shard import Shard
from memorybus.storage.base import WriteBatch
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

DIM = 8
MAX_TIME = datetime(9999, 1, 1, tzinfo=UTC).timestamp()  # the latest time memorybus accepts
CTX = Context("acme", "u1", "planner", "s1")
LONE = "\ud800"


def vecs(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def open_shard(path, **kw):
    return Shard("shard-0", SqliteStore(path / "r.sqlite"), EdgeVectorIndex(path / "v", DIM), dim=DIM,
                 clock=ManualClock(), dedupe=False, detect_contradictions=False, **kw)


@pytest.mark.parametrize("field", ["valid_from", "created_at", "valid_to", "expires_at", "last_accessed"])
@pytest.mark.parametrize("value", [1e12, MAX_TIME + 1, math.inf, -math.inf, math.nan, -1.0])
def test_every_node_time_is_bounded(field, value):
    node = MemoryNode(content="x", scope=CTX.scope, valid_from=1.0, created_at=1.0, last_accessed=1.0)
    setattr(node, field, value)
    with pytest.raises(InvalidMemory):
        node.validate()


def test_the_latest_representable_time_is_accepted():
    from memorybus import validation

    assert validation.MAX_TIME == MAX_TIME
    MemoryNode(content="x", scope=CTX.scope, valid_from=MAX_TIME, created_at=MAX_TIME).validate()


@pytest.mark.parametrize("field", ["as_of", "start", "end", "reference_time"])
@pytest.mark.parametrize("value", [math.inf, math.nan, 1e12, -5.0, "2024"])
def test_recall_times_are_bounded(field, value):
    with pytest.raises(InvalidRequest):
        RecallOptions(**{field: value}).validate()


QUERIES = ["what happened in May?", "anything from December 9999?", "what did we do last year?",
           "what happened in May 9998", "this month", "news from 2 years ago"]


def test_one_poison_time_never_breaks_recall_or_context_for_others(tmp_path):
    """A memory stored with a time no date can hold (written before times were bounded,
    straight into the store) and one at the latest accepted time: recall, time-named
    queries and the dated prompt block work for everyone who sees them."""
    shard = open_shard(tmp_path)
    ok = shard.put_many(CTX, [MemoryNode(content="we met in May", scope=CTX.scope)], vecs(1))[0]
    late = shard.put_many(CTX, [MemoryNode(content="the far future meeting", scope=CTX.scope,
                                           valid_from=MAX_TIME)], vecs(1, 1))[0]
    poison = MemoryNode(content="poisoned meeting in May", scope=CTX.scope, valid_from=1e12, created_at=1e12,
                        last_accessed=1e12, version=1, embedding=vecs(1, 2)[0])
    shard.store.commit(WriteBatch(puts=[poison]))
    shard.close()
    shard = open_shard(tmp_path)  # rebuilt from the store, poison included
    for q in QUERIES:
        for ref in (None, MAX_TIME):
            # random vectors: no relevance floor, every memory is a candidate
            opts = RecallOptions(reference_time=ref, min_relevance=0.0)
            hits = shard.search(CTX, vecs(1, 3)[0], 10, query=q, options=opts)
            assert {h.node.id for h in hits} >= {ok.id, late.id}, q
            block = ContextBuilder([], hits, 500)
            counts = {t: len(t.split()) for t in block.texts_to_count()}
            assert "we met in May" in block.build(counts).text
    with pytest.raises(InvalidMemory):
        shard.put_many(CTX, [MemoryNode(content="again", scope=CTX.scope, valid_from=1e12)], vecs(1))
    with pytest.raises(InvalidMemory):
        shard.update(CTX, ok.id, 1, {"valid_from": math.inf})
    shard.close()


@pytest.mark.parametrize(
    "changes",
    [
        {"content": "a" + LONE},
        {"key": "k" + LONE},
        {"source": LONE},
        {"tags": ("ok", LONE)},
        {"parents": (LONE,)},
        {"structured": {"speaker": LONE}},
        {"structured": {LONE: 1}},
        {"structured": {"nested": [{"x": "y" + LONE}]}},
    ],
    ids=lambda c: next(iter(c)),
)
def test_lone_surrogates_are_refused_by_validation(changes):
    with pytest.raises(InvalidMemory):
        MemoryNode(**{"content": "fine", "scope": CTX.scope, **changes}).validate()


def test_lone_surrogates_are_refused_in_scopes_contexts_and_filters():
    for make in (lambda: Context("acme" + LONE), lambda: Context("acme", LONE), lambda: Scope("acme", "u", LONE),
                 lambda: Context("acme", roles=[LONE]), lambda: EventFilter.of(keys=[LONE]),
                 lambda: EventFilter.of(tags=[LONE])):
        with pytest.raises(InvalidRequest):
            make()


def test_structured_size_and_tag_count_are_limited(tmp_path):
    big = {"blob": "x" * 70_000}
    many = tuple(f"t{i}" for i in range(65))
    for node in (MemoryNode(content="x", scope=CTX.scope, structured=big),
                 MemoryNode(content="x", scope=CTX.scope, tags=many),
                 MemoryNode(content="x", scope=CTX.scope, tags=("x" * 300,))):
        with pytest.raises(InvalidMemory):
            node.validate()
    MemoryNode(content="x", scope=CTX.scope, structured={"blob": "x" * 60_000}, tags=many[:64]).validate()
    # the shard enforces its configured limits, whatever the client sent
    shard = open_shard(tmp_path, max_tags=2, max_structured_bytes=100)
    with pytest.raises(InvalidMemory):
        shard.put_many(CTX, [MemoryNode(content="x", scope=CTX.scope, tags=("a", "b", "c"))], vecs(1))
    with pytest.raises(InvalidMemory):
        shard.put_many(CTX, [MemoryNode(content="x", scope=CTX.scope, structured={"s": "y" * 200})], vecs(1))
    n = shard.put_many(CTX, [MemoryNode(content="x", scope=CTX.scope, tags=("a", "b"))], vecs(1))[0]
    with pytest.raises(InvalidMemory):
        shard.update(CTX, n.id, 1, {"tags": ("a", "b", "c")})
    assert shard.count() == 1 and shard.get(CTX, n.id).tags == ("a", "b")
    shard.close()


def test_a_string_given_for_a_filter_field_is_one_value():
    f = EventFilter.of(keys="user:u1/*", tags="urgent", levels="org", kinds="semantic", events="asserted")
    assert f.keys == ("user:u1/*",)
    assert f.tags == frozenset({"urgent"})
    assert {x.value for x in f.levels} == {"org"}
    assert {x.value for x in f.kinds} == {"semantic"}
    assert {x.value for x in f.events} == {"asserted"}
    one = EventFilter.of(scopes=Scope("acme", "u1"))
    assert one.scopes == frozenset({Scope("acme", "u1")})
    with pytest.raises(InvalidRequest):
        EventFilter.of(keys=[3])
