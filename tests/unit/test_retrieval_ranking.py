"""Fusion, structure-aware ranking and the rerank, on hand-made candidates (no model, no Ray).

Each test also runs with the feature's weight at zero and checks the order flips,
so it fails if the feature is removed.
"""

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest

from memorybus import MemoryKind, MemoryNode, RankingWeights, Scope
from memorybus.retrieval.hybrid import Query, rank
from memorybus.retrieval.structure import RecallIndex

NOW = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
DAY = 86_400.0
SCOPE = Scope("acme", "u1")
# only the feature under test contributes unless a test turns more on
PLAIN = RankingWeights(
    salience=0.0, recency=0.0, importance=0.0, confidence=0.0, source_match=0.0, neighbor=0.0, session=0.0,
    time_match=0.0, neighbor_candidates=0, session_centroid=0.0, graph=0.0,
)  # fmt: skip


def node(name, *, session=None, turn=0, when=NOW - 30 * DAY, **kw):
    structured = {"session": session, "turn": turn} if session else {}
    return MemoryNode(
        content=f"memory {name}", scope=SCOPE, id=f"00000000-0000-4000-8000-{name:0>12}", structured=structured,
        created_at=when, valid_from=when, last_accessed=when, **kw,
    )  # fmt: skip


def setup(nodes):
    structure = RecallIndex()
    for n in nodes:
        structure.add(n)
    return {n.id: n for n in nodes}, structure


def order(nodes, structure, dense, keyword=(), query=None, w=PLAIN, vector=None):
    hits = rank(list(dense), list(keyword), nodes, structure, query, w, NOW, lambda n: True, vector)
    return [h.node.id for h in hits], {h.node.id: h for h in hits}


def test_fusion_is_normalised_and_weighted():
    a, b, c = node("a"), node("b"), node("c")
    nodes, st = setup([a, b, c])
    dense = [(a.id, 0.80), (b.id, 0.70)]
    keyword = [(b.id, 10.0), (c.id, 5.0)]
    w = replace(PLAIN, dense=1.0, keyword=0.45, dense_span=0.75)
    ids, hits = order(nodes, st, dense, keyword, w=w)
    assert ids == [b.id, a.id, c.id]
    assert hits[a.id].relevance == pytest.approx(1.0)
    assert hits[b.id].relevance == pytest.approx(1 - 0.10 / 0.75 + 0.45)
    assert hits[c.id].relevance == pytest.approx(0.45 * 0.5)
    assert hits[b.id].signals["keyword"] == 10.0
    # dense only: the keyword evidence is gone
    ids, _ = order(nodes, st, dense, keyword, w=replace(w, keyword=0.0))
    assert ids[0] == a.id
    ids, _ = order(nodes, st, dense, keyword, w=replace(w, hybrid=False))
    assert ids == [a.id, b.id]


def test_keyword_candidates_get_their_exact_cosine_from_the_vector_cache():
    vecs = np.eye(4, dtype=np.float32)
    a = replace(node("a"), embedding=vecs[0])
    b = replace(node("b"), embedding=(vecs[0] + vecs[1]) / np.sqrt(2))
    nodes, st = setup([a, b])
    q = vecs[0]
    _, hits = order(nodes, st, [(a.id, 1.0)], [(b.id, 3.0)], w=replace(PLAIN, keyword=0.45), vector=q)
    assert hits[b.id].signals["dense"] == pytest.approx(1 / np.sqrt(2), rel=1e-3)


@pytest.mark.parametrize(
    ("field", "high", "low"),
    [("importance", 10.0, 1.0), ("confidence", 1.0, 0.2)],
)
def test_rerank_by_importance_and_confidence(field, high, low):
    a, b = node("a", **{field: low}), node("b", **{field: high})
    nodes, st = setup([a, b])
    dense = [(a.id, 0.8), (b.id, 0.8)]
    ids, _ = order(nodes, st, dense, w=replace(PLAIN, **{field: 0.05}))
    assert ids == [b.id, a.id]
    ids, _ = order(nodes, st, dense, w=PLAIN)
    assert ids == [a.id, b.id]  # a tie, broken by id


