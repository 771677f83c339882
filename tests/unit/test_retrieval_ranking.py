"""The ranking stages on hand-made candidates (no model, no Ray).

Each feature test also runs with the feature's weight at zero and checks the
order flips, so it fails if the feature is removed. The gate (relevance before
everything else) and the 0..1 scale are also checked on random inputs.
"""

from dataclasses import fields, replace
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorybus import ConfigError, InvalidRequest, MemoryKind, MemoryNode, RankingWeights, RecallOptions, Scope
from memorybus.retrieval import RecallHit, merge_hits
from memorybus.retrieval.query import Query
from memorybus.retrieval.ranking import rank
from memorybus.retrieval.structure import RecallIndex
from memorybus.retrieval.text import tokens

NOW = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
DAY = 86_400.0
SCOPE = Scope("acme", "u1")
# only the feature under test contributes unless a test turns more on; nothing is gated
PLAIN = RankingWeights(
    salience=0.0, recency=0.0, importance=0.0, confidence=0.0, speaker=0.0, neighbor=0.0, thread=0.0, time=0.0,
    neighbor_candidates=0, thread_centroid=0.0, graph=0.0, min_relevance=0.0, dense_zero=0.0, dense_full=1.0,
    length=0.0, session=0.0,
)  # fmt: skip


def node(name, *, thread=None, position=None, when=NOW - 30 * DAY, **kw):
    return MemoryNode(
        content=f"memory {name}", scope=SCOPE, id=f"00000000-0000-4000-8000-{name:0>12}", thread=thread,
        position=position, created_at=when, valid_from=when, last_accessed=when, **kw,
    )  # fmt: skip


def setup(nodes):
    structure = RecallIndex()
    for n in nodes:
        structure.add(n)
    return {n.id: n for n in nodes}, structure


def order(nodes, structure, dense, keyword=(), query=None, w=PLAIN, vector=None, **kw):
    hits = rank(list(dense), list(keyword), nodes, structure, query, w, NOW, lambda n: True, vector, **kw)
    return [h.node.id for h in hits], {h.node.id: h for h in hits}


# ------------------------------------------------------------------ relevance
def test_dense_relevance_is_calibrated_cosine():
    a, b, c = node("a"), node("b"), node("c")
    nodes, st = setup([a, b, c])
    w = replace(PLAIN, dense_zero=0.2, dense_full=0.7)
    _, hits = order(nodes, st, [(a.id, 0.95), (b.id, 0.45), (c.id, 0.1)], w=w)
    assert hits[a.id].relevance == pytest.approx(1.0)  # at or above dense_full
    assert hits[b.id].relevance == pytest.approx(0.5)
    assert hits[c.id].relevance == 0.0  # at or below dense_zero
    assert hits[b.id].signals["cosine"] == pytest.approx(0.45)


def test_keyword_relevance_is_the_share_of_the_query_matched_and_fused_by_weight():
    a, b, c = node("a"), node("b"), node("c")
    nodes, st = setup([a, b, c])
    dense = [(a.id, 0.8), (b.id, 0.7)]
    keyword = [(b.id, 6.0), (c.id, 3.0)]
    w = replace(PLAIN, keyword=1.0)
    ids, hits = order(nodes, st, dense, keyword, w=w, query_weight=6.0)
    assert hits[b.id].signals["keyword"] == pytest.approx(1.0)
    assert hits[c.id].signals["keyword"] == pytest.approx(0.5)
    assert hits[b.id].relevance == pytest.approx(1.0)  # 1 - (1 - 0.7) * (1 - 1.0)
    assert hits[c.id].relevance == pytest.approx(0.5)
    assert ids == [b.id, a.id, c.id]
    _, half = order(nodes, st, dense, keyword, w=replace(w, keyword=0.5), query_weight=6.0)
    assert half[b.id].relevance == pytest.approx(1 - 0.3 * 0.5)
    # without the keyword weight the dense order stands
    assert order(nodes, st, dense, keyword, w=replace(w, keyword=0.0), query_weight=6.0)[0][:2] == [a.id, b.id]
    # dense only: keyword candidates do not even count
    assert order(nodes, st, dense, keyword, w=replace(w, hybrid=False), query_weight=6.0)[0] == [a.id, b.id]


