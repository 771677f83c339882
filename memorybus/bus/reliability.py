"""Learned source reliability per org: an online truth-discovery estimate.

Pure Python, no I/O. Each source's grades (how often its assertions agreed with
the value the bus resolved without its own vote, see :mod:`memorybus.bus.evidence`)
are summed per org over that org's facts, decayed with the fact half-life. The
estimate is the mean of a Beta posterior:

- ``reliability`` (what :meth:`Reliabilities.snapshot` reports) starts from a
  neutral Beta(1, 1): a source never graded is at 0.5, "unknown";
- the probability used to weigh an assertion calibrates the source's stated
  confidence ``c``: a Beta prior of mean ``c`` and strength ``PRIOR_STRENGTH``,
  updated by the grades, so a new source is believed as it states itself and a
  source that states .9 but agrees half the time is weighed near .5.

Orgs never mix: a table is per org, and one org's grades are never read for
another's facts. The table is derived state: the shard rebuilds it from the
evidence stored with its fact slots, so it is as durable as they are.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from memorybus.bus.claims import Calibrate, Tally, decay

#: how many graded assertions the stated confidence is worth (tuned on seeds 0-4). More is
#: better on the simulation's training seeds (``python -m benchmarks.truth_tune sweep --seeds
#: 0-99``: 32 beats 16), whose agents state their reliability honestly; but at 32 a source
#: stating .95 and always wrong is still weighed above .5 after the grades of
#: tests/unit/test_evidence.py, and learning whom not to believe is what the table is for
#: (``score --overconfident 2``).
PRIOR_STRENGTH = 16.0


class Reliabilities:
    """Per org, per source: decayed (agree, disagree) grades."""

    def __init__(self, half_life_days: float = 30.0, prior_strength: float | None = None) -> None:
        self.half_life_days = half_life_days
        self.prior_strength = PRIOR_STRENGTH if prior_strength is None else prior_strength
        self._orgs: dict[str, dict[str, tuple[float, float, float]]] = {}
        self._lock = threading.Lock()  # a shard applies on its write thread, reads on another

    def apply(self, org: str, old: Tally, new: Tally) -> None:
        """Replace one fact's contribution ``old`` by ``new`` in ``org``'s table."""
        with self._lock:
            self._apply(org, old, new)

    def _apply(self, org: str, old: Tally, new: Tally) -> None:
        table = self._orgs.setdefault(org, {})
        for source in set(old) | set(new):
            a0, b0, t0 = old.get(source, (0.0, 0.0, 0.0))
            a1, b1, t1 = new.get(source, (0.0, 0.0, 0.0))
            a, b, t = table.get(source, (0.0, 0.0, max(t0, t1)))
            at = max(t, t0, t1)
            k, k0, k1 = (decay(at - x, self.half_life_days) for x in (t, t0, t1))
            a = max(0.0, a * k + a1 * k1 - a0 * k0)
            b = max(0.0, b * k + b1 * k1 - b0 * k0)
            table[source] = (a, b, at)

    def grades(self, org: str, source: str, now: float) -> tuple[float, float]:
        a, b, at = self._orgs.get(org, {}).get(source, (0.0, 0.0, now))
        k = decay(now - at, self.half_life_days)
        return a * k, b * k

    def calibrator(self, org: str, now: float) -> Calibrate:
        """The calibrated probability that a source of ``org`` stating a confidence is right."""

        def calibrate(source: str, confidence: float) -> float:
            a, b = self.grades(org, source, now)
            return (self.prior_strength * confidence + a) / (self.prior_strength + a + b)

        return calibrate

    def snapshot(self, org: str, now: float) -> dict[str, dict[str, Any]]:
        """``{source: {"reliability", "agree", "disagree"}}`` for ``org`` at ``now``."""
        out = {}
        with self._lock:
            sources = sorted(self._orgs.get(org, {}))
        for source in sources:
            a, b = self.grades(org, source, now)
            out[source] = {"reliability": round((1.0 + a) / (2.0 + a + b), 4), "agree": round(a, 3),
                           "disagree": round(b, 3)}
        return out

    def latest(self, org: str) -> float:
        """The time of ``org``'s newest grade (grades decay in the facts' own time)."""
        with self._lock:
            return max((at for _, _, at in self._orgs.get(org, {}).values()), default=0.0)

    def orgs(self) -> list[str]:
        return sorted(self._orgs)


def merge(snapshots: list[Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Several shards' snapshots of one org as one: grades add up."""
    total: dict[str, list[float]] = {}
    for snap in snapshots:
        for source, row in snap.items():
            t = total.setdefault(source, [0.0, 0.0])
            t[0] += float(row["agree"])
            t[1] += float(row["disagree"])
    return {s: {"reliability": round((1.0 + a) / (2.0 + a + b), 4), "agree": round(a, 3), "disagree": round(b, 3)}
            for s, (a, b) in sorted(total.items())}
