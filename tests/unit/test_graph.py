import time

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorybus.errors import InvalidRequest
from memorybus.graph import (
    DEFAULT_FUNCTIONAL,
    Reach,
    TemporalGraph,
    Triple,
    canonical_predicate,
    display_name,
    entities,
    entity_key,
)
from memorybus.memory.model import MemoryNode, new_id
from memorybus.scopes import Scope

T0 = 1_700_000_000.0
DAY = 86_400.0
ORG = Scope("acme").key
U1 = Scope("acme", "u1").key
U2 = Scope("acme", "u2").key


def fact(s, p, o, t, mid, scope=ORG, **kw):
    return Triple(s, p, o, t, source_id=mid, scope_key=scope, **kw)


@pytest.fixture
def alice():
    """Alice works at Acme (m1, day 0); Acme is headquartered in Boston (m2, day 1)."""
    g = TemporalGraph()
    g.add(fact("Alice", "works at", "Acme", T0, "m1"))
    g.add(fact("Acme", "is headquartered in", "Boston", T0 + DAY, "m2"))
    return g


# ------------------------------------------------------------------ data types
def test_entity_keys_are_normalised_and_keep_a_display_name():
    assert entity_key("  The  ACME\tCorp's ") == "acme corp"
    assert entity_key("alice") == entity_key("ALICE") == entity_key(" Alice. ")
    assert display_name("  New   York\nCity, ") == "New York City"
    g = TemporalGraph()
    g.add(fact("Alice  Smith", "works_at", "ACME corp", T0, "m1"))
    g.add(fact("alice smith", "lives_in", "Boston", T0, "m2"))
    assert len(g) == 3
    assert g.name("ALICE SMITH") == "Alice Smith"
    assert "acme CORP" in g
    assert g.edges("alice smith")[0].subject == "alice smith"


def test_triple_canonical_predicate_and_validation():
    assert canonical_predicate("Works For") == "works_at"
    assert canonical_predicate("is headquartered in") == "headquartered_in"
    assert canonical_predicate("is the CEO of") == "ceo_of"
    assert canonical_predicate("Is A") == "is"
    assert fact("A", "Moved To", "B", T0, "m").predicate == "lives_in"
    with pytest.raises(InvalidRequest):
        fact("  ", "is", "B", T0, "m")
    with pytest.raises(InvalidRequest):
        fact("A", "is", "B", T0, "")
    with pytest.raises(InvalidRequest):
        fact("A", "is", "B", T0, "m", valid_to=T0 - 1)
    with pytest.raises(InvalidRequest):
        fact("A", "is", "B", T0, "m", confidence=1.5)
    with pytest.raises(InvalidRequest):
        fact("A", "???", "B", T0, "m")


# ---------------------------------------------------------- expansion and time
def test_two_hop_expansion_reaches_boston_with_provenance_of_both_memories(alice):
    at = T0 + 2 * DAY
    reach = alice.expand(["Alice"], at=at, hops=2)
    assert reach["alice"] == Reach(0, ())
    assert reach["acme"] == Reach(1, ("m1",))
    assert reach["boston"] == Reach(2, ("m1", "m2"))
    assert "boston" not in alice.expand(["alice"], at=at, hops=1)
    # before the headquarters fact was valid, Boston is not reachable
    assert "boston" not in alice.expand(["Alice"], at=T0 + 1, hops=2)
    # edges are walked in both directions
    assert alice.expand(["Boston"], at=at, hops=2)["alice"] == Reach(2, ("m1", "m2"))
    # unknown seeds are left out
    assert alice.expand(["Zed"], at=at) == {}