def test_rerank_by_recency_and_salience():
    old = node("a", when=NOW - 300 * DAY)
    new = node("b", when=NOW - 1 * DAY)
    nodes, st = setup([old, new])
    dense = [(old.id, 0.8), (new.id, 0.79)]
    assert order(nodes, st, dense, w=replace(PLAIN, recency=0.05))[0] == [new.id, old.id]
    assert order(nodes, st, dense, w=replace(PLAIN, salience=0.3))[0] == [new.id, old.id]
    assert order(nodes, st, dense, w=PLAIN)[0] == [old.id, new.id]


def test_session_relevance_lifts_its_members():
    s1a = node("a", session="s1", turn=0)
    s1b = node("b", session="s1", turn=5)
    s2 = node("c", session="s2", turn=0)
    nodes, st = setup([s1a, s1b, s2])
    dense = [(s1a.id, 0.9), (s2.id, 0.62), (s1b.id, 0.60)]
    w = replace(PLAIN, session=0.35)
    ids, hits = order(nodes, st, dense, w=w)
    assert ids == [s1a.id, s1b.id, s2.id]
    assert hits[s1b.id].signals["session"] == pytest.approx(0.35)  # 0.35 x the session's best (1.0)
    assert order(nodes, st, dense, w=PLAIN)[0] == [s1a.id, s2.id, s1b.id]


def test_neighbours_join_the_candidates_and_share_relevance():
    vecs = np.eye(3, dtype=np.float32)
    question = replace(node("a", session="s", turn=0), embedding=vecs[0])
    reply = replace(node("b", session="s", turn=1), embedding=vecs[1])  # "Yes, last Sunday!": no overlap
    other = replace(node("c", session="t", turn=0), embedding=vecs[2])
    nodes, st = setup([question, reply, other])
    q = vecs[0]
    w = replace(PLAIN, neighbor=0.3, neighbor_candidates=10)
    ids, hits = order(nodes, st, [(question.id, 1.0), (other.id, 0.0)], w=w, vector=q)
    assert ids[:2] == [question.id, reply.id]
    assert hits[reply.id].signals["neighbor"] == pytest.approx(0.3)
    ids, _ = order(nodes, st, [(question.id, 1.0), (other.id, 0.0)], w=PLAIN, vector=q)
    assert reply.id not in ids


def test_source_named_in_the_query_is_preferred():
    mel = node("a", source="Melanie")
    caro = node("b", source="Caroline")
    nodes, st = setup([mel, caro])
    dense = [(mel.id, 0.8), (caro.id, 0.79)]
    query = Query.parse("What did Caroline paint?", NOW)
    assert order(nodes, st, dense, query=query, w=replace(PLAIN, source_match=0.25))[0] == [caro.id, mel.id]
    assert order(nodes, st, dense, query=query, w=PLAIN)[0] == [mel.id, caro.id]


def test_time_named_in_the_query_prefers_memories_of_that_time():
    may = node("a", when=datetime(2023, 5, 8, tzinfo=UTC).timestamp())
    june = node("b", when=datetime(2023, 6, 20, tzinfo=UTC).timestamp())
    nodes, st = setup([may, june])
    dense = [(may.id, 0.8), (june.id, 0.78)]
    query = Query.parse("Where did Melanie camp in June 2023?", NOW)
    ids, hits = order(nodes, st, dense, query=query, w=replace(PLAIN, time_match=0.4))
    assert ids == [june.id, may.id] and hits[june.id].signals["time"] == pytest.approx(0.4)
    assert order(nodes, st, dense, query=query, w=PLAIN)[0] == [may.id, june.id]


def test_session_order_and_neighbours_follow_writes():
    turns = [node(str(i), session="s", turn=i) for i in range(5)]
    _, st = setup(reversed(turns))  # insertion order does not matter
    ids = [t.id for t in turns]
    assert st.neighbors(ids[2], 1, 1) == [ids[1], ids[3]]
    assert st.neighbors(ids[2], 2, 2) == [ids[1], ids[3], ids[0], ids[4]]
    st.remove(ids[3])
    assert st.neighbors(ids[2], 1, 1) == [ids[1], ids[4]]
    assert st.predecessor_of(node("9", session="s", turn=9)) == ids[4]


