"""Retrieval metrics (pure)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np


def recall_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    """Share of ``gold`` in the first ``k`` of ``ranked``."""
    g = set(gold)
    return len(g.intersection(ranked[:k])) / len(g) if g else 0.0


def hit_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    return 1.0 if set(gold).intersection(ranked[:k]) else 0.0


def recall_all_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    g = set(gold)
    return 1.0 if g and g.issubset(ranked[:k]) else 0.0


def ndcg_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    g = set(gold)
    dcg = sum(1.0 / math.log2(i + 2) for i, r in enumerate(ranked[:k]) if r in g)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(g))))
    return dcg / ideal if ideal else 0.0


def mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def dedupe(ids: Iterable[str]) -> list[str]:
    """Keep the first occurrence of each id (several memories can map to one turn or session)."""
    return list(dict.fromkeys(ids))
