"""The evidence recall weighs for each candidate, one named array per signal.

:class:`Signals` is the record the ranking stages of
:mod:`memorybus.retrieval.ranking` fill in, in order: raw evidence (cosine,
BM25), relevance on the 0..1 scale (dense, keyword, content, context,
relevance), structure (thread, speaker, time, graph, answer, named), and finally the score;
``unnamed`` records the evidence of a memory that matches only on a name the query names.
Every array is aligned with ``ids``. Pure numpy, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from memorybus.config import RankingWeights

#: the signals a hit reports (``RecallHit.signals``), in order
REPORTED = ("cosine", "bm25", "dense", "keyword", "content", "context", "thread", "session", "speaker", "time", "graph",
            "answer", "named", "unnamed")  # fmt: skip


def either(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Evidence from two sources on the 0..1 scale: ``1 - (1 - a) * (1 - b)``."""
    return 1.0 - (1.0 - a) * (1.0 - b)


def dense_relevance(cosine: np.ndarray, w: RankingWeights) -> np.ndarray:
    """Cosine on the 0..1 relevance scale: 0 at ``dense_zero`` and below, 1 at ``dense_full``."""
    return np.clip((cosine - w.dense_zero) / (w.dense_full - w.dense_zero), 0.0, 1.0)


def keyword_relevance(bm25: np.ndarray, query_weight: float) -> np.ndarray:
    """The share of the query's keyword weight a memory matches: BM25 over the sum of the
    query terms' idf (what a memory of average length holding every term once scores).
    A memory can score more (a term repeated, a short memory): then every share is taken
    of the best one instead, so the best is 1 and the order among strong matches stays."""
    if query_weight <= 0 or not len(bm25):
        return np.zeros_like(bm25)
    return np.clip(bm25 / max(query_weight, float(bm25.max())), 0.0, 1.0)


def fuse(dense: np.ndarray, keyword: np.ndarray, w: RankingWeights) -> np.ndarray:
    """A memory's own text against the query: dense and keyword evidence together,
    ``1 - (1 - dense) * (1 - w_keyword * keyword)``."""
    return either(dense, w.keyword * keyword)


def _zeros() -> np.ndarray:
    return np.zeros(0)


@dataclass(slots=True)
class Signals:
    """Per-candidate evidence; every array is aligned with ``ids``."""

    ids: list[str]
    #: exact cosine of the memory's vector with the query's
    cosine: np.ndarray = field(default_factory=_zeros)
    #: BM25 of the memory for the query's terms (0: no term matched)
    bm25: np.ndarray = field(default_factory=_zeros)
    #: the cosine on the relevance scale
    dense: np.ndarray = field(default_factory=_zeros)
    #: the share of the query's keyword weight matched
    keyword: np.ndarray = field(default_factory=_zeros)
    #: dense and keyword evidence together: how well the memory's own text matches
    content: np.ndarray = field(default_factory=_zeros)
    #: the best content match among its thread neighbours (0 outside a thread)
    context: np.ndarray = field(default_factory=_zeros)
    #: content read in its thread's context: the gate
    relevance: np.ndarray = field(default_factory=_zeros)
    #: how well its thread answers the query (its best member, its centroid)
    thread: np.ndarray = field(default_factory=_zeros)
    #: how well its session from time answers the query (no declared thread: its best
    #: member, its centroid; 0 for a memory in no session)
    session: np.ndarray = field(default_factory=_zeros)
    #: 1 when the query names its speaker or source
    speaker: np.ndarray = field(default_factory=_zeros)
    #: closeness of its event time to a time the query names
    time: np.ndarray = field(default_factory=_zeros)
    #: link strength from the query's entities in the shard's knowledge graph
    graph: np.ndarray = field(default_factory=_zeros)
    #: 1 when the memory states the form of answer the query asks for (a time, a number)
    answer: np.ndarray = field(default_factory=_zeros)
    #: 1 when the query asks *which X* and the memory names a specific thing (a quoted
    #: title, a capitalised word few memories hold)
    named: np.ndarray = field(default_factory=_zeros)
    #: for a memory that matches the query only on a name it names: its cosine with the query
    #: embedded without its names (0 for the others)
    unnamed: np.ndarray = field(default_factory=_zeros)
    #: how much the memory says: its distinct keyword terms ``n`` as ``n / (n + pivot)`` (a
    #: prior of the rerank, like recency: not reported)
    length: np.ndarray = field(default_factory=_zeros)
    #: the final score, 0..1
    score: np.ndarray = field(default_factory=_zeros)

    @classmethod
    def of(cls, ids: list[str], cosine: np.ndarray, bm25: np.ndarray) -> Signals:
        n = len(ids)
        z = np.zeros(n)
        return cls(ids, cosine, bm25, *(z.copy() for _ in range(15)))

    def __len__(self) -> int:
        return len(self.ids)

    def report(self, i: int) -> dict[str, float]:
        """The signals of candidate ``i`` for its hit: the raw and relevance evidence
        always, structure signals when they count."""
        out = {name: float(getattr(self, name)[i]) for name in REPORTED[:6]}
        for name in REPORTED[6:]:
            v = float(getattr(self, name)[i])
            if v:
                out[name] = v
        return out