def test_strong_keyword_matches_keep_their_order_above_the_query_weight():
    """A memory can score more BM25 than the query's weight (a term repeated): the shares
    are then taken of the best match, so two strong matches never tie at 1."""
    a, b = node("a"), node("b")
    nodes, st = setup([a, b])
    dense = [(a.id, 0.5), (b.id, 0.5)]
    ids, hits = order(nodes, st, dense, [(a.id, 9.0), (b.id, 12.0)], w=replace(PLAIN, keyword=1.0), query_weight=6.0)
    assert hits[b.id].signals["keyword"] == pytest.approx(1.0)
    assert hits[a.id].signals["keyword"] == pytest.approx(0.75)
    assert ids == [b.id, a.id]


def test_keyword_candidates_get_their_exact_cosine_from_the_vector_cache():
    vecs = np.eye(4, dtype=np.float32)
    a = replace(node("a"), embedding=vecs[0])
    b = replace(node("b"), embedding=(vecs[0] + vecs[1]) / np.sqrt(2))
    nodes, st = setup([a, b])
    _, hits = order(nodes, st, [(a.id, 1.0)], [(b.id, 3.0)], vector=vecs[0], query_weight=3.0)
    assert hits[b.id].signals["cosine"] == pytest.approx(1 / np.sqrt(2), rel=1e-3)


def test_min_relevance_drops_what_does_not_match():
    a, b = node("a"), node("b")
    nodes, st = setup([a, b])
    dense = [(a.id, 0.6), (b.id, 0.15)]
    w = replace(PLAIN, min_relevance=0.3)
    assert order(nodes, st, dense, w=w)[0] == [a.id]  # the configured floor
    assert order(nodes, st, dense, w=w, min_relevance=0.0)[0] == [a.id, b.id]  # lowered for one call
    assert order(nodes, st, dense, w=w, min_relevance=0.7)[0] == []  # raised for one call


# ----------------------------------------------------------------------- gate
def test_nothing_lifts_an_irrelevant_memory_above_a_relevant_one():
    """Every other signal at its strongest cannot carry a memory below the floor past one
    just above it with every other signal at its weakest."""
    floor = 0.3
    w = replace(RankingWeights(), min_relevance=floor, dense_zero=0.0, dense_full=1.0)
    strong = replace(node("a", thread="t", position=0, when=NOW - 0.1 * DAY), importance=10.0,
                     speaker="Ann", access_count=50, last_accessed=NOW, kind=MemoryKind.SEMANTIC)  # fmt: skip
    weak = replace(node("b", when=NOW - 900 * DAY), importance=1.0, confidence=0.1, decay_rate=5.0)
    # its thread answers the query well (a lift), two turns away (no context: that would be relevance)
    filler = node("d", thread="t", position=1, when=NOW - 0.1 * DAY)
    sibling = node("c", thread="t", position=2, when=NOW - 0.1 * DAY)
    nodes, st = setup([strong, weak, filler, sibling])
    query = Query.parse("what did ann say yesterday", NOW)
    dense = [(strong.id, floor - 0.01), (weak.id, floor + 0.01), (sibling.id, 0.95), (filler.id, 0.0)]
    linked = {strong.id: 1.0}
    ids, hits = order(nodes, st, dense, query=query, w=w, min_relevance=0.0, linked=linked)
    assert ids.index(weak.id) < ids.index(strong.id)
    assert hits[strong.id].score < floor <= hits[weak.id].score
    assert hits[strong.id].signals.get("speaker") == 1.0  # the signals were there, and lost
    assert hits[strong.id].signals.get("thread", 0) > 0.9 and hits[strong.id].signals.get("time") == 1.0
    # with the floor at 0, the same signals do lift it: they are not dead weight
    assert order(nodes, st, dense, query=query, w=replace(w, min_relevance=0.0), linked=linked)[0].index(
        strong.id) < ids.index(weak.id)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(-1, 1),  # cosine
            st.floats(0, 20),  # bm25
            st.floats(1, 10),  # importance
            st.floats(0, 1),  # confidence
            st.integers(0, 3),  # thread (0: none)
            st.booleans(),  # speaker named
            st.floats(0, 800),  # age in days
        ),
        min_size=1,
        max_size=12,
    ),
    st.floats(0, 0.9),
)
def test_scores_are_0_to_1_and_every_relevant_memory_outranks_every_irrelevant_one(rows, floor):
    w = replace(RankingWeights(), min_relevance=floor, neighbor_candidates=0)
    made = []
    for i, (_, _, imp, conf, thread, named, age) in enumerate(rows):
        made.append(replace(
            node(str(i), thread=f"t{thread}" if thread else None, position=i if thread else None,
                 when=NOW - age * DAY), importance=imp, confidence=conf, speaker="ann" if named else None,
        ))  # fmt: skip
    nodes, st_ = setup(made)
    dense = [(n.id, r[0]) for n, r in zip(made, rows, strict=True)]
    keyword = [(n.id, r[1]) for n, r in zip(made, rows, strict=True) if r[1] > 0]
    query = Query.parse("what did ann say last week", NOW)
    hits = rank(dense, keyword, nodes, st_, query, w, NOW, lambda n: True, None, query_weight=10.0,
                min_relevance=0.0)  # fmt: skip
    assert len(hits) == len(made)
    for h in hits:
        assert 0.0 <= h.score <= 1.0 and 0.0 <= h.relevance <= 1.0
    relevant = [h for h in hits if h.relevance >= floor]
    irrelevant = [h for h in hits if h.relevance < floor]
    if relevant and irrelevant:
        assert min(h.score for h in relevant) > max(h.score for h in irrelevant)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