def test_session_centroid_lifts_the_session_that_answers_as_a_whole():
    vecs = np.eye(4, dtype=np.float32)
    # s1: one member close to the query, the rest off-topic; s2: every member somewhat close
    s1 = [replace(node(f"1{i}", session="s1", turn=i), embedding=v) for i, v in
          enumerate([vecs[0] * 0.8 + vecs[1] * 0.6, vecs[2], vecs[3]])]  # fmt: skip
    s2 = [replace(node(f"2{i}", session="s2", turn=i), embedding=vecs[0] * 0.78 + vecs[1] * 0.62) for i in range(3)]
    nodes, st = setup([*s1, *s2])
    q = vecs[0]
    dense = [(n.id, float(n.embedding @ q)) for n in [*s1, *s2]]
    w = replace(PLAIN, session=0.35, session_centroid=0.0)
    assert order(nodes, st, dense, w=w, vector=q)[0][0] == s1[0].id
    ids, hits = order(nodes, st, dense, w=replace(w, session_centroid=1.0), vector=q)
    assert ids[0] in {n.id for n in s2}
    assert hits[ids[0]].signals["session"] > hits[s1[0].id].signals["session"]


def test_graph_links_lift_facts_as_a_fused_signal_and_join_the_candidates():
    a, b, c = (node(x, kind=MemoryKind.SEMANTIC) for x in "abc")
    nodes, st = setup([a, b, c])
    dense = [(a.id, 0.8), (b.id, 0.79)]
    linked = {b.id: 1.0, c.id: 0.5}
    got = rank(dense, [], nodes, st, None, replace(PLAIN, graph=0.3), NOW, lambda n: True, None, linked=linked)
    assert [h.node.id for h in got] == [b.id, a.id, c.id]
    assert got[0].signals["graph"] == pytest.approx(0.3)
    plain = rank(dense, [], nodes, st, None, PLAIN, NOW, lambda n: True, None, linked=linked)
    assert [h.node.id for h in plain] == [a.id, b.id]
    # conversation turns are left to the session structure
    episodic = {i: replace(n, kind=MemoryKind.EPISODIC) for i, n in nodes.items()}
    turns = rank(dense, [], episodic, st, None, replace(PLAIN, graph=0.3), NOW, lambda n: True, None, linked=linked)
    assert [h.node.id for h in turns] == [a.id, b.id]


def test_merge_keeps_k_matches_then_their_expansions():
    from memorybus.retrieval import RecallHit, merge_hits

    a, b, c, d = node("a"), node("b"), node("c"), node("d")
    g1 = [RecallHit(a, 0.9, 0.9), RecallHit(c, 0.5, 0.0, "neighbor", a.id)]
    g2 = [RecallHit(b, 0.8, 0.8), RecallHit(d, 0.4, 0.0, "neighbor", b.id)]
    merged = merge_hits([g1, g2], 1)
    assert [(h.node.id, h.via) for h in merged] == [(a.id, "match"), (c.id, "neighbor")]
    merged = merge_hits([g1, g2], 2)
    assert [h.node.id for h in merged] == [a.id, b.id, c.id, d.id]


def test_recall_options_validate_and_admit():
    from memorybus import InvalidRequest
    from memorybus.retrieval import RecallOptions

    for bad in ({"neighbors": -1}, {"relation_budget": True}, {"start": "x"}, {"start": 2.0, "end": 1.0}):
        with pytest.raises(InvalidRequest):
            RecallOptions(**bad).validate()
    old = node("a", when=NOW - 10 * DAY)
    closed = replace(old, valid_to=NOW - 5 * DAY)
    assert RecallOptions(start=NOW - 11 * DAY, end=NOW - 9 * DAY).admits(old)
    assert not RecallOptions(start=NOW - 9 * DAY).admits(old)
    assert not RecallOptions(end=NOW - 10 * DAY).admits(old)  # end is exclusive
    assert RecallOptions(as_of=NOW - 7 * DAY).admits(closed)
    assert not RecallOptions(as_of=NOW - 5 * DAY).admits(closed)
    assert not RecallOptions(as_of=NOW - 11 * DAY).admits(old)
