"""Answer forms (``RankingWeights.answer``): a question that asks *when* prefers, among
relevant memories, one that states a time; *how many* one that states a number. The
forms are read from the text alone; a question that asks for no form changes nothing."""

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memorybus import MemoryNode, RankingWeights, Scope
from memorybus.retrieval.answers import NUMBER, TIME, asked_forms, held_forms
from memorybus.retrieval.query import Query
from memorybus.retrieval.ranking import rank
from memorybus.retrieval.structure import RecallIndex

NOW = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
SCOPE = Scope("acme", "u1")
# only relevance and the answer form count
ONLY_ANSWER = RankingWeights(
    salience=0.0, recency=0.0, importance=0.0, confidence=0.0, speaker=0.0, neighbor=0.0, thread=0.0, time=0.0,
    neighbor_candidates=0, thread_centroid=0.0, graph=0.0, min_relevance=0.0, dense_zero=0.0, dense_full=1.0,
    length=0.0, answer=0.1,
)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "forms"),
    [
        ("We moved to Lisbon last spring.", TIME),
        ("The deploy finished yesterday.", TIME),
        ("I've had the bike for 3 years now.", TIME | NUMBER),
        ("Our standup is on Monday at 9am.", TIME),
        ("The invoice is dated March 5, 2024.", TIME | NUMBER),
        ("She owns two cats.", NUMBER),
        ("The cluster has 12 nodes.", NUMBER),
        ("The user prefers dark mode in the editor.", 0),
        ("I may try the new recipe.", 0),  # "may" the verb is not the month
        ("", 0),
    ],
)
def test_held_forms_read_times_and_numbers_from_the_text(text, forms):
    assert held_forms(text) == forms


@pytest.mark.parametrize(
    ("question", "forms"),
    [
        ("When did the deploy finish?", TIME),
        ("How long has she lived in Lisbon?", TIME),
        ("What year did they move?", TIME),
        ("How many cats does she own?", NUMBER),
        ("How much did the laptop cost?", NUMBER),
        ("How often does the job run?", TIME | NUMBER),
        ("What editor theme does the user prefer?", 0),
        ("Why did the build fail?", 0),
        ("", 0),
    ],
)
def test_asked_forms_read_what_a_question_asks_for(question, forms):
    assert asked_forms(question) == forms
    assert Query.parse(question, NOW).forms == forms


def memory(name, content):
    when = NOW - 86_400.0
    return MemoryNode(content=content, scope=SCOPE, id=f"00000000-0000-4000-8000-{name:0>12}", created_at=when,
                      valid_from=when, last_accessed=when)  # fmt: skip


def ranked(question, dense, nodes, w, **kw):
    structure = RecallIndex()
    for n in nodes:
        structure.add(n)
    query = Query.parse(question, NOW)
    hits = rank(dense, [], {n.id: n for n in nodes}, structure, query, w, NOW, lambda n: True, **kw)
    return [h.node.id for h in hits], {h.node.id: h for h in hits}


def test_a_when_question_prefers_the_memory_that_states_a_time():
    plain = memory("a", "We finally moved into the flat by the river.")
    timed = memory("b", "We moved into the flat by the river last month.")
    dense = [(plain.id, 0.62), (timed.id, 0.6)]
    ids, hits = ranked("When did they move into the flat?", dense, [plain, timed], ONLY_ANSWER)
    assert ids == [timed.id, plain.id]
    assert hits[timed.id].signals["answer"] == 1.0 and "answer" not in hits[plain.id].signals
    assert hits[timed.id].relevance < hits[plain.id].relevance  # a lift of the rerank, not relevance
    # without the weight, or for a question that asks for no form, relevance decides
    assert ranked("When did they move into the flat?", dense, [plain, timed], replace(ONLY_ANSWER, answer=0.0))[0] == [
        plain.id, timed.id]  # fmt: skip
    assert ranked("Where is the flat?", dense, [plain, timed], ONLY_ANSWER)[0] == [plain.id, timed.id]
    # a clearly better match still comes first
    assert ranked("When did they move into the flat?", [(plain.id, 0.9), (timed.id, 0.6)], [plain, timed],
                  ONLY_ANSWER)[0] == [plain.id, timed.id]  # fmt: skip


def test_a_how_many_question_prefers_the_memory_that_states_a_number():
    vague = memory("a", "She has cats and adores them.")
    counted = memory("b", "She has three cats now.")
    dense = [(vague.id, 0.55), (counted.id, 0.54)]
    assert ranked("How many cats does she have?", dense, [vague, counted], ONLY_ANSWER)[0] == [counted.id, vague.id]
    assert ranked("What pets does she have?", dense, [vague, counted], ONLY_ANSWER)[0] == [vague.id, counted.id]


def test_the_answer_form_never_lifts_a_memory_below_the_floor():
    plain = memory("a", "We finally moved into the flat by the river.")
    timed = memory("b", "We moved into the flat by the river last month.")
    w = replace(ONLY_ANSWER, min_relevance=0.3, answer=5.0)  # far stronger than relevance
    dense = [(plain.id, 0.31), (timed.id, 0.29)]
    assert ranked("When did they move?", dense, [plain, timed], w)[0] == [plain.id]
    ids, hits = ranked("When did they move?", dense, [plain, timed], w, min_relevance=0.0)
    assert ids == [plain.id, timed.id] and hits[timed.id].score < 0.3 <= hits[plain.id].score <= 1.0


def test_forms_follow_writes():
    structure = RecallIndex()
    n = memory("a", "She has three cats.")
    structure.add(n)
    assert structure.forms([n.id, "missing"]) == [NUMBER, 0]
    structure.add(replace(n, content="She has cats."))  # a new version
    assert structure.forms([n.id]) == [0]
    structure.add(replace(n, content="She got them last week."))
    structure.remove(n.id)
    assert structure.forms([n.id]) == [0]
