"""The extractor: facts (subject, predicate, object) read from a memory's text and
its declared structure (:mod:`memorybus.graph.extract`); the graph that holds them is
tested in test_graph.py."""

import json
from pathlib import Path

import pytest

from memorybus.graph import default_extractor, entities, extract_triples, triples_for
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Scope

T0 = 1_700_000_000.0
ORG = Scope("acme").key


def node(content, scope=ORG, **kw):
    return MemoryNode(content=content, scope=Scope.from_key(scope), valid_from=kw.pop("valid_from", T0), **kw)


# Sentences and the (subject, predicate, object) triples the extractor reads from them.
CASES = json.loads((Path(__file__).parents[1] / "data" / "graph_extract_cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[c["text"][:40] for c in CASES])
def test_extract_triples_patterns(case):
    assert extract_triples(case["text"]) == [tuple(t) for t in case["triples"]]


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