# ------------------------------------------------------------------ structure
def test_thread_neighbours_join_the_candidates_and_share_relevance():
    vecs = np.eye(3, dtype=np.float32)
    question = replace(node("a", thread="s", position=0), embedding=vecs[0])
    reply = replace(node("b", thread="s", position=1), embedding=vecs[1])  # "Yes, last Sunday!": no overlap
    other = replace(node("c", thread="t", position=0), embedding=vecs[2])
    nodes, st = setup([question, reply, other])
    w = replace(PLAIN, neighbor=0.3, neighbor_candidates=10)
    ids, hits = order(nodes, st, [(question.id, 1.0), (other.id, 0.0)], w=w, vector=vecs[0])
    assert ids[:2] == [question.id, reply.id]
    assert hits[reply.id].signals["context"] == pytest.approx(1.0)
    assert hits[reply.id].relevance == pytest.approx(0.3)
    ids, _ = order(nodes, st, [(question.id, 1.0), (other.id, 0.0)], w=PLAIN, vector=vecs[0])
    assert reply.id not in ids


def test_thread_relevance_lifts_its_members():
    s1a = node("a", thread="s1", position=0)
    s1b = node("b", thread="s1", position=5)
    s2 = node("c", thread="s2", position=0)
    nodes, st = setup([s1a, s1b, s2])
    dense = [(s1a.id, 0.9), (s2.id, 0.62), (s1b.id, 0.60)]
    ids, hits = order(nodes, st, dense, w=replace(PLAIN, thread=0.35))
    assert ids == [s1a.id, s1b.id, s2.id]
    assert hits[s1b.id].signals["thread"] == pytest.approx(0.9)  # the thread's best member
    assert order(nodes, st, dense, w=PLAIN)[0] == [s1a.id, s2.id, s1b.id]


def test_thread_centroid_lifts_the_thread_that_answers_as_a_whole():
    vecs = np.eye(4, dtype=np.float32)
    # s1: one member close to the query, the rest off-topic; s2: every member somewhat close
    s1 = [replace(node(f"1{i}", thread="s1", position=i), embedding=v) for i, v in
          enumerate([vecs[0] * 0.8 + vecs[1] * 0.6, vecs[2], vecs[3]])]  # fmt: skip
    s2 = [replace(node(f"2{i}", thread="s2", position=i), embedding=vecs[0] * 0.78 + vecs[1] * 0.62)
          for i in range(3)]  # fmt: skip
    nodes, st = setup([*s1, *s2])
    dense = [(n.id, float(n.embedding @ vecs[0])) for n in [*s1, *s2]]
    w = replace(PLAIN, thread=0.35, thread_centroid=0.0)
    assert order(nodes, st, dense, w=w, vector=vecs[0])[0][0] == s1[0].id
    ids, hits = order(nodes, st, dense, w=replace(w, thread_centroid=1.0), vector=vecs[0])
    assert ids[0] in {n.id for n in s2}
    assert hits[ids[0]].signals["thread"] > hits[s1[0].id].signals["thread"]


