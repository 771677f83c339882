"""Salience: the forgetting curve of DESIGN.md, for one memory or for arrays of them.

Pure functions of a memory's epistemic fields and the time; :mod:`memorybus.memory.model`
re-exports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from memorybus.memory.model import MemoryNode

SECONDS_PER_DAY = 86_400.0


def effective_decay_rate(decay_rate: float, importance: float) -> float:
    """Importance resists decay: importance 1 decays at the full rate, 10 at 10%."""
    return decay_rate * (1.0 - 0.1 * (importance - 1.0))


def salience(node: MemoryNode, now: float) -> float:
    """The forgetting curve of DESIGN.md for one node (see :func:`salience_array`)."""
    one = np.ones(1)
    return float(salience_array(node.confidence * one, node.access_count * one, node.last_accessed * one,
                                node.decay_rate * one, node.importance * one, now)[0])


def salience_array(
    confidence: np.ndarray,
    access_count: np.ndarray,
    last_accessed: np.ndarray,
    decay_rate: np.ndarray,
    importance: np.ndarray,
    now: float,
) -> np.ndarray:
    """The forgetting curve of DESIGN.md over arrays of the same length (one per node):

    ``confidence * (1 + 0.5*ln(1+access_count)) * exp(-rate * days_since_last_access)``
    where ``rate`` is :func:`effective_decay_rate`.
    """
    days = np.maximum(0.0, now - last_accessed) / SECONDS_PER_DAY
    rate = effective_decay_rate(decay_rate, importance)  # type: ignore[arg-type]
    return confidence * (1.0 + 0.5 * np.log1p(access_count)) * np.exp(-rate * days)
