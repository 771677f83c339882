"""Every candidate gets its exact keyword evidence: a memory found by the dense search
(or as a thread neighbour) but past the keyword list's limit is scored with the BM25 the
same keyword search computed for it, not with 0."""

from datetime import UTC, datetime

import numpy as np
import pytest

from memorybus import MemoryNode, Scope
from memorybus.retrieval.keyword import KeywordIndex
from memorybus.retrieval.ranking import rank
from memorybus.retrieval.structure import RecallIndex
from memorybus.retrieval.text import tokens
from tests.unit.test_retrieval_ranking import PLAIN

NOW = datetime(2024, 1, 1, tzinfo=UTC).timestamp()
SCOPE = Scope("acme", "u1")
W = PLAIN  # only the dense similarity and the keyword evidence count


def test_match_scores_every_matching_document_and_its_top_is_search():
    idx = KeywordIndex()
    idx.add("a", "s", ["trout", "trout", "lake"])
    idx.add("b", "s", ["lake"])
    idx.add("c", "s", ["canoe"])
    idx.add("d", "t", ["trout"])  # another scope: not searched
    m = idx.match(["trout", "lake"], ["s"], 1)
    assert m.top == idx.search(["trout", "lake"], ["s"], 1) and [i for i, _ in m.top] == ["a"]
    full = dict(idx.search(["trout", "lake"], ["s"], 10))
    got = m.bm25(["b", "a", "c", "d", "missing"])
    assert got[0] == pytest.approx(full["b"]) and got[1] == pytest.approx(full["a"])
    assert got[2:].tolist() == [0.0, 0.0, 0.0]  # no query term, other scope, unknown
    assert idx.match([], ["s"], 5).bm25(["a"]).tolist() == [0.0]


def test_a_dense_candidate_past_the_keyword_list_keeps_its_keyword_evidence():
    texts = {"a": "We rented a canoe at the lake.", "b": "The lake was calm and we rented a canoe for the day.",
             "c": "Lovely weather today."}  # fmt: skip
    nodes = {}
    structure = RecallIndex(b=0.0)
    for name, text in texts.items():
        n = MemoryNode(content=text, scope=SCOPE, id=f"00000000-0000-4000-8000-{name:0>12}", created_at=NOW,
                       valid_from=NOW, last_accessed=NOW)  # fmt: skip
        nodes[n.id] = n
        structure.add(n)
    a, b, c = (nodes[f"00000000-0000-4000-8000-{x:0>12}"] for x in "abc")
    terms = tokens("canoe on the lake")
    matches = structure.keywords.match(terms, [SCOPE.key], 1)  # the list holds one of the two matches
    weight = structure.keywords.weight(terms, [SCOPE.key])
    assert len(matches.top) == 1
    listed = matches.top[0][0]
    other = b.id if listed == a.id else a.id
    dense = [(c.id, 0.5), (other, 0.45)]  # the dense search found the other match, and c

    def ranked(scores):
        hits = rank(dense, matches.top, nodes, structure, None, W, NOW, lambda n: True, query_weight=weight,
                    keyword_scores=scores)  # fmt: skip
        return [h.node.id for h in hits], {h.node.id: h for h in hits}

    ids, hits = ranked(matches.bm25)
    exact = float(matches.bm25([other])[0])
    assert exact > 0 and hits[other].signals["bm25"] == pytest.approx(exact)
    assert ids.index(other) < ids.index(c.id)  # its keyword match lifts it over c
    ids0, hits0 = ranked(None)  # without the exact scores it had no keyword evidence
    assert hits0[other].signals["bm25"] == 0.0 and ids0.index(c.id) < ids0.index(other)
    assert np.isclose(hits[listed].signals["bm25"], matches.top[0][1])


def _bm25(docs: dict[str, list[str]], terms: list[str], k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    """BM25 written out from its definition, for the scores of KeywordIndex.match."""
    import math

    n = len(docs)
    avgdl = sum(len(d) for d in docs.values()) / n
    out: dict[str, float] = {}
    for term in dict.fromkeys(terms):
        df = sum(1 for d in docs.values() if term in d)
        if not df:
            continue
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for i, d in docs.items():
            tf = d.count(term)
            if tf:
                out[i] = out.get(i, 0.0) + idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avgdl))
    return out


@pytest.mark.parametrize("query", [["zebra"], ["common", "zebra"], ["common", "rare3", "missing"]])
def test_match_agrees_with_bm25_from_its_definition_for_rare_and_common_terms(query):
    """A rare term's few postings and a common term's many are summed two ways inside
    match (sorting the slots, or one row per slot): both give the definition's scores,
    also after removals and in a partition beside another."""
    rng = np.random.default_rng(11)
    words = ["common", "apple", "pear", "plum", "fig"] + [f"rare{i}" for i in range(40)]
    idx = KeywordIndex()
    docs: dict[str, list[str]] = {}
    for i in range(600):
        toks = [words[int(x)] for x in rng.integers(1, len(words), int(rng.integers(2, 9)))]
        if i % 4:  # in most documents: its postings outnumber a quarter of the slots
            toks.append("common")
        if i in (5, 77, 301):
            toks.append("zebra")
        idx.add(f"d{i}", "s", toks)
        docs[f"d{i}"] = toks
        idx.add(f"o{i}", "t", toks)  # another scope: never counted
    for i in range(0, 600, 7):
        idx.remove(f"d{i}")
        docs.pop(f"d{i}")
    want = _bm25(docs, query)
    m = idx.match(query, ["s"], 1000)
    assert {i for i, _ in m.top} == set(want)
    for i, score in m.top:
        assert score == pytest.approx(want[i], rel=1e-5)
    ids = [*sorted(docs)[:50], "o3", "d0"]
    assert m.bm25(ids).tolist() == pytest.approx([want.get(i, 0.0) for i in ids], rel=1e-5)