def test_undeclared_structured_keys_are_not_read():
    """Only declared fields count: a 'session', 'turn' or 'speaker' in structured is data."""
    a = node("a", structured={"session": "s1", "turn": 0, "speaker": "Caroline"})
    b = node("b", structured={"session": "s1", "turn": 1})
    c = node("c", structured={"session": "s1", "turn": 2}, when=NOW - 20 * DAY)
    nodes, st = setup([a, b, c])
    assert st.thread(a.id) is None and st.adjacent(a.id) == () and st.names(a.id) == ()
    # a session from time groups a and b (one time), not c (ten days later), whatever it says
    assert st.session(a.id) == st.session(b.id) != st.session(c.id)
    w = replace(PLAIN, thread=0.35, neighbor=0.5, speaker=0.35, neighbor_candidates=10, session=0.0)
    _, hits = order(nodes, st, [(a.id, 0.8), (b.id, 0.7)], query=Query.parse("what did caroline say", NOW), w=w)
    assert set(hits[a.id].signals) == {"cosine", "bm25", "dense", "keyword", "content", "context"}


@pytest.mark.parametrize(
    ("query", "fields_"),
    [
        ("what did Caroline paint?", {"speaker": "Caroline"}),
        ("what did caroline paint?", {"speaker": "Caroline"}),  # no capital letters needed
        ("what did the planner say about the deploy?", {"source": "agent:planner"}),
        ("what did the planner say about the deploy?", {"speaker": "agent:planner"}),
        ("anything from lee on the budget?", {"speaker": "Ann Lee"}),
    ],
)
def test_a_speaker_or_agent_named_in_the_query_is_preferred(query, fields_):
    named = node("a", **fields_)
    other = node("b", speaker="Melanie", source="agent:critic")
    nodes, st = setup([named, other])
    dense = [(other.id, 0.8), (named.id, 0.79)]
    ids, hits = order(nodes, st, dense, query=Query.parse(query, NOW), w=replace(PLAIN, speaker=0.25))
    assert ids == [named.id, other.id] and hits[named.id].signals["speaker"] == 1.0
    assert order(nodes, st, dense, query=Query.parse(query, NOW), w=PLAIN)[0] == [other.id, named.id]


def test_time_named_in_the_query_prefers_memories_of_that_time():
    may = node("a", when=datetime(2023, 5, 8, tzinfo=UTC).timestamp())
    june = node("b", when=datetime(2023, 6, 20, tzinfo=UTC).timestamp())
    nodes, st = setup([may, june])
    dense = [(may.id, 0.8), (june.id, 0.78)]
    query = Query.parse("where did we camp in June 2023?", NOW)
    ids, hits = order(nodes, st, dense, query=query, w=replace(PLAIN, time=0.4))
    assert ids == [june.id, may.id] and hits[june.id].signals["time"] == pytest.approx(1.0)
    assert order(nodes, st, dense, query=query, w=PLAIN)[0] == [may.id, june.id]


def test_the_words_of_a_named_time_are_not_keywords_unless_asked():
    words = set(Query.parse("which book did I finish a week ago?", NOW).terms)
    query = Query.parse("which book did I finish a week ago?", NOW, time_words=False)
    assert query.windows and set(query.terms) == words - set(tokens("a week ago")) and set(query.terms) < words
    assert query.term_set == frozenset(words)  # names are still looked up among every word
    assert set(Query.parse("where did we camp in June 2023?", NOW, time_words=False).terms) == set(tokens("camp"))
    only_time = Query.parse("last week?", NOW, time_words=False)  # nothing but a time: its words stay
    assert only_time.windows and set(only_time.terms) == set(tokens("last week"))
    no_time = Query.parse("which book did I finish?", NOW, time_words=False)
    assert no_time.terms == Query.parse("which book did I finish?", NOW).terms


def test_memories_inside_a_named_time_join_the_candidates():
    june = node("a", when=datetime(2023, 6, 20, tzinfo=UTC).timestamp())
    may = node("b", when=datetime(2023, 5, 8, tzinfo=UTC).timestamp())
    nodes, st = setup([june, may])
    inside = st.timeline.between([SCOPE.key], datetime(2023, 6, 1, tzinfo=UTC).timestamp(),
                                 datetime(2023, 7, 1, tzinfo=UTC).timestamp())  # fmt: skip
    assert inside == [june.id]
    query = Query.parse("what happened in June 2023?", NOW)
    ids, hits = order(nodes, st, [(may.id, 0.5)], query=query, w=replace(PLAIN, time=0.4), timed=inside)
    assert set(ids) == {june.id, may.id} and hits[june.id].signals["time"] == 1.0
    assert order(nodes, st, [(may.id, 0.5)], query=query, w=replace(PLAIN, time=0.4))[0] == [may.id]
    st.remove(june.id)
    assert st.timeline.between([SCOPE.key], 0, NOW) == [may.id]


