"""Recall results and the ranking that turns relevance into a final score."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from memorybus.config import RankingWeights
from memorybus.model import SECONDS_PER_DAY, MemoryNode, MemoryStatus, salience

DEFAULT_STATUSES = (MemoryStatus.ACTIVE, MemoryStatus.CONSOLIDATED)


@dataclass(slots=True)
class RecallHit:
    """One recalled memory: the node (without its embedding), its final score and
    the raw relevance (cosine similarity to the query)."""

    node: MemoryNode
    score: float
    relevance: float

    @property
    def content(self) -> str:
        return self.node.content

    @property
    def id(self) -> str:
        return self.node.id


def rank_score(node: MemoryNode, relevance: float, now: float, w: RankingWeights) -> float:
    """Relevance weighted by salience, plus small recency and importance terms."""
    sal = min(1.0, salience(node, now))
    age_days = max(0.0, now - node.created_at) / SECONDS_PER_DAY
    recency = math.exp(-math.log(2) * age_days / max(1e-9, w.recency_half_life_days))
    importance = (node.importance - 1.0) / 9.0
    return relevance * (1.0 - w.salience + w.salience * sal) + w.recency * recency + w.importance * importance


def merge_hits(groups: Sequence[Sequence[RecallHit]], k: int) -> list[RecallHit]:
    """Merge per-shard results: best score first, ties by id; each id once."""
    seen: set[str] = set()
    out: list[RecallHit] = []
    for hit in sorted((h for g in groups for h in g), key=lambda h: (-h.score, h.node.id)):
        if hit.node.id not in seen:
            seen.add(hit.node.id)
            out.append(hit)
            if len(out) >= k:
                break
    return out
