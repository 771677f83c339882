"""Injected time. Decay, consolidation and stamping take a Clock, never time.time()."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...


class SystemClock:
    """Wall-clock seconds since the epoch."""

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock tests move by hand (``advance(days=90)``)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float = 0.0, *, days: float = 0.0) -> float:
        self._now += seconds + days * 86_400.0
        return self._now

    def set(self, when: float) -> None:
        self._now = float(when)