def test_graph_links_lift_facts_and_join_the_candidates():
    a, b, c = (node(x, kind=MemoryKind.SEMANTIC) for x in "abc")
    nodes, st = setup([a, b, c])
    dense = [(a.id, 0.8), (b.id, 0.79)]
    linked = {b.id: 1.0, c.id: 0.5}
    ids, hits = order(nodes, st, dense, w=replace(PLAIN, graph=0.3), linked=linked)
    assert ids == [b.id, a.id, c.id] and hits[b.id].signals["graph"] == 1.0
    assert order(nodes, st, dense, w=PLAIN, linked=linked)[0] == [a.id, b.id]
    # conversation turns are left to the thread structure
    episodic = {i: replace(n, kind=MemoryKind.EPISODIC) for i, n in nodes.items()}
    assert order(episodic, st, dense, w=replace(PLAIN, graph=0.3), linked=linked)[0] == [a.id, b.id]


# --------------------------------------------------------------------- rerank
@pytest.mark.parametrize(("field", "high", "low"), [("importance", 10.0, 1.0), ("confidence", 1.0, 0.2)])
def test_rerank_by_importance_and_confidence(field, high, low):
    a, b = node("a", **{field: low}), node("b", **{field: high})
    nodes, st = setup([a, b])
    dense = [(a.id, 0.8), (b.id, 0.8)]
    assert order(nodes, st, dense, w=replace(PLAIN, **{field: 0.05}))[0] == [b.id, a.id]
    assert order(nodes, st, dense, w=PLAIN)[0] == [a.id, b.id]  # a tie, broken by id


def test_rerank_by_recency_and_salience():
    old = node("a", when=NOW - 300 * DAY)
    new = node("b", when=NOW - 1 * DAY)
    nodes, st = setup([old, new])
    dense = [(old.id, 0.8), (new.id, 0.79)]
    assert order(nodes, st, dense, w=replace(PLAIN, recency=0.05))[0] == [new.id, old.id]
    assert order(nodes, st, dense, w=replace(PLAIN, salience=0.3))[0] == [new.id, old.id]
    assert order(nodes, st, dense, w=PLAIN)[0] == [old.id, new.id]


# -------------------------------------------------------------- thread index
def test_thread_order_and_neighbours_follow_writes():
    turns = [node(str(i), thread="s", position=i) for i in range(5)]
    _, st = setup(reversed(turns))  # insertion order does not matter: position does
    ids = [t.id for t in turns]
    assert st.neighbors(ids[2], 1, 1) == [ids[1], ids[3]]
    assert st.neighbors(ids[2], 2, 2) == [ids[1], ids[3], ids[0], ids[4]]
    st.remove(ids[3])
    assert st.neighbors(ids[2], 1, 1) == [ids[1], ids[4]]
    assert st.predecessor_of(node("9", thread="s", position=9)) == ids[4]
    # the same thread name in another scope is another thread
    stranger = replace(node("x", thread="s", position=2), scope=Scope("acme", "u2"))
    st.add(stranger)
    assert stranger.id not in st.neighbors(ids[2], 2, 2)


# ---------------------------------------------------------------------- merge
def test_scores_of_different_shards_compare_as_they_are():
    """Each shard scores on the same absolute scale: a shard holding only weak matches
    does not put its best above another shard's exact match."""
    exact, close = node("a"), node("b")
    weak, worse = node("c"), node("d")
    w = replace(RankingWeights(), min_relevance=0.0)
    n1, s1 = setup([exact, close])
    n2, s2 = setup([weak, worse])
    g1 = rank([(exact.id, 0.92), (close.id, 0.7)], [], n1, s1, None, w, NOW, lambda n: True)
    g2 = rank([(weak.id, 0.35), (worse.id, 0.2)], [], n2, s2, None, w, NOW, lambda n: True)
    assert [h.node.id for h in merge_hits([g2, g1], 3)] == [exact.id, close.id, weak.id]


