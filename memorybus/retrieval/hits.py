"""Recall results and the ranking that turns relevance into a final score."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from memorybus.config import RankingWeights
from memorybus.model import SECONDS_PER_DAY, MemoryNode, MemoryStatus, salience, salience_array

DEFAULT_STATUSES = (MemoryStatus.ACTIVE, MemoryStatus.CONSOLIDATED)


@dataclass(slots=True)
class RecallHit:
    """One recalled memory: the node (without its embedding), its final score and
    its query relevance (before the rerank by salience, recency, importance and
    confidence; the cosine similarity when recall is dense only).

    ``via`` says why it is here: ``"match"`` (it answers the query),
    ``"neighbor"`` (a session neighbour of ``expanded_from``) or ``"relation"``
    (linked to ``expanded_from`` by a relation). ``signals`` holds the parts of
    the score (``dense``, ``keyword``, ``source``, ``time``, ``neighbor``,
    ``session``).
    """

    node: MemoryNode
    score: float
    relevance: float
    via: str = "match"
    expanded_from: str | None = None
    signals: dict[str, float] = field(default_factory=dict)

    @property
    def content(self) -> str:
        return self.node.content

    @property
    def id(self) -> str:
        return self.node.id


def rank_score(node: MemoryNode, relevance: float, now: float, w: RankingWeights) -> float:
    """The rerank: relevance weighted by salience, plus small recency, importance and
    confidence terms (weights in :class:`~memorybus.config.RankingWeights`)."""
    sal = min(1.0, salience(node, now))
    age_days = max(0.0, now - node.created_at) / SECONDS_PER_DAY
    recency = math.exp(-math.log(2) * age_days / max(1e-9, w.recency_half_life_days))
    importance = (node.importance - 1.0) / 9.0
    return (
        relevance * (1.0 - w.salience + w.salience * sal)
        + w.recency * recency
        + w.importance * importance
        + w.confidence * node.confidence
    )


def rank_scores(nodes: Sequence[MemoryNode], relevance: Sequence[float], now: float, w: RankingWeights) -> list[float]:
    """:func:`rank_score` over many nodes at once (numpy; same values)."""
    if not nodes:
        return []
    conf = np.fromiter((n.confidence for n in nodes), dtype=np.float64, count=len(nodes))
    access = np.fromiter((n.access_count for n in nodes), dtype=np.float64, count=len(nodes))
    last = np.fromiter((n.last_accessed for n in nodes), dtype=np.float64, count=len(nodes))
    decay = np.fromiter((n.decay_rate for n in nodes), dtype=np.float64, count=len(nodes))
    imp = np.fromiter((n.importance for n in nodes), dtype=np.float64, count=len(nodes))
    created = np.fromiter((n.created_at for n in nodes), dtype=np.float64, count=len(nodes))
    sal = np.minimum(1.0, salience_array(conf, access, last, decay, imp, now))
    age_days = np.maximum(0.0, now - created) / SECONDS_PER_DAY
    recency = np.exp(-math.log(2) * age_days / max(1e-9, w.recency_half_life_days))
    rel = np.asarray(relevance, dtype=np.float64)
    score = (
        rel * (1.0 - w.salience + w.salience * sal)
        + w.recency * recency
        + w.importance * (imp - 1.0) / 9.0
        + w.confidence * conf
    )
    return [float(x) for x in score]


def _comparable(groups: Sequence[Sequence[RecallHit]], w: Any) -> list[list[RecallHit]]:
    """Put per-shard scores on one scale before merging.

    Each shard normalises its fusion to its own best dense and keyword scores, so
    a shard holding only weak matches would report its best as highly as a shard
    holding an exact one. Rescale every shard's dense and keyword parts to the best
    across all shards (scores of a single shard keep their order)."""
    live = [g for g in groups if any(h.via == "match" for h in g)]
    if len(live) < 2 or not getattr(w, "hybrid", False):
        return [list(g) for g in groups]

    def top(g: Sequence[RecallHit], name: str) -> float:
        return max((h.signals.get(name, 0.0) for h in g if h.via == "match"), default=0.0)

    hi = max(top(g, "dense") for g in live)
    top_bm = max(top(g, "keyword") for g in live)
    span = max(1e-6, w.dense_span)
    out = []
    for g in groups:
        g_hi, g_bm = top(g, "dense"), top(g, "keyword")
        fixed = []
        for h in g:
            shift = w.dense * (hi - g_hi) / span
            if g_bm > 0 and top_bm > 0:
                shift += w.keyword * h.signals.get("keyword", 0.0) * (1.0 / g_bm - 1.0 / top_bm)
            fixed.append(replace(h, score=h.score - shift) if shift else h)
        out.append(fixed)
    return out


def merge_hits(groups: Sequence[Sequence[RecallHit]], k: int, weights: Any = None) -> list[RecallHit]:
    """Merge per-shard results: best score first, ties by id; each id once.

    Only ``via == "match"`` hits count toward ``k``; expansions (neighbours,
    relations) follow the matches, in their shards' order, each id once.
    """
    seen: set[str] = set()
    out: list[RecallHit] = []
    if weights is not None:
        groups = _comparable(groups, weights)
    flat = [h for g in groups for h in g]
    matches = [h for h in flat if h.via == "match"]
    for hit in sorted(matches, key=lambda h: (-h.score, h.node.id)):
        if hit.node.id not in seen:
            seen.add(hit.node.id)
            out.append(hit)
            if len(out) >= k:
                break
    for hit in flat:
        if hit.via != "match" and hit.node.id not in seen and (hit.expanded_from in seen):
            seen.add(hit.node.id)
            out.append(hit)
    return out
