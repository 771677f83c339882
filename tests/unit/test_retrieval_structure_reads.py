"""The per-candidate-list reads of the recall structure (``RecallIndex.named`` and
``RecallIndex.threaded``) agree with the per-memory reads they replace in the ranking
(``names``, ``adjacent``), also after a removal. No model, no Ray."""

import numpy as np

from memorybus.retrieval.structure import RecallIndex
from memorybus.retrieval.text import tokens
from tests.unit.test_retrieval_ranking import node


def _index():
    turns = [node(f"t{i}", thread="chat", position=i, speaker=who) for i, who in enumerate(["Ana Ruiz", "Bo", "Ana Ruiz"])]
    loose = node("loose", source="agent:planner")
    plain = node("plain")
    structure = RecallIndex()
    for n in [*turns, loose, plain]:
        structure.add(n)
    return structure, turns, loose, plain


def test_threaded_lists_each_threaded_candidate_with_its_neighbours_in_order():
    structure, (t0, t1, t2), loose, plain = _index()
    ids = [plain.id, t1.id, "unknown", t0.id, loose.id, t2.id]
    got = structure.threaded(ids)
    assert got == [(1, (t0.id, t2.id)), (3, (t1.id,)), (5, (t1.id,))]
    assert got == [(x, structure.adjacent(i)) for x, i in enumerate(ids) if structure.adjacent(i)]
    structure.remove(t1.id)  # the thread closes over the gap
    assert structure.threaded([t0.id, t2.id, t1.id]) == [(0, (t2.id,)), (1, (t0.id,))]


def test_named_marks_the_candidates_whose_speaker_or_source_the_query_names():
    structure, (t0, t1, t2), loose, plain = _index()
    ids = [t0.id, t1.id, t2.id, loose.id, plain.id, "unknown"]
    for words in ("Ruiz", "what did the planner say", "Bo", "", "nobody"):
        terms = frozenset(tokens(words))  # the query's terms, as Query.term_set holds them
        expected = [1.0 if set(structure.names(i)) & terms else 0.0 for i in ids]
        assert structure.named(ids, terms).tolist() == expected
    assert structure.named(ids, frozenset(tokens("Ruiz"))).tolist() == [1.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    assert structure.named(ids, frozenset(tokens("planner"))).tolist() == [0.0, 0.0, 0.0, 1.0, 0.0, 0.0]
    assert structure.named([], frozenset(tokens("Ruiz"))).dtype == np.float64
