"""The document-length prior of the rerank (``RankingWeights.length``): a memory that
says more (more distinct keyword terms) ranks first among equally relevant ones, and
never above a relevant memory when it is itself below the relevance floor."""

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memorybus import ConfigError, MemoryNode, RankingWeights, Scope
from memorybus.retrieval.keyword import KeywordIndex
from memorybus.retrieval.ranking import rank
from memorybus.retrieval.structure import RecallIndex
from memorybus.retrieval.text import tokens

NOW = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
SCOPE = Scope("acme", "u1")
# only relevance and the length prior count
ONLY_LENGTH = RankingWeights(
    salience=0.0, recency=0.0, importance=0.0, confidence=0.0, speaker=0.0, neighbor=0.0, thread=0.0, time=0.0,
    neighbor_candidates=0, thread_centroid=0.0, graph=0.0, min_relevance=0.0, dense_zero=0.0, dense_full=1.0,
    length=0.2, length_pivot=5.0,
)  # fmt: skip
SHORT = "Sounds great!"
LONG = "We drove to the lake on Saturday, rented a canoe and cooked trout over a campfire with my sister."


def memory(name: str, content: str) -> MemoryNode:
    when = NOW - 86_400.0
    return MemoryNode(content=content, scope=SCOPE, id=f"00000000-0000-4000-8000-{name:0>12}", created_at=when,
                      valid_from=when, last_accessed=when)  # fmt: skip


def ranked(dense, nodes, w):
    structure = RecallIndex()
    for n in nodes:
        structure.add(n)
    hits = rank(dense, [], {n.id: n for n in nodes}, structure, None, w, NOW, lambda n: True)
    return [h.node.id for h in hits], {h.node.id: h for h in hits}


def test_distinct_terms_counts_each_term_once_and_follows_the_index():
    idx = KeywordIndex()
    idx.add("a", "s", ["trout", "trout", "lake"])
    idx.add("b", "s", ["canoe"])
    assert idx.distinct_terms(["a", "b", "missing"]).tolist() == [2.0, 1.0, 0.0]
    idx.add("a", "s", ["trout"])  # a new version replaces the old one
    idx.remove("b")
    assert idx.distinct_terms(["a", "b"]).tolist() == [1.0, 0.0]
    for i in range(200):  # enough churn to renumber every slot
        idx.add(f"x{i}", "s", [f"t{j}" for j in range(i % 7 + 1)])
        idx.remove(f"x{i}")
    idx.add("c", "s", ["a1", "a2", "a3"])
    assert idx.distinct_terms(["a", "c"]).tolist() == [1.0, 3.0] and idx.distinct_terms([]).shape == (0,)


def test_a_memory_that_says_more_ranks_first_among_equally_relevant_ones():
    short, long = memory("a", SHORT), memory("b", LONG)  # the short one wins a tie by id
    assert len(set(tokens(LONG))) > 3 * len(set(tokens(SHORT)))
    dense = [(short.id, 0.6), (long.id, 0.6)]
    ids, hits = ranked(dense, [short, long], ONLY_LENGTH)
    assert ids == [long.id, short.id] and hits[long.id].score > hits[short.id].score
    assert hits[long.id].relevance == hits[short.id].relevance  # a prior of the rerank, not relevance
    assert ranked(dense, [short, long], replace(ONLY_LENGTH, length=0.0))[0] == [short.id, long.id]
    # a clearly better match still comes first
    assert ranked([(short.id, 0.9), (long.id, 0.6)], [short, long], ONLY_LENGTH)[0] == [short.id, long.id]


def test_the_length_prior_never_lifts_a_memory_below_the_floor():
    short, long = memory("a", SHORT), memory("b", LONG)
    dense = [(short.id, 0.31), (long.id, 0.29)]
    w = replace(ONLY_LENGTH, min_relevance=0.3, length=5.0)  # a prior far stronger than relevance
    assert ranked(dense, [short, long], w)[0] == [short.id]  # the long one is below the floor: left out
    structure = RecallIndex()
    for n in (short, long):
        structure.add(n)
    hits = rank(dense, [], {short.id: short, long.id: long}, structure, None, w, NOW, lambda n: True,
                min_relevance=0.0)  # fmt: skip
    assert [h.node.id for h in hits] == [short.id, long.id]
    assert hits[1].score < 0.3 <= hits[0].score <= 1.0  # still on the 0..1 scale, below the floor
    # above the floor the same prior does reorder them: it is not dead weight
    assert ranked(dense, [short, long], replace(w, min_relevance=0.0))[0] == [long.id, short.id]


def test_length_pivot_must_be_positive():
    with pytest.raises(ConfigError):
        RankingWeights(length_pivot=0.0)
    assert RankingWeights().length > 0 and RankingWeights.provenance()["length"]