def test_superseding_fact_closes_the_old_edge_and_expansion_follows_time(alice):
    t3 = T0 + 10 * DAY
    new = alice.add(fact("Alice", "works at", "Globex", t3, "m3"))
    old = next(e for e in alice.edges("Alice") if e.object == "acme")
    assert old.valid_to == t3  # closed, not deleted
    assert new.valid_to is None
    assert {e.object for e in alice.edges("Alice")} == {"acme", "globex"}
    assert [e.object for e in alice.edges_at("Alice", t3 + DAY)] == ["globex"]
    now, before = t3 + DAY, t3 - DAY
    assert "boston" not in alice.expand(["Alice"], at=now, hops=2)
    assert alice.expand(["Alice"], at=now, hops=2)["globex"] == Reach(1, ("m3",))
    assert alice.expand(["Alice"], at=before, hops=2)["boston"] == Reach(2, ("m1", "m2"))
    # validity is half open: at the switch instant the new edge holds
    assert [e.object for e in alice.edges_at("alice", t3)] == ["globex"]


def test_closure_is_order_independent_and_undone_on_rebuild():
    triples = [
        fact("Alice", "works_at", "Acme", T0, "m1"),
        fact("Alice", "works_at", "Globex", T0 + 5, "m2"),
        fact("Alice", "works_at", "Initech", T0 + 9, "m3"),
    ]

    def intervals(g):
        return sorted((e.object, e.valid_from, e.valid_to) for e in g.edges())

    forward, backward = TemporalGraph(), TemporalGraph()
    for t in triples:
        forward.add(t)
    for t in reversed(triples):
        backward.add(t)
    expected = [("acme", T0, T0 + 5), ("globex", T0 + 5, T0 + 9), ("initech", T0 + 9, None)]
    assert intervals(forward) == intervals(backward) == expected
    rebuilt = TemporalGraph()
    rebuilt.rebuild(reversed(triples))
    assert intervals(rebuilt) == expected


def test_closure_rules_functional_set_same_start_scope_and_nonfunctional():
    assert {"works_at", "lives_in", "is", "headquartered_in", "ceo_of"} <= DEFAULT_FUNCTIONAL
    g = TemporalGraph()
    # non-functional predicates accumulate
    g.add(fact("Alice", "likes", "Tea", T0, "m1"))
    g.add(fact("Alice", "likes", "Chess", T0 + 1, "m2"))
    assert all(e.valid_to is None for e in g.edges())
    # objects asserted at the same instant coexist
    g.add(fact("Bob", "lives_in", "Paris", T0, "m3"))
    g.add(fact("Bob", "lives_in", "Lyon", T0, "m4"))
    assert len(g.edges_at("Bob", T0 + 1)) == 2
    # an earlier edge still open behind a same-object edge is closed by the next object
    g.add(fact("Dan", "works_at", "Acme", T0, "m7"))
    g.add(fact("Dan", "works_at", "Acme", T0 + 5, "m8", valid_to=T0 + 8))
    g.add(fact("Dan", "works_at", "Initech", T0 + 6, "m9"))
    assert sorted((e.valid_from, e.valid_to) for e in g.edges("Dan")) == [
        (T0, T0 + 6),
        (T0 + 5, T0 + 6),
        (T0 + 6, None),
    ]
    # supersession stays within the scope: a user's belief does not close the org's
    g.add(fact("Carol", "works_at", "Acme", T0, "m5", scope=ORG))
    g.add(fact("Carol", "works_at", "Globex", T0 + 1, "m6", scope=U1))
    assert all(e.valid_to is None for e in g.edges("Carol"))
    # the functional set is configurable
    plain = TemporalGraph(functional=["likes"])
    plain.add(fact("Alice", "works_at", "Acme", T0, "m1"))
    plain.add(fact("Alice", "works_at", "Globex", T0 + 1, "m2"))
    plain.add(fact("Alice", "likes", "Tea", T0, "m3"))
    plain.add(fact("Alice", "likes", "Chess", T0 + 1, "m4"))
    assert sorted((e.object, e.valid_to) for e in plain.edges()) == [
        ("acme", None),
        ("chess", None),
        ("globex", None),
        ("tea", T0 + 1),
    ]


