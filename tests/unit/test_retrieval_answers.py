"""Answer forms (``RankingWeights.answer``): a question that asks *when* prefers, among
relevant memories, one that states a time; *how many* one that states a number. The
forms are read from the text alone; a question that asks for no form changes nothing. A
*which X* question prefers a memory that names a specific thing (``RankingWeights.named``)."""

from dataclasses import replace
from datetime import UTC, datetime
from functools import partial

import pytest

from memorybus import MemoryNode, RankingWeights, Scope
from memorybus.retrieval.answers import NAMED, NUMBER, TIME, asked_forms, held_forms, name_terms
from memorybus.retrieval.query import Query
from memorybus.retrieval.ranking import rank
from memorybus.retrieval.structure import RecallIndex
from memorybus.retrieval.text import tokens

NOW = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
SCOPE = Scope("acme", "u1")
# only relevance and the answer form count
ONLY_ANSWER = RankingWeights(
    salience=0.0, recency=0.0, importance=0.0, confidence=0.0, speaker=0.0, neighbor=0.0, thread=0.0, time=0.0,
    neighbor_candidates=0, thread_centroid=0.0, graph=0.0, min_relevance=0.0, dense_zero=0.0, dense_full=1.0,
    length=0.0, answer=0.1, named=0.0,
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
        ("What editor theme does the user prefer?", NAMED),
        ("What is the editor theme?", 0),
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


# ---------------------------------------------------------------- named things
ONLY_NAMED = replace(ONLY_ANSWER, answer=0.0, named=0.1, named_share=0.2)


def test_name_terms_are_the_capitalised_words_inside_sentences():
    assert name_terms("We flew to Lisbon with Dana. Great trip!") == tuple(tokens("Lisbon Dana"))
    assert name_terms("Deploys go through ArgoCD now.") == tuple(tokens("ArgoCD"))
    assert name_terms("the build is green") == () and name_terms("") == ()
    assert held_forms('She is reading "The Left Hand of Darkness".') & NAMED


@pytest.mark.parametrize(
    ("question", "named"),
    [("Which database does the team use?", True), ("What game did she play?", True),
     ("What kind of music does he like?", True), ("What did she play?", False), ("What is the plan?", False),
     ("Where did they move?", True), ("Who wrote it?", False), ("When did it ship?", False)],
)  # fmt: skip
def test_which_and_what_thing_questions_ask_for_a_named_thing(question, named):
    assert bool(asked_forms(question) & NAMED) is named


def named_setup():
    # "Sam" is in every memory (a greeting, a name everyone uses); "Postgres" in one
    texts = ["Sam, we moved the data to Postgres last week.", "Sam, we moved the data to the new database.",
             *[f"Thanks Sam, note {i} is filed." for i in range(8)]]  # fmt: skip
    nodes = [memory(str(i), t) for i, t in enumerate(texts)]
    return nodes, nodes[0], nodes[1]


def ranked_named(question, dense, nodes, w):
    structure = RecallIndex()
    for n in nodes:
        structure.add(n)
    query = Query.parse(question, NOW)
    share = partial(structure.keywords.doc_share, scope_keys=[SCOPE.key])
    hits = rank(dense, [], {n.id: n for n in nodes}, structure, query, w, NOW, lambda n: True, term_share=share)
    return [h.node.id for h in hits], {h.node.id: h for h in hits}


def test_a_which_question_prefers_the_memory_that_names_a_rare_thing():
    nodes, named, vague = named_setup()
    dense = [(vague.id, 0.62), (named.id, 0.6)]
    ids, hits = ranked_named("Which database did we move the data to?", dense, nodes, ONLY_NAMED)
    assert ids == [named.id, vague.id]
    assert hits[named.id].signals["named"] == 1.0 and "named" not in hits[vague.id].signals  # "Sam" is common
    assert ranked_named("Which database did we move the data to?", dense, nodes,
                        replace(ONLY_NAMED, named=0.0))[0] == [vague.id, named.id]  # fmt: skip
    assert ranked_named("Why did we move the data?", dense, nodes, ONLY_NAMED)[0] == [vague.id, named.id]
    # a name every memory holds names nothing specific: with a share above 1 it would count
    assert ranked_named("Which database did we move the data to?", [(vague.id, 0.62), (nodes[2].id, 0.6)], nodes,
                        ONLY_NAMED)[0] == [vague.id, nodes[2].id]  # fmt: skip


def test_a_named_thing_never_lifts_a_memory_below_the_floor():
    nodes, named, vague = named_setup()
    w = replace(ONLY_NAMED, min_relevance=0.3, named=5.0)
    assert ranked_named("Which database?", [(vague.id, 0.31), (named.id, 0.29)], nodes, w)[0] == [vague.id]


def test_an_index_reads_name_terms_through_its_memo_with_the_same_terms(monkeypatch):
    from memorybus.retrieval import structure

    index = structure.RecallIndex()
    texts = ["We flew to Lisbon with Dana. Great trip!", "Dana said the Lisbon office moved to ArgoCD.",
             "the build is green", 'She read "The Wheel of Time" with Dana']  # fmt: skip
    for text in texts:
        assert set(name_terms(text, index._word_terms)) == set(name_terms(text))
    assert index._terms_of_word["Dana"] == tuple(tokens("Dana"))  # remembered once, reused
    small = structure.RecallIndex()
    monkeypatch.setattr(structure, "_WORD_MEMO", 2)  # the memo stays bounded
    assert set(name_terms("Ana met Ben and Cleo in Dover", small._word_terms)) == set(tokens("Ben Cleo Dover"))
    assert len(small._terms_of_word) == 2
