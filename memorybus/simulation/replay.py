"""Every strategy on the same assertions, and the best any resolver could do.

The live run resolves each fact with one strategy. To compare strategies on
equal terms, the runner also feeds every acknowledged assertion, in the order
the bus acknowledged them, through each strategy's own code (the bus's pure
resolvers: :func:`memorybus.bus.conflicts.resolve` and
:func:`memorybus.bus.evidence.observe` with learned reliabilities), and asks each
for its value at the same check points as the live run.

The ceiling (:func:`oracle`): for a fact version, the values asserted for that
version by the assertions the bus saw, weighed by the Bayes rule with every
source's *true* reliability and the simulation's own error model (a wrong
report is the previous value half the time, another value otherwise). It also
knows which assertions were about the version, which the bus does not: no
resolver can do better, so strategies are reported as a fraction of it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from memorybus.bus.conflicts import AUTHORITY_TAG, Strategy, resolve
from memorybus.bus.evidence import Claim, KeyEvidence, Weighing, observe
from memorybus.bus.reliability import Reliabilities
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Scope
from memorybus.simulation.world import STRATEGIES, epoch

ALL_STRATEGIES = (*STRATEGIES, "evidence")


@dataclass(frozen=True, slots=True)
class Seen:
    """An acknowledged assertion as the replay needs it."""

    key: str
    org: str
    value: str
    source: str
    confidence: float
    day: float
    lead: bool


@dataclass
class Replay:
    """Per strategy, per fact: the head value after the assertions fed so far."""

    half_life_days: float = 30.0
    weighing: Weighing | None = None  # None: the defaults with ``half_life_days``
    prior_strength: float | None = None  # None: the reliability module's default
    heads: dict[str, dict[str, MemoryNode]] = field(default_factory=lambda: {s: {} for s in STRATEGIES})
    evidence: dict[str, KeyEvidence] = field(default_factory=dict)
    reliabilities: Reliabilities = field(init=False)

    def __post_init__(self) -> None:
        self.reliabilities = Reliabilities(self.half_life_days, self.prior_strength)
        if self.weighing is None:
            self.weighing = Weighing(self.half_life_days)

    def feed(self, a: Seen) -> None:
        at = epoch(a.day)
        node = MemoryNode(a.value, Scope(a.org), id="r", valid_from=at, confidence=a.confidence,
                          tags=(AUTHORITY_TAG,) if a.lead else ())
        for strategy, heads in self.heads.items():
            cur = heads.get(a.key)
            if cur is not None and cur.content == a.value:  # the shard reinforces instead
                heads[a.key] = MemoryNode(cur.content, cur.scope, id="r", valid_from=cur.valid_from,
                                          confidence=max(cur.confidence, a.confidence), tags=cur.tags)
                continue
            if resolve(cur, node, Strategy(strategy), half_life_days=self.half_life_days).new_wins:
                heads[a.key] = node
        ev = self.evidence.get(a.key, KeyEvidence())
        out = observe(ev, Claim(a.source, a.value, a.confidence, at),
                      self.reliabilities.calibrator(a.org, at), self.weighing or Weighing(self.half_life_days))
        self.reliabilities.apply(a.org, ev.grades(at, self.half_life_days),
                                 out.record.grades(at, self.half_life_days))
        self.evidence[a.key] = out.record

    def value(self, strategy: str, key: str) -> str | None:
        if strategy == "evidence":
            ev = self.evidence.get(key)
            return ev.head if ev and ev.head else None
        node = self.heads[strategy].get(key)
        return node.content if node else None


def oracle(reports: Iterable[tuple[str, float]], truth: str, previous: str | None, options: int) -> bool:
    """Would the Bayes-optimal resolver, knowing each source's true reliability, pick
    ``truth`` from ``reports`` (``(value, reliability)`` of the assertions of this
    version)? A tie that includes the truth counts as picked (a ceiling)."""
    rows = list(reports)
    candidates = {v for v, _ in rows}
    if truth not in candidates:
        return False
    others = max(1, options - 1)

    def loglik(x: str) -> float:
        total = 0.0
        for v, stated in rows:
            r = min(max(stated, 1e-6), 1 - 1e-6)
            if v == x:
                total += math.log(r)
            elif previous is not None and x != previous:
                total += math.log((1 - r) * (0.5 if v == previous else 0.5 / others))
            else:
                total += math.log((1 - r) / others)
        return total

    scores = {x: loglik(x) for x in candidates}
    return scores[truth] >= max(scores.values()) - 1e-9