def test_reasserting_a_fact_merges_provenance_and_is_idempotent():
    g = TemporalGraph()
    g.add(fact("Alice", "works_at", "Acme", T0, "m1", confidence=0.6))
    g.add(fact("alice", "works at", "ACME", T0 + 3, "m2", confidence=0.9))
    g.add(fact("Alice", "works_at", "Acme", T0, "m1", confidence=0.6))
    assert g.edge_count == 1
    (edge,) = g.edges()
    assert edge.source_ids == ("m1", "m2")
    assert edge.confidence == 0.9
    # after the employer changed, a report of Acme again starts a new edge
    g.add(fact("Alice", "works_at", "Globex", T0 + 5, "m3"))
    g.add(fact("Alice", "works_at", "Acme", T0 + 9, "m4"))
    assert sorted((e.object, e.valid_from, e.valid_to) for e in g.edges()) == [
        ("acme", T0, T0 + 5),
        ("acme", T0 + 9, None),
        ("globex", T0 + 5, T0 + 9),
    ]


def test_expired_and_future_edges_are_not_traversed():
    g = TemporalGraph()
    g.add(fact("Alice", "member_of", "Chess Club", T0, "m1", valid_to=T0 + DAY))
    g.add(fact("Chess Club", "meets_in", "Library", T0, "m2"))
    g.add(fact("Alice", "member_of", "Book Club", T0 + 5 * DAY, "m3"))
    assert set(g.expand(["Alice"], at=T0 + 1, hops=2)) == {"alice", "chess club", "library"}
    assert set(g.expand(["Alice"], at=T0 + 2 * DAY, hops=2)) == {"alice"}
    assert set(g.expand(["Alice"], at=T0 + 6 * DAY, hops=2)) == {"alice", "book club"}


