"""Conflict resolution between a keyed fact's current value and a new assertion.

Pure functions of their inputs: no I/O, no Ray. The shard that owns the fact's
scope calls :func:`resolve` inside its compare-and-set retry loop.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import numpy as np

from memorybus.errors import InvalidRequest
from memorybus.hooks import call_hook
from memorybus.memory.model import MemoryNode
from memorybus.salience import SECONDS_PER_DAY

AUTHORITY_TAG = "authority"


class Strategy(str, Enum):
    CONFIDENCE_WEIGHTED = "confidence_weighted"
    RECENCY = "recency"
    AUTHORITY = "authority"
    EVIDENCE = "evidence"

    @classmethod
    def parse(cls, value: Strategy | str) -> Strategy:
        try:
            return cls(value)
        except ValueError:
            raise InvalidRequest("strategy", f"unknown strategy {value!r}") from None


@dataclass(frozen=True, slots=True)
class Decision:
    new_wins: bool
    reason: str


def _time_weight(older: float, newer: float, half_life_days: float) -> float:
    """How much an older fact's confidence still counts when a newer one arrives."""
    days = max(0.0, newer - older) / SECONDS_PER_DAY
    return math.exp(-math.log(2) * days / max(half_life_days, 1e-9))


def resolve(
    current: MemoryNode | None,
    new: MemoryNode,
    strategy: Strategy,
    *,
    half_life_days: float = 30.0,
) -> Decision:
    """Should ``new`` replace ``current`` as the key's current value?

    - ``confidence_weighted``: the older fact's confidence is discounted by the
      time between the two facts (half-life ``half_life_days``); the new fact wins
      if its confidence is at least the discounted one. Equal: the newer wins.
    - ``recency``: the fact valid from later wins; a tie goes to the new write.
    - ``authority``: a fact tagged ``authority`` (written by an authority agent or
      role) beats one that is not; between equals, ``confidence_weighted``.

    ``evidence`` weighs every assertion of the key, not a pair: the shard resolves
    it with :func:`memorybus.bus.evidence.observe`; given here, it compares as
    ``confidence_weighted``.
    """
    if current is None:
        return Decision(True, "first value")
    if strategy is Strategy.AUTHORITY:
        new_auth = AUTHORITY_TAG in new.tags
        cur_auth = AUTHORITY_TAG in current.tags
        if new_auth != cur_auth:
            return Decision(new_auth, "authority")
        strategy = Strategy.CONFIDENCE_WEIGHTED
    if strategy is Strategy.RECENCY:
        return Decision(new.valid_from >= current.valid_from, "recency")
    if new.valid_from >= current.valid_from:
        weighted = current.confidence * _time_weight(current.valid_from, new.valid_from, half_life_days)
        return Decision(new.confidence >= weighted, "confidence_weighted")
    # a back-dated assertion competes against a fact that is newer than it
    weighted = new.confidence * _time_weight(new.valid_from, current.valid_from, half_life_days)
    return Decision(weighted > current.confidence, "confidence_weighted")


# ------------------------------------------------------------ contradictions
#: A judge decides whether two similar memories contradict each other; it returns
#: True or False, or None to defer to the default rule.
Judge = Callable[[MemoryNode, MemoryNode], "bool | None"]

_NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "don't",
        "doesn't",
        "isn't",
        "aren't",
        "won't",
        "can't",
        "cannot",
        "didn't",
        "wasn't",
        "weren't",
        "nobody",
        "nothing",
    }
)
_NUMBER = re.compile(r"\d+(?:[.:]\d+)?")
_WORD = re.compile(r"[a-z0-9']+")


def default_contradiction(new: MemoryNode, old: MemoryNode) -> bool:
    """The deterministic default: two similar memories contradict when they differ
    in negation, or state different numbers (times, amounts, dates)."""
    a, b = new.content.lower(), old.content.lower()
    neg_a = bool(_NEGATIONS & set(_WORD.findall(a)))
    neg_b = bool(_NEGATIONS & set(_WORD.findall(b)))
    if neg_a != neg_b:
        return True
    nums_a, nums_b = set(_NUMBER.findall(a)), set(_NUMBER.findall(b))
    return bool(nums_a and nums_b and nums_a != nums_b)


def _verdict(value: object) -> str | None:
    if value is None or isinstance(value, bool | np.bool_):  # numpy's bool too
        return None
    return f"returned {type(value).__name__} {str(value)[:60]!r} (a judge returns True, False or None)"


def is_contradiction(new: MemoryNode, old: MemoryNode, judge: Judge | None = None) -> bool:
    """Whether ``new`` contradicts ``old``: the judge's verdict, or the default rule
    when there is no judge or it returns None. A judge that raises, or returns anything
    but True, False or None, raises :class:`~memorybus.errors.HookFailed` (the write
    that asked is refused whole: judges run before the commit)."""
    if judge is not None:
        verdict = call_hook("bus.judge", judge, new, old, check=_verdict)
        if verdict is not None:
            return bool(verdict)
    return default_contradiction(new, old)