def test_merge_keeps_k_matches_then_their_expansions():
    a, b, c, d = node("a"), node("b"), node("c"), node("d")
    g1 = [RecallHit(a, 0.9, 0.9), RecallHit(c, 0.5, 0.0, "neighbor", a.id)]
    g2 = [RecallHit(b, 0.8, 0.8), RecallHit(d, 0.4, 0.0, "neighbor", b.id)]
    assert [(h.node.id, h.via) for h in merge_hits([g1, g2], 1)] == [(a.id, "match"), (c.id, "neighbor")]
    assert [h.node.id for h in merge_hits([g1, g2], 2)] == [a.id, b.id, c.id, d.id]


# -------------------------------------------------------------------- options
def test_recall_options_validate_and_admit():
    bad = ({"neighbors": -1}, {"relation_budget": True}, {"start": "x"}, {"start": 2.0, "end": 1.0},
           {"min_relevance": 1.5}, {"min_relevance": -0.1}, {"min_relevance": True})  # fmt: skip
    for kw in bad:
        with pytest.raises(InvalidRequest):
            RecallOptions(**kw).validate()
    old = node("a", when=NOW - 10 * DAY)
    closed = replace(old, valid_to=NOW - 5 * DAY)
    assert RecallOptions(start=NOW - 11 * DAY, end=NOW - 9 * DAY).admits(old)
    assert not RecallOptions(start=NOW - 9 * DAY).admits(old)
    assert not RecallOptions(end=NOW - 10 * DAY).admits(old)  # end is exclusive
    assert RecallOptions(as_of=NOW - 7 * DAY).admits(closed)
    assert not RecallOptions(as_of=NOW - 5 * DAY).admits(closed)
    assert not RecallOptions(as_of=NOW - 11 * DAY).admits(old)


def test_every_ranking_default_states_its_provenance_and_bad_weights_are_refused():
    prov = RankingWeights.provenance()
    assert set(prov) == {f.name for f in fields(RankingWeights)}
    grouped = [name for names in RankingWeights.GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(prov)  # every weight in exactly one group
    assert RankingWeights(speaker=0.5).group("structure")["speaker"] == 0.5
    with pytest.raises(ConfigError):
        RankingWeights().group("nonsense")
    assert all(isinstance(v, str) and len(v) > 10 for v in prov.values())
    for bad in ({"dense_zero": 0.8, "dense_full": 0.5}, {"min_relevance": 1.0}, {"keyword": -1.0},
                {"keyword": 1.5}, {"neighbor": 2.0}, {"thread": float("nan")}, {"session": -0.1},
                {"session_centroid": 1.5}, {"session_gap": 0.0}, {"session_gap": float("inf")},
                {"session_gap": float("nan")}):  # fmt: skip
        with pytest.raises(ConfigError):
            RankingWeights(**bad)


def test_a_session_from_time_lifts_its_members_and_a_lone_memory_lifts_nothing():
    """Plain memories written together (one scope and source, no long pause) form a session:
    its best member's relevance lifts the others; a memory alone in its session, or of a
    kind that has none, gets no lift of its own."""
    t = NOW - 10 * DAY
    hit = node("hit", when=t)
    mate = node("mate", when=t + 60)  # a minute later: the same session
    other = node("other", when=t + 5 * DAY)  # its own session, with a companion nothing asks about
    companion = node("companion", when=t + 5 * DAY + 30)
    lone = node("lone", when=t - 20 * DAY)
    fact = node("fact", when=t + 120, kind=MemoryKind.SEMANTIC)
    nodes, st = setup([hit, mate, other, companion, lone, fact])
    assert st.session(hit.id) == st.session(mate.id) and st.session(other.id) == st.session(companion.id)
    assert st.session(hit.id) != st.session(other.id) and st.session(fact.id) is None
    dense = [(hit.id, 0.9), (other.id, 0.52), (mate.id, 0.5), (companion.id, 0.1), (lone.id, 0.51), (fact.id, 0.505)]
    ids, hits = order(nodes, st, dense, w=PLAIN)
    assert ids[:4] == [hit.id, other.id, lone.id, fact.id]  # by relevance alone
    ids, hits = order(nodes, st, dense, w=replace(PLAIN, session=0.3))
    assert ids.index(mate.id) < ids.index(other.id)  # lifted by its session's best member
    assert ids.index(lone.id) > ids.index(other.id) and "session" not in hits[lone.id].signals
    assert "session" not in hits[fact.id].signals
    assert hits[mate.id].signals["session"] == pytest.approx(0.9) == hits[hit.id].signals["session"]