def test_expansion_never_builds_a_filtered_graph_view(alice, monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("expansion must not build a whole-graph view")

    for name in ("subgraph_view", "restricted_view", "edge_subgraph", "induced_subgraph"):
        monkeypatch.setattr(nx, name, boom)
    for name in ("subgraph", "edge_subgraph", "copy", "to_undirected", "reverse"):
        monkeypatch.setattr(nx.MultiDiGraph, name, boom)
    monkeypatch.setattr(nx.MultiDiGraph, "edges", property(boom))
    alice.add(fact("Alice", "works at", "Globex", T0 + 10 * DAY, "m3"))
    assert alice.expand(["Alice"], at=T0 + 2 * DAY, hops=2)["boston"].hops == 2
    assert alice.memories_for(["Alice"], T0 + 2 * DAY)["m2"] == 0.5


def test_hub_fanout_keeps_three_hop_expansion_bounded():
    g = TemporalGraph()
    g.add(fact("Start", "knows", "Hub", T0, "s"))
    for i in range(10_000):
        g.add(fact("Hub", "related_to", f"Spoke {i}", T0, f"h{i}"))
        g.add(fact(f"Spoke {i}", "related_to", f"Leaf {i}", T0, f"l{i}"))
    f = 8
    started = time.perf_counter()
    reach = g.expand(["Start"], at=T0 + 1, hops=3, fanout=f)
    elapsed = time.perf_counter() - started
    assert len(reach) <= 1 + f + f**2 + f**3
    assert sum(1 for r in reach.values() if r.hops == 2) == f  # the hub gave only f of its 10,000 spokes
    assert elapsed < 1.0  # bounded by the counts above; the time only guards against a pathological walk
    mems = g.memories_for(["Start"], T0 + 1, hops=3, fanout=f)
    assert len(mems) <= 1 + f + f**2
    # without the cap the same walk reaches every spoke and leaf
    assert len(g.expand(["Start"], at=T0 + 1, hops=3, fanout=100_000)) == 20_002
    assert len(g.expand(["Start"], at=T0 + 1, hops=3, fanout=100_000, max_nodes=100)) == 100


def test_fanout_prefers_confident_then_recent_edges():
    g = TemporalGraph()
    g.add(fact("Hub", "knows", "Old", T0, "m1", confidence=0.9))
    g.add(fact("Hub", "knows", "New", T0 + 5, "m2", confidence=0.9))
    g.add(fact("Hub", "knows", "Sure", T0, "m3", confidence=1.0))
    g.add(fact("Hub", "knows", "Doubt", T0 + 9, "m4", confidence=0.1))
    assert set(g.expand(["Hub"], at=T0 + 10, hops=1, fanout=2)) == {"hub", "sure", "new"}


def test_scope_filtering_during_expansion(alice):
    alice.add(fact("Alice", "mentors", "Dan", T0, "m7", scope=U1))
    alice.add(fact("Dan", "lives_in", "Oslo", T0, "m8", scope=U2))
    at = T0 + 2 * DAY
    assert set(alice.expand(["Alice"], at=at, scope_keys={ORG, U1}, hops=2)) == {"alice", "acme", "boston", "dan"}
    assert set(alice.expand(["Alice"], at=at, scope_keys=[U1], hops=2)) == {"alice", "dan"}
    assert set(alice.expand(["Alice"], at=at, scope_keys=[], hops=2)) == {"alice"}
    assert "oslo" in alice.expand(["Alice"], at=at, hops=2)  # None: every scope
    assert [e.object for e in alice.edges_at("Dan", at, scope_keys=[U1])] == ["dan"]


def test_memories_for_scores_decay_per_hop_and_follow_time(alice):
    now = T0 + 2 * DAY
    assert alice.memories_for(["Alice"], now) == {"m1": 1.0, "m2": 0.5}
    assert alice.memories_for(["Alice"], now, hops=1) == {"m1": 1.0}
    assert alice.memories_for(["Alice"], now, scope_keys=[U1]) == {}
    # a memory only naming a reached entity is boosted less
    alice.add_mentions("m5", ["Boston"], scope_key=ORG, valid_from=T0)
    assert alice.memories_for(["Alice"], now)["m5"] == pytest.approx(0.5 * 0.25)
    alice.add(fact("Alice", "works at", "Globex", T0 + 10 * DAY, "m3"))
    later = T0 + 11 * DAY
    assert alice.memories_for(["Alice"], later) == {"m3": 1.0}
    assert alice.memories_for(["Acme"], later) == {"m2": 1.0, "m5": 0.25}


def test_remove_source_drops_edges_only_it_supports_and_undoes_its_closures(alice):
    alice.add(fact("Alice", "works_at", "Acme", T0 + 1, "m4"))  # a second source for m1's edge
    alice.add(fact("Alice", "works at", "Globex", T0 + 10 * DAY, "m3"))
    alice.add_mentions("m3", ["Globex", "Alice"], scope_key=ORG, valid_from=T0 + 10 * DAY)
    now = T0 + 11 * DAY
    assert "boston" not in alice.expand(["Alice"], at=now)
    assert alice.remove_source("m3") == 1
    assert "globex" not in alice
    (edge,) = alice.edges("Alice")
    assert edge.valid_to is None  # Globex was forgotten: Acme is current again
    assert alice.expand(["Alice"], at=now)["boston"].hops == 2
    assert alice.remove_source("m1") == 0
    assert alice.edges("Alice")[0].source_ids == ("m4",)
    assert alice.remove_source("m4") == 1
    assert "alice" not in alice
    assert alice.expand(["Acme"], at=now) == {"acme": Reach(0, ()), "boston": Reach(1, ("m2",))}
    assert alice.remove_source("nope") == 0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("ABC"), st.integers(0, 6), st.sampled_from([None, 3, 8])),
        min_size=1,
        max_size=12,
    ),
    st.sets(st.integers(0, 11)),
)
def test_functional_closure_invariant_under_any_order_and_removals(adds, removed):
    g = TemporalGraph()
    for i, (obj, start, until) in enumerate(adds):
        end = None if until is None or until < start else float(until)
        g.add(fact("S", "works_at", obj, float(start), f"m{i}", valid_to=end))
    for i in removed:
        g.remove_source(f"m{i}")
    edges = g.edges()
    for e in edges:
        later = [f.valid_from for f in edges if f.object != e.object and f.valid_from > e.valid_from]
        bounds = [b for b in (e.until, min(later, default=None)) if b is not None]
        assert e.valid_to == (min(bounds) if bounds else None)
    assert {s for e in edges for s in e.sources} == {f"m{i}" for i in range(len(adds)) if i not in removed}


