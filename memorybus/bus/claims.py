"""The records a keyed fact's evidence is kept in: claims, the base they are weighed
from, and :class:`KeyEvidence` (what a fact slot stores), with the two functions every
weighing uses (:func:`decay`, :func:`log_odds`). :mod:`memorybus.bus.evidence` weighs
them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memorybus.errors import MemoryBusError
from memorybus.memory.codec import decode, encode
from memorybus.salience import SECONDS_PER_DAY

_KIND = "evidence"
MAX_CLAIMS, MAX_GONE = 24, 8
#: a calibrated probability is kept inside [P_MIN, P_MAX] (no source is ever certain)
P_MIN, P_MAX = 0.5, 0.99
#: what a re-assertion of the current value (made after it took over) counts for against a
#: challenger: it may repeat what the source read from the bus, or be a stale view (half of
#: the simulation's wrong reports are the previous value). Less is better on the training
#: seeds (``python -m benchmarks.truth_tune sweep --seeds 0-99``: 0.0 best), but under 0.3 two
#: sources agreeing no longer outweigh one more confident liar
#: (tests/unit/test_evidence_erase_transfer.py), which the model promises; was 0.4 (seeds 0-4).
REASSERT = 0.3

#: source -> (agree, disagree, at): evidence-weighted grades, decayed to ``at``
Tally = dict[str, tuple[float, float, float]]
#: the calibrated probability that ``source`` stating ``confidence`` is right
Calibrate = Callable[[str, float], float]


def decay(seconds: float, half_life_days: float) -> float:
    """The weight left after ``seconds`` with a half-life of ``half_life_days``."""
    return math.exp(-math.log(2) * max(0.0, seconds) / (max(half_life_days, 1e-9) * SECONDS_PER_DAY))


def log_odds(p: float) -> float:
    p = min(P_MAX, max(P_MIN, p))
    return math.log(p / (1.0 - p))


@dataclass(frozen=True, slots=True)
class Claim:
    """One assertion: ``source`` said ``value`` (a content hash) holds from ``at``
    (epoch seconds) with ``confidence``; ``grade`` is its provisional grade
    (+1 agrees with the winner, -1 disagrees, 0 not graded)."""

    source: str
    value: str
    confidence: float
    at: float
    grade: int = 0


@dataclass(frozen=True, slots=True)
class Base:
    """A fact's state before the oldest claim a record holds: its head then, since when,
    the values gone by then, and ``at``: the time of the newest claim folded away."""

    head: str = ""
    since: float = 0.0
    gone: tuple[tuple[str, float], ...] = ()
    at: float = 0.0


EMPTY = Base()


@dataclass(frozen=True, slots=True)
class KeyEvidence:
    """What a fact slot keeps to weigh its assertions (see the module docstring).

    ``head``: the current value; ``since``: when it took over (the last known
    change); ``claims``: recent claims, oldest first; ``gone``: superseded values
    with the time they stopped holding; ``tally``: folded grades per source;
    ``base``: the state before the oldest claim held (what a re-weighing in time
    order starts from), None where it is not known (a record trimmed before it
    was kept)."""

    head: str = ""
    since: float = 0.0
    claims: tuple[Claim, ...] = ()
    gone: tuple[tuple[str, float], ...] = ()
    tally: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    base: Base | None = EMPTY

    def latest(self) -> float:
        """The time of the newest evidence held (what grades are decayed to)."""
        return max([self.since, *(c.at for c in self.claims), *(t for _, _, t in self.tally.values())])

    # ------------------------------------------------------------- encoding
    def encode(self) -> bytes:
        return encode(_KIND, self.to_plain())

    @classmethod
    def decode(cls, blob: bytes | None) -> KeyEvidence:
        """The stored record; an unreadable one (another schema) counts as none: evidence
        only weighs assertions, it never decides what a fact's history holds."""
        if not blob:
            return cls()
        try:
            return cls.from_plain(decode(blob, _KIND))
        except (MemoryBusError, ValueError, TypeError, KeyError):
            return cls()

    def to_plain(self) -> dict[str, Any]:
        return {"h": self.head, "s": self.since,
                "c": [[c.source, c.value, c.confidence, c.at, c.grade] for c in self.claims],
                "g": [list(g) for g in self.gone], "t": {k: list(v) for k, v in self.tally.items()},
                "b": None if self.base is None else [self.base.head, self.base.since,
                                                     [list(g) for g in self.base.gone], self.base.at]}

    @classmethod
    def from_plain(cls, d: Mapping[str, Any] | None) -> KeyEvidence:
        if not d:
            return cls()
        tally = {str(k): (float(a), float(b), float(t)) for k, (a, b, t) in d["t"].items()}
        b = d.get("b", None if tally else [])  # a record kept before bases: known if never trimmed
        base = None if b is None else Base(str(b[0]), float(b[1]), tuple((str(v), float(t)) for v, t in b[2]),
                                           float(b[3])) if b else EMPTY
        return cls(str(d["h"]), float(d["s"]),
                   tuple(Claim(str(s), str(v), float(c), float(a), int(g)) for s, v, c, a, g in d["c"]),
                   tuple((str(v), float(t)) for v, t in d["g"]), tally, base)

    # -------------------------------------------------------------- grades
    def grades(self, now: float, half_life_days: float) -> Tally:
        """Per source: folded tallies plus the provisional grades of held claims,
        decayed to ``now``."""
        out: dict[str, list[float]] = {}
        for source, (a, b, at) in self.tally.items():
            k = decay(now - at, half_life_days)
            out[source] = [a * k, b * k]
        for c in self.claims:
            if c.grade:
                k = decay(now - c.at, half_life_days)
                row = out.setdefault(c.source, [0.0, 0.0])
                row[0 if c.grade > 0 else 1] += k
        return {s: (a, b, now) for s, (a, b) in out.items()}
