"""The extractor: facts (subject, predicate, object) read from a memory's text and
its declared structure (:mod:`memorybus.graph.extract`); the graph that holds them is
tested in test_graph.py."""

import pytest

from memorybus.graph import default_extractor, entities, extract_triples, triples_for
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Scope

T0 = 1_700_000_000.0
ORG = Scope("acme").key


def node(content, scope=ORG, **kw):
    return MemoryNode(content=content, scope=Scope.from_key(scope), valid_from=kw.pop("valid_from", T0), **kw)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Alice works at Acme.", [("Alice", "works_at", "Acme")]),
        ("Alice now works at Globex Corp.", [("Alice", "works_at", "Globex Corp")]),
        ("Bob works for the University of Oslo.", [("Bob", "works_at", "University of Oslo")]),
        ("Trent has joined Hooli!", [("Trent", "works_at", "Hooli")]),
        ("Frank is a software engineer at Google.", [("Frank", "works_at", "Google")]),
        ("Bob lives in Paris.", [("Bob", "lives_in", "Paris")]),
        ("Yesterday, Alice moved to New York City.", [("Alice", "lives_in", "New York City")]),
        ("Acme is headquartered in Boston.", [("Acme", "headquartered_in", "Boston")]),
        ("Acme Inc. is based in Boston.", [("Acme Inc", "headquartered_in", "Boston")]),
        ("The lab is located in Zurich. Initech is located in Austin.", [("Initech", "located_in", "Austin")]),
        ("Erin is the CEO of Initech.", [("Erin", "ceo_of", "Initech")]),
        ("Mallory is Canadian.", [("Mallory", "is", "Canadian")]),
        ("Grace is a doctor in Boston.", [("Grace", "is", "doctor")]),
        (
            "Peggy lives in Lisbon and Carol works at Acme.",
            [("Peggy", "lives_in", "Lisbon"), ("Carol", "works_at", "Acme")],
        ),
        ("Ivan is not a doctor. Judy no longer works at Acme.", []),
        ("Heidi is Bob's sister. She moved to Rome. Alice's sister lives in Oslo.", []),
        ("I work at Stripe.", []),
    ],
)
def test_extract_triples_patterns(text, expected):
    assert extract_triples(text) == expected


def test_extract_triples_first_person_needs_a_speaker():
    assert extract_triples("I work at Stripe and I moved to Dublin.", self_name="Sam") == [
        ("Sam", "works_at", "Stripe"),
        ("Sam", "lives_in", "Dublin"),
    ]


def test_entities_finds_names_for_query_matching():
    q = "Which city is Alice's employer headquartered in? Dr. Jones said on Monday: the Bank of America."
    assert entities(q) == ["Alice", "Dr. Jones", "Bank of America", "Bank", "America"]
    assert entities("what? where? It is May.") == []


def test_default_extractor_reads_structured_triples():
    n = node(
        "Notes from the call.",
        structured={
            "triples": [
                ["Alice", "reports to", "Bob"],
                {"subject": "Bob", "predicate": "works_at", "object": "Acme", "confidence": 0.7, "valid_from": T0 - 5},
                "not a triple",
                [1, 2, 3],
            ],
            "subject": "Acme",
            "predicate": "headquartered in",
            "object": "Boston",
        },
        confidence=0.9,
    )
    triples = triples_for(n)
    assert [(t.subject, t.predicate, t.object) for t in triples] == [
        ("Alice", "reports_to", "Bob"),
        ("Bob", "works_at", "Acme"),
        ("Acme", "headquartered_in", "Boston"),
    ]
    assert all(t.source_id == n.id and t.scope_key == ORG for t in triples)
    assert [t.confidence for t in triples] == [0.9, 0.7, 0.9]
    assert [t.valid_from for t in triples] == [T0, T0 - 5, T0]
    spoken = node("I moved to Dublin.", speaker="Sam")
    assert [(t.subject, t.predicate, t.object) for t in triples_for(spoken)] == [("Sam", "lives_in", "Dublin")]
    # only the declared speaker counts: an undeclared structured key is not read
    assert triples_for(node("I moved to Dublin.", structured={"speaker": "Sam"})) == []
    assert default_extractor(node("Alice works at Acme.")) == [("Alice", "works_at", "Acme")]