def test_match_entities_finds_known_entities_in_any_case(alice):
    alice.add(fact("Alice", "lives_in", "New York City", T0, "m9"))
    assert alice.match_entities("where does alice's boss in new york city work, near boston?") == [
        "alice",
        "new york city",
        "boston",
    ]


def node(content, scope=ORG, **kw):
    return MemoryNode(content=content, scope=Scope.from_key(scope), valid_from=kw.pop("valid_from", T0), **kw)


def test_extractor_hook_is_pluggable_and_bound_to_the_memory():
    n = node("anything", scope=U1)

    def llm_like(memory):
        return [
            Triple("X", "likes", "Y", T0, source_id="forged", scope_key=ORG),
            ("Y", "near", "Z"),
            {"subject": "", "predicate": "p", "object": "Q"},
        ]

    g = TemporalGraph()
    edges = g.add_memory(n, llm_like)
    assert [(e.subject, e.predicate, e.object) for e in edges] == [("x", "likes", "y"), ("y", "near", "z")]
    assert all(e.source_ids == (n.id,) and e.scope_key == U1 for e in edges)


def test_add_memory_replaces_what_the_memory_contributed():
    g = TemporalGraph()
    n = node("Alice works at Acme. Acme is headquartered in Boston.")
    g.add_memory(n)
    assert g.edge_count == 2
    g.add_memory(n)
    assert g.edge_count == 2
    g.add_memory(n.copy(content="Alice lives in Oslo."))
    assert [(e.subject, e.predicate, e.object) for e in g.edges()] == [("alice", "lives_in", "oslo")]
    assert "acme" not in g
    g.remove_source(n.id)
    assert len(g) == 0


def test_issue_scenario_recalls_both_memories_through_two_hops_until_superseded():
    m1 = node("Alice works at Acme.", valid_from=T0)
    m2 = node("Acme is headquartered in Boston.", valid_from=T0 + DAY)
    g = TemporalGraph()
    g.rebuild_from([m2, m1])
    seeds = entities("Which city is Alice's employer headquartered in?")
    assert seeds == ["Alice"]
    scores = g.memories_for(seeds, T0 + 2 * DAY, [ORG])
    assert scores[m1.id] == 1.0
    assert scores[m2.id] == 0.5
    assert "boston" in g.expand(seeds, at=T0 + 2 * DAY, scope_keys=[ORG])
    m3 = node("Alice now works at Globex.", valid_from=T0 + 10 * DAY, id=new_id())
    g.add_memory(m3)
    now = T0 + 11 * DAY
    (old,) = [e for e in g.edges("Alice") if e.object == "acme"]
    assert old.valid_to == m3.valid_from
    assert "boston" not in g.expand(seeds, at=now, scope_keys=[ORG])
    assert m2.id not in g.memories_for(seeds, now, [ORG])
    assert g.memories_for(seeds, now, [ORG])[m3.id] == 1.0
    assert "boston" in g.expand(seeds, at=T0 + 5 * DAY, scope_keys=[ORG])


def test_bad_expansion_arguments_raise(alice):
    for kwargs in ({"hops": -1}, {"fanout": 0}, {"at": float("nan")}):
        args = {"at": T0, **kwargs}
        with pytest.raises(InvalidRequest):
            alice.expand(["Alice"], **args)
    with pytest.raises(InvalidRequest):
        alice.expand("Alice", at=T0)
