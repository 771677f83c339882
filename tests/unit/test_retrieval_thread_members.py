"""The members of the best thread join the candidates (``thread_members``), no model, no Ray.

A member of the thread that answers the query best gets that thread's lift, but only a
candidate is ranked: a member whose own text matched too weakly to be found by the dense
or keyword search, and that is not next to a candidate, was never lifted. With
``thread_members`` the members nearest the best thread's best candidate are ranked too;
relevance still gates them.
"""

from dataclasses import replace

import numpy as np

from memorybus import RankingWeights
from memorybus.memory.model import MemoryNode
from memorybus.retrieval.ranking import rank
from tests.unit.test_retrieval_ranking import NOW, PLAIN, node, setup

VECS = np.eye(4, dtype=np.float32)
QUERY = VECS[0]


def _vec(cosine: float, other: int) -> np.ndarray:
    return (cosine * VECS[0] + np.sqrt(1 - cosine**2) * VECS[other]).astype(np.float32)


def _memories() -> tuple[list[MemoryNode], MemoryNode, MemoryNode, MemoryNode, MemoryNode]:
    # thread s: its best member (0), an unrelated reply (1), a member that says something
    # relevant two turns on (2), an unrelated member (3); thread t: a fair match elsewhere
    s = [replace(node(f"s{i}", thread="s", position=i), embedding=v)
         for i, v in enumerate([VECS[0], VECS[3], _vec(0.5, 1), VECS[2]])]  # fmt: skip
    other = replace(node("t0", thread="t", position=0), embedding=_vec(0.55, 1))
    return [*s, other], s[0], s[2], s[3], other


def _rank(w: RankingWeights, **kw):
    nodes_, best, member, unrelated, other = _memories()
    nodes, st = setup(nodes_)
    dense = [(best.id, 1.0), (other.id, 0.55)]  # the dense search found these two only
    hits = rank(dense, [], nodes, st, None, w, NOW, lambda n: True, QUERY, **kw)
    return [h.node.id for h in hits], {h.node.id: h for h in hits}, (best, member, unrelated, other)


W = replace(PLAIN, thread=0.5, neighbor_candidates=10, thread_members=4)


def test_a_member_of_the_best_thread_is_ranked_with_its_thread_lift():
    ids, hits, (_, member, _, other) = _rank(W)
    assert ids.index(member.id) < ids.index(other.id)  # its own 0.5 and the thread's 1.0 beat 0.55 + 0.275
    assert hits[member.id].signals["thread"] == 1.0
    ids, _, _ = _rank(replace(W, thread_members=0))
    assert member.id not in ids  # not a candidate: two turns from the best one


def test_the_gate_holds_for_thread_members():
    """A member the query does not match (cosine 0) comes in as a candidate but is not
    returned over the floor, and without a floor it ranks below every relevant memory."""
    w = replace(W, min_relevance=0.15)
    ids, _, (_, member, unrelated, _) = _rank(w)
    assert member.id in ids and unrelated.id not in ids
    ids, hits, _ = _rank(w, min_relevance=0.0)
    assert unrelated.id in ids
    relevant = [i for i in ids if hits[i].relevance >= 0.15]
    assert all(ids.index(unrelated.id) > ids.index(i) for i in relevant)
    assert hits[unrelated.id].score < 0.15


def test_without_thread_fields_nothing_joins():
    plain = [replace(n, thread=None, position=None) for n in _memories()[0]]
    nodes, st = setup(plain)
    hits = rank([(plain[0].id, 1.0), (plain[4].id, 0.55)], [], nodes, st, None, W, NOW, lambda n: True, QUERY)
    assert [h.node.id for h in hits] == [plain[0].id, plain[4].id]
