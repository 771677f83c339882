"""Percentiles of measured durations: the one helper the evaluation, the simulation's
report and the benchmarks share (linear interpolation, as ``numpy.percentile``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ``values``; None when there are none."""
    if not len(values):
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def summary_ms(seconds: Sequence[float], *, with_max: bool = False) -> dict[str, float]:
    """p50, p95 and mean (and max) of durations in seconds, in milliseconds; {} when
    there are none."""
    arr = np.asarray(seconds, dtype=np.float64) * 1000.0
    if not len(arr):
        return {}
    out = {"p50": float(np.percentile(arr, 50)), "p95": float(np.percentile(arr, 95)), "mean": float(arr.mean())}
    if with_max:
        out["max"] = float(arr.max())
    return out
