"""Names in a query (no model, no Ray): what recall embeds for a query that names someone,
and the ranking's check of a memory that shares only a name with it (hand-made cosines).

The check with the real model is ``test_recall_unstored``; these pin each part so that
removing one fails here: the name reading, the index's term test, the cap, both ways
past it (the name-free match, the lift over the names alone), the weight that turns it off,
and the shard's reading of the rows it is sent."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from memorybus import Context, InvalidRequest, ManualClock, MemoryNode, RankingWeights, Scope
from memorybus.retrieval.keyword import KeywordIndex
from memorybus.retrieval.query import Query, name_terms, query_texts, without_names
from memorybus.retrieval.ranking import NameCheck, rank
from memorybus.retrieval.structure import RecallIndex
from memorybus.retrieval.text import tokens
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex


# ------------------------------------------------------------------ the query
@pytest.mark.parametrize(("query", "unnamed", "names"), [
    ("What is Alice's blood type?", "What is someone's blood type?", "Alice"),
    ("Alice's favourite football team", "someone's favourite football team", "Alice"),  # possessive opener
    ("Who runs finance at Acme?", "Who runs finance at someone?", "Acme"),
    ("What does Project Falcon use?", "What does someone use?", "Project Falcon"),  # adjacent: one name
    ("Did Bob meet Alice in Rome?", "Did someone meet someone in someone?", "Bob Alice Rome"),
    ("Hello. What is Omar's car?", "Hello. What is someone's car?", "Omar"),
])  # fmt: skip
def test_a_query_that_names_something_is_embedded_without_its_names_and_as_its_names(query, unnamed, names):
    assert without_names(query) == unnamed
    assert query_texts(query) == [query, unnamed, names]


@pytest.mark.parametrize("query", [
    "Which tests failed?",          # no name
    "Lunch was a burrito",          # a capitalised opener is not a name
    "Alice",                        # nothing but a name: it asks about the name
    "Tell me about Alice",          # the other words only ask
    "What do you know about Acme?",
    "What did Melanie and Caroline talk about?",
])  # fmt: skip
def test_a_query_without_a_name_or_asking_only_about_names_is_embedded_once(query):
    assert without_names(query) is None and query_texts(query) == [query]


def test_the_parsed_query_tells_names_from_what_it_asks():
    q = Query.parse("Tell me about Alice's blood type", 0.0)
    assert q.names == name_terms(q.text) == (frozenset(tokens("Alice")),)
    assert set(q.asked) == set(tokens("blood type"))  # neither the name nor the asking word
    assert Query.parse("which tests failed", 0.0).names == ()
    assert name_terms("Did Project Falcon hire Bob's sister in April?") == (frozenset(tokens("Project Falcon")),
                                                                            frozenset(tokens("Bob")))  # fmt: skip


def test_the_keyword_index_says_which_memories_hold_any_of_some_terms():
    index = KeywordIndex()
    index.add("a", "s", tokens("Alice works as a nurse"))
    index.add("b", "s", tokens("Bob plays chess"))
    index.remove("b")
    held = index.holds(["a", "b", "missing"], tokens("nurse chess"))
    assert held.tolist() == [True, False, False]
    assert index.holds(["a"], []).tolist() == [False]


# ------------------------------------------------------------------ the ranking
NOW = 1_700_000_000.0
SCOPE = Scope("acme", "u1")
W = RankingWeights(salience=0.0, recency=0.0, importance=0.0, confidence=0.0, neighbor=0.0, thread=0.0,
                   neighbor_candidates=0, length=0.0)  # fmt: skip
QUERY = "What is Alice's blood type?"


def _ranked(texts, cosine, unnamed, alone, w=W, check=True, floor=None, query=QUERY):
    nodes = [MemoryNode(content=t, scope=SCOPE, created_at=NOW, valid_from=NOW, last_accessed=NOW) for t in texts]
    structure = RecallIndex()
    for n in nodes:
        structure.add(n)
    by_id = {n.id: n for n in nodes}
    q = Query.parse(query, NOW)
    ids = [n.id for n in nodes]
    matches = structure.keywords.match(q.terms, [SCOPE.key], 100)
    row = {i: x for x, i in enumerate(ids)}

    def cosines(some):
        return np.array([[unnamed[row[i]] for i in some], [alone[row[i]] for i in some]])

    names = NameCheck(q.names, q.asked, cosines, structure.keywords.holds) if check else None
    hits = rank(list(zip(ids, cosine, strict=True)), matches.top, by_id, structure, q, w, NOW, lambda n: True,
                query_weight=structure.keywords.weight(q.terms, [SCOPE.key]), keyword_scores=matches.bm25,
                names=names, min_relevance=floor)  # fmt: skip
    return {h.node.content: h for h in hits}


def test_memories_sharing_only_the_name_fall_below_the_floor():
    texts = ["Alice works as a nurse", "Alice has a dog"]
    args = {"cosine": [0.56, 0.5], "unnamed": [0.18, 0.1], "alone": [0.6, 0.55]}
    assert _ranked(texts, **args) == {}
    assert set(_ranked(texts, **args, check=False)) == set(texts)  # the bug: the name lifts them over the floor
    assert set(_ranked(texts, **args, w=replace(W, name_check=False))) == set(texts)
    # a recall's own floor shows them below the configured one, at their name-free relevance
    nurse = _ranked(texts, **args, floor=0.0)["Alice works as a nurse"]
    assert nurse.relevance < W.min_relevance and nurse.signals["unnamed"] == pytest.approx(0.18)
    assert nurse.relevance == pytest.approx((0.18 - W.dense_zero) / (W.dense_full - W.dense_zero))


def test_nothing_changes_when_the_best_match_holds_what_is_asked():
    texts = ["Alice works as a nurse", "Alice's blood type is O negative"]
    hits = _ranked(texts, cosine=[0.56, 0.8], unnamed=[0.18, 0.6], alone=[0.6, 0.5])
    assert set(hits) == set(texts)  # the query is answered; the nurse memory ranks below, as before
    assert next(iter(hits)) == "Alice's blood type is O negative"


def test_a_memory_holding_two_names_the_query_names_is_not_a_name_only_match():
    query = "What is Alice's blood type according to Bob?"
    hits = _ranked(["Bob told Alice a joke"], cosine=[0.56], unnamed=[0.1], alone=[0.7], query=query)
    assert "Bob told Alice a joke" in hits
    assert _ranked(["Alice works as a nurse"], cosine=[0.56], unnamed=[0.1], alone=[0.7], query=query) == {}


def test_a_name_only_memory_passes_when_the_question_still_matches_without_the_name():
    hits = _ranked(["Alice works as a nurse"], cosine=[0.56], unnamed=[0.30], alone=[0.6])
    assert hits["Alice works as a nurse"].relevance > W.min_relevance  # 0.30 is over the floor's cosine


def test_a_name_only_memory_passes_when_the_question_is_closer_to_it_than_the_name_alone():
    hits = _ranked(["Alice works as a nurse"], cosine=[0.56], unnamed=[0.18], alone=[0.50])
    assert "Alice works as a nurse" in hits
    margin = replace(W, name_margin=0.1)  # a lift of 0.06 is not more than the margin
    assert _ranked(["Alice works as a nurse"], cosine=[0.56], unnamed=[0.18], alone=[0.50], w=margin) == {}


# ------------------------------------------------------------------ the shard
def test_the_shard_reads_one_or_three_rows_and_refuses_others(tmp_path):
    shard = Shard("shard-0", SqliteStore(tmp_path / "r.sqlite"), EdgeVectorIndex(tmp_path / "v", 4), dim=4,
                  clock=ManualClock(NOW))  # fmt: skip
    try:
        ctx = Context("acme", "u1")
        alice = MemoryNode(content="Alice works as a nurse", scope=ctx.scope)
        shard.put_many(ctx, [alice], np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32))
        query = np.array([0.6, 0.8, 0.0, 0.0], dtype=np.float32)  # cosine 0.6 with the memory
        unnamed = np.array([0.0, 1.0, 0.0, 0.0], dtype=np.float32)  # 0: nothing asked is in it
        alone = np.array([0.7, 0.0, 0.71414284, 0.0], dtype=np.float32)  # 0.7: the name matches it better
        one = shard.search(ctx, query, 5, query=QUERY)
        three = np.stack([query, unnamed, alone])
        assert [h.node.id for h in one] == [alice.id] and shard.search(ctx, three, 5, query=QUERY) == []
        assert shard.search(ctx, three.reshape(-1), 5, query=QUERY) == []  # as the wire's bytes arrive
        for bad in (np.stack([query, unnamed]), np.zeros((4, 4)), np.full((3, 4), np.nan)):
            with pytest.raises(InvalidRequest):
                shard.search(ctx, bad, 5, query=QUERY)
    finally:
        shard.close()


def test_a_query_of_names_and_its_opening_word_asks_about_them():
    """"Vim or Helix?": the opening word may be a name too (capitalised anyway): a query of
    names and that word asks about the names, so no name check applies to it."""
    from memorybus.retrieval.query import query_texts, without_names

    assert without_names("Vim or Helix?") is None
    assert query_texts("Vim or Helix?") == ["Vim or Helix?"]
    assert without_names("Which editor, Vim or Helix?") == "Which editor, someone or someone?"
