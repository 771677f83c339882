"""An honest "nothing", with the real model (shard level: real SQLite, Qdrant Edge and
MiniLM; no Ray): a question about something never stored that names someone (or something)
with stored memories returns nothing above the default relevance floor, while questions
about what was stored, naming the same names, still find it first.

The questions are held back in ``tests/data/unstored_questions.json``: no weight or rule
was tuned on them (the rule's dev pairs were others). Each name's memories are one user's
scope, as an assistant remembers one person, so what a question shares with them is the
name. Each query is embedded as recall embeds it: the rows of
:func:`~memorybus.retrieval.query.query_texts` (the query, the query without its names,
its names alone). Measured on this set: 31 of 32 unasked questions return nothing (sent the
query's row only, as before the check: 0 of 32), 17 of 18 asked ones find their memory first
(18 of 18 before)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memorybus import Context, ManualClock, MemoryNode
from memorybus.config import RankingWeights
from memorybus.retrieval import RecallOptions
from memorybus.retrieval.query import query_texts
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

pytestmark = pytest.mark.model

DATA = json.loads((Path(__file__).parent.parent / "data" / "unstored_questions.json").read_text(encoding="utf-8"))
MEMORIES: dict[str, list[str]] = DATA["memories"]
UNASKED: list[str] = DATA["unasked"]
ASKED: list[list[str]] = DATA["asked"]


def named_in(question: str) -> str:
    (name,) = [n for n in MEMORIES if n in question]
    return name


def context_of(name: str) -> Context:
    return Context("acme", f"user-{name.lower()}", "assistant", "s1")


@pytest.fixture(scope="module")
def people(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("unstored")
    shard = Shard("shard-0", SqliteStore(path / "r.sqlite"), EdgeVectorIndex(path / "v", 384), dim=384,
                  clock=ManualClock())  # fmt: skip
    for name, texts in MEMORIES.items():
        ctx = context_of(name)
        shard.put_many(ctx, [MemoryNode(content=m, scope=ctx.scope, source="agent:assistant") for m in texts],
                       embedder.encode(texts))  # fmt: skip
    yield shard
    shard.close()


def recall(shard, embedder, query, rows=None, **opts):
    vectors = embedder.encode(query_texts(query))
    options = RecallOptions(touch=False, **opts)
    return shard.search(context_of(named_in(query)), vectors[:rows], 5, query=query, options=options)


def test_the_held_back_set_is_what_it_says():
    assert len(UNASKED) >= 30 and len(ASKED) >= 15 and RankingWeights().name_check
    for q in UNASKED:  # each names exactly one name with stored memories, and asks something besides
        assert named_in(q) and len(query_texts(q)) == 3, q


def test_questions_about_things_never_stored_return_nothing(people, embedder):
    answered = [(q, h.content, round(h.relevance, 3)) for q in UNASKED for h in recall(people, embedder, q)[:1]]
    assert len(answered) <= len(UNASKED) // 30, answered  # measured: 1 of 32
    for q in UNASKED:  # not for want of candidates: the name's memories are there, below the floor
        below = recall(people, embedder, q, min_relevance=0.0)
        assert any(named_in(q) in h.content for h in below), q


def test_without_the_name_free_rows_the_shared_name_answers_them(people, embedder):
    """What the check removes: sent only the query's row (as before the check), most of the
    unasked questions get a memory of the name they name above the floor (the bug)."""
    answered = sum(bool(recall(people, embedder, q, rows=1)) for q in UNASKED)
    assert answered >= 0.8 * len(UNASKED)


def test_questions_about_what_was_stored_still_find_it_first(people, embedder):
    missed = []
    for question, answer in ASKED:
        hits = recall(people, embedder, question)
        if not hits or hits[0].content != answer:
            missed.append((question, [(h.content, round(h.relevance, 3)) for h in hits]))
    assert len(missed) <= len(ASKED) // 15, missed  # measured: 1 of 18


@pytest.mark.parametrize(("question", "name"), DATA["about"], ids=[q for q, _ in DATA["about"]])
def test_a_question_about_the_name_itself_returns_its_memories(people, embedder, question, name):
    assert len(query_texts(question)) == 1  # it asks nothing besides the name: nothing to check
    hits = recall(people, embedder, question)
    assert len(hits) == len(MEMORIES[name]) and all(name in h.content for h in hits), [h.content for h in hits]
