"""Evidence per keyed fact: every assertion of every candidate value, weighed together.

Pure functions of their inputs: no I/O, no Ray. The shard keeps one
:class:`KeyEvidence` with each fact slot (stored in the assertion's own
transaction) and calls :func:`observe` inside its compare-and-set retry loop;
the simulation replays assertions through the same code.

The model, in short:

- A *claim* is one assertion: its source, the value (a content hash), the
  confidence the source stated, and when it holds (``valid_from``).
- A value's support is the sum, over distinct sources (each source's newest
  claim only), of the log-odds of the source being right: its stated
  confidence calibrated by its learned reliability
  (:mod:`memorybus.bus.reliability`), decayed with the fact half-life. Independent
  sources agreeing add up; one source repeating itself does not.
- Evidence counts since the last known change. When a value takes over, the
  one it replaced is *gone* from that moment: a later report of a gone value is
  stale (a source still seeing the old state) and counts for nothing at first,
  regaining weight with ``stale_half_life`` (a real change back is possible).
- Claims are weighed in the order of their times, not of their arrival: a claim
  dated before the newest one held is put in its place and the held claims are
  weighed again from the record's *base* (the state before the oldest claim held),
  so the same claims give the same head whichever order they arrived in (a true
  report that took longer to arrive than a wrong one is not lost to it). Only a
  claim older than the base is late: it describes the past.
- The head's support against a challenger counts its claims made after the
  challenge fully, and those made before it less the older they are (nothing
  ``grace`` or more before it): the older a report of the head, the likelier a
  change came after it.
- Grading: a claim of a value other than its episode's winner disagrees; a
  claim of the winner agrees when another source supports the winner too (a
  source's own vote never confirms it; a lone claim is not graded). Grades
  of claims still held are provisional (later evidence can reverse them);
  older ones are folded into per-source tallies. The tallies, summed per org,
  are the sources' learned reliability.

Guarantees: :func:`observe` never mutates its input record; the new head is the
asserted value or the current head, except when a claim weighed again in time order
makes a third value the best supported (2 of 3,866 assertions in ten simulated seeds):
the record says so, the shard keeps its head; records stay bounded (``MAX_CLAIMS``
claims, newest by time, ``MAX_GONE`` gone values).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace

from memorybus.bus.claims import (
    EMPTY,
    MAX_CLAIMS,
    MAX_GONE,
    REASSERT,
    Base,
    Calibrate,
    Claim,
    KeyEvidence,
    Tally,
    decay,
    log_odds,
)
from memorybus.salience import SECONDS_PER_DAY

__all__ = [
    "MAX_CLAIMS",
    "MAX_GONE",
    "REASSERT",
    "Calibrate",
    "Claim",
    "KeyEvidence",
    "Outcome",
    "Tally",
    "Weighing",
    "decay",
    "observe",
    "support",
    "without_sources",
]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What :func:`observe` decided: does the asserted value become (or stay) the
    head, why, and the record to store."""

    new_wins: bool
    reason: str
    record: KeyEvidence


def _stale_factor(ev: KeyEvidence, c: Claim, stale_half_life_days: float) -> float:
    """1 for fresh evidence; 0 for a report of a value gone at or after the claim's
    time, rising back to 1 with ``stale_half_life_days`` after it went."""
    if c.value == ev.head:
        return 1.0
    if c.at < ev.since:
        return 0.0  # late: it describes the state before the last known change
    for value, went in reversed(ev.gone):
        if value == c.value:
            return 1.0 - decay(c.at - went, stale_half_life_days)
    return 1.0


@dataclass(frozen=True, slots=True)
class Weighing:
    """How evidence is weighed (defaults tuned on the simulation's training seeds with
    ``benchmarks/truth_tune.py``, docs/truth.md gives the seeds and figures):
    ``half_life_days`` of support; ``stale_half_life_days``: how fast a report of a
    gone value regains weight; ``grace_days``: how long before a challenge a report of
    the head still counts against it (linearly less the older it is); ``reassert``: what
    a re-assertion of the head counts for (it may repeat what the source read)."""

    half_life_days: float = 30.0  # the policy's fact half-life (the shard passes it)
    # both: benchmarks/truth_tune.py tune --seeds 0-99,500-599 (chosen in all 4 folds)
    stale_half_life_days: float = 1.0
    grace_days: float = 2.5
    reassert: float = REASSERT


def _latest(ev: KeyEvidence, without: str | None = None) -> dict[str, Claim]:
    """Each source's newest claim in ``ev`` (in the order the sources first claimed),
    ``without`` that source."""
    latest: dict[str, Claim] = {}
    for c in ev.claims:  # oldest first: a source's newest claim stands
        if c.source != without:
            latest[c.source] = c
    return latest


def _stales(ev: KeyEvidence, latest: Mapping[str, Claim], weighing: Weighing) -> dict[str, float]:
    """Each claim's stale factor (1 for the head's)."""
    head, half_life = ev.head, weighing.stale_half_life_days
    return {s: 1.0 if c.value == head else _stale_factor(ev, c, half_life) for s, c in latest.items()}


def _horizon(ev: KeyEvidence, latest: Mapping[str, Claim], stale: Mapping[str, float],
             without: str | None = None) -> tuple[float, float | None]:
    """What the weights of the sources' newest claims (``without`` one) are taken
    against: the newest claim's time, and the onset of the challenge to the head (the
    first fresh claim of another value since the head took over), if any."""
    head, since = ev.head, ev.since
    now, onset = -math.inf, None
    for s, c in latest.items():
        if s == without:
            continue
        now = max(now, c.at)
        if c.value != head and c.at >= since and stale[s] > 0.5 and (onset is None or c.at < onset):
            onset = c.at
    return now, onset


def _weight(ev: KeyEvidence, c: Claim, stale: float, lo: float, now: float, onset: float | None,
            weighing: Weighing) -> float:
    """The log-odds ``c`` (its source's newest claim) adds to its value's support."""
    if c.value == ev.head:
        if c.at < ev.since:
            w = 0.0  # it describes the state before the head took over
        else:  # a re-assertion of the head may repeat what the source read: it counts less
            w = 1.0 if c.at <= ev.since else weighing.reassert
            if onset is not None and c.at < onset:  # the older, the likelier a change came since
                w *= max(0.0, 1.0 - (onset - c.at) / (max(weighing.grace_days, 1e-9) * SECONDS_PER_DAY))
    else:
        w = stale
    return w * lo * decay(now - c.at, weighing.half_life_days)


def support(ev: KeyEvidence, calibrate: Calibrate, weighing: Weighing, without: str | None = None) -> dict[str, float]:
    """Each candidate value's support (summed log-odds) in ``ev``; ``without``: leave
    that source's claims out."""
    latest = _latest(ev, without)
    if not latest:
        return {}
    stale = _stales(ev, latest, weighing)
    now, onset = _horizon(ev, latest, stale)
    scores: dict[str, float] = {}
    for s, c in latest.items():
        weight = _weight(ev, c, stale[s], log_odds(calibrate(s, c.confidence)), now, onset, weighing)
        scores[c.value] = scores.get(c.value, 0.0) + weight
    return scores


def _backers(ev: KeyEvidence, winner: str, sources: Collection[str], calibrate: Calibrate,
             weighing: Weighing) -> dict[str, bool]:
    """For each of ``sources``: is ``winner`` supported (> 0) with that source left out.
    The same sums as ``support(ev, ..., without=source)[winner]``, term for term in the
    same order, but each source's weight is computed once per (newest time, onset)
    rather than once per source left out."""
    latest = _latest(ev)
    stale = _stales(ev, latest, weighing)
    lo = {s: log_odds(calibrate(c.source, c.confidence)) for s, c in latest.items()}
    weights: dict[tuple[float, float | None], dict[str, float]] = {}
    out: dict[str, bool] = {}
    for left in sources:
        if not any(s != left for s in latest):
            out[left] = False  # no other source
            continue
        horizon = _horizon(ev, latest, stale, without=left)
        ws = weights.setdefault(horizon, {})
        total = 0.0
        for s, c in latest.items():
            if s == left or c.value != winner:
                continue
            if s not in ws:
                ws[s] = _weight(ev, c, stale[s], lo[s], *horizon, weighing)
            total = total + ws[s]
        out[left] = total > 0
    return out


def _winner(scores: Mapping[str, float], head: str, newest: str) -> str | None:
    """The best-supported value; a tie goes to the newest claim's value, then the head."""
    scores = {v: s for v, s in scores.items() if s > 0}
    if not scores:
        return None  # nothing counts: no value is supported
    best = max(scores.values())
    tied = [v for v, s in scores.items() if s >= best - 1e-12]
    if newest in tied:
        return newest
    return head if head in tied else tied[0]


def observe(
    ev: KeyEvidence,
    claim: Claim,
    calibrate: Calibrate,
    weighing: Weighing = Weighing(),
    *,
    decided: bool | None = None,
) -> Outcome:
    """Add ``claim`` to ``ev`` and decide whether its value is the fact's value now.

    Claims are weighed in the order of their times, not of their arrival: a claim
    dated before the newest one held (a report that took longer to arrive) is put
    in its place and the held claims are weighed again from the record's base, so
    the head is the same whichever order the same claims came in. Then the new head
    may be neither the asserted value nor the old head (``Outcome.record.head``).

    ``decided``: another strategy's decision, which the record then follows (the
    evidence is kept whatever strategy resolves the fact, so the sources keep
    being graded and a later switch of strategy starts informed)."""
    calibrate = functools.lru_cache(maxsize=256)(calibrate)  # a weighing asks for each source often
    if not ev.head:  # the first value of the fact
        first = replace(claim, grade=0)
        return Outcome(True, "first value",
                       KeyEvidence(claim.value, claim.at, (first,), (), dict(ev.tally), EMPTY))
    fresh = replace(claim, grade=0)
    newest = max((c.at for c in ev.claims), default=ev.since)
    base = ev.base
    if decided is None and base is not None and base.at <= claim.at < newest:
        cur = _fold(base, (*ev.claims, fresh), ev.tally, calibrate, weighing)
        if cur.head == claim.value:
            new_wins, reason = True, "evidence: more support (weighed in time order)"
        else:
            new_wins, reason = False, "evidence: less support (weighed in time order)"
        cur = _grade(cur, calibrate, weighing)
        return Outcome(new_wins, reason, _trim(cur, calibrate, weighing))
    cur = replace(ev, claims=(*ev.claims, fresh))
    new_wins, reason = _judge(cur, claim, calibrate, weighing)
    if decided is not None and claim.value != ev.head:
        new_wins = decided
    if new_wins and claim.value != ev.head:
        cur = _take_over(cur, claim.value, claim.at)
    cur = _grade(cur, calibrate, weighing)
    return Outcome(new_wins, reason, _trim(cur, calibrate, weighing))


def _judge(cur: KeyEvidence, claim: Claim, calibrate: Calibrate, weighing: Weighing) -> tuple[bool, str]:
    """Does ``claim`` (the last of ``cur.claims``) make its value the head, and why."""
    if claim.value == cur.head:
        return True, "evidence: reinforced"
    if _winner(support(cur, calibrate, weighing), cur.head, claim.value) == claim.value:
        return True, "evidence: more support"
    stale = _stale_factor(cur, claim, weighing.stale_half_life_days) < 0.5
    return False, "evidence: stale" if stale else "evidence: less support"


def _take_over(cur: KeyEvidence, value: str, at: float) -> KeyEvidence:
    """``value`` (claimed at ``at``) becomes the head: from its first claim since the
    last change; the head it replaces is gone from then."""
    went = min((c.at for c in cur.claims if c.value == value and c.at >= cur.since), default=at)
    went = max(went, cur.since)
    gone = tuple(g for g in cur.gone if g[0] != cur.head and g[0] != value)
    return replace(cur, head=value, since=went, gone=(*gone, (cur.head, went))[-MAX_GONE:])


def _fold(base: Base, claims: tuple[Claim, ...], tally: Mapping[str, tuple[float, float, float]],
          calibrate: Calibrate, weighing: Weighing, *, stop: int = -1) -> KeyEvidence:
    """The record that weighing ``claims`` one by one in time order from ``base`` gives
    (ties keep their order). ``stop``: return the base after that many claims instead."""
    ordered = sorted(claims, key=lambda c: c.at)
    head, since, gone = base.head, base.since, base.gone
    for i, c in enumerate(ordered):
        if i == stop:
            return KeyEvidence(base=Base(head, since, gone, ordered[i - 1].at if i else base.at))
        if not head:
            head, since = c.value, c.at
        elif c.value != head:  # the record so far is built only when a claim challenges its head
            cur = KeyEvidence(head, since, tuple(ordered[: i + 1]), gone, tally, base)
            if _judge(cur, c, calibrate, weighing)[0]:
                cur = _take_over(cur, c.value, c.at)
                head, since, gone = cur.head, cur.since, cur.gone
    return KeyEvidence(head, since, tuple(ordered), gone, tally, base)


def _grade(ev: KeyEvidence, calibrate: Calibrate, weighing: Weighing) -> KeyEvidence:
    """Grade the claims of the current episode against its winner: a claim of another
    value disagrees; a claim of the winner agrees if some other source supports the
    winner too (a source never confirms itself). Earlier claims keep their grades."""
    claims = list(ev.claims)
    newest = claims[-1].value if claims else ev.head
    winner = _winner(support(ev, calibrate, weighing), ev.head, newest)
    current = [i for i, c in enumerate(claims) if not (c.at < ev.since and c.value != ev.head)]
    # agreement counts when another source supports the winner too
    agreeing = dict.fromkeys(claims[i].source for i in current if claims[i].value == winner)
    backed = {} if winner is None else _backers(ev, winner, agreeing, calibrate, weighing)
    for i in current:  # an earlier episode's claims keep their grades
        c = claims[i]
        grade = int(backed[c.source]) if c.value == winner else 0 if winner is None else -1
        if grade != c.grade:
            claims[i] = replace(c, grade=grade)
    return replace(ev, claims=tuple(claims))


def without_sources(ev: KeyEvidence, sources: Collection[str]) -> KeyEvidence:
    """``ev`` with no claim and no tally of ``sources`` (an erased source): the head
    stays (what the fact's value is, is its history's to say), grades of the claims
    left are revised at the next assertion."""
    gone = set(sources)
    return replace(ev, claims=tuple(c for c in ev.claims if c.source not in gone),
                   tally={s: t for s, t in ev.tally.items() if s not in gone})


def _trim(ev: KeyEvidence, calibrate: Calibrate, weighing: Weighing) -> KeyEvidence:
    """Keep at most MAX_CLAIMS claims: the oldest are folded into the tallies, and the
    base moves past them (the state they left, weighed in time order)."""
    if len(ev.claims) <= MAX_CLAIMS:
        return ev
    half_life_days = weighing.half_life_days
    ordered = tuple(sorted(ev.claims, key=lambda c: c.at))
    n = len(ordered) - MAX_CLAIMS
    drop, keep = ordered[:n], ordered[n:]
    base = None if ev.base is None else _fold(ev.base, ordered, ev.tally, calibrate, weighing, stop=n).base
    tally = dict(ev.tally)
    for c in drop:
        if not c.grade:
            continue
        a, b, at = tally.get(c.source, (0.0, 0.0, c.at))
        t = max(at, c.at)
        k_old, k_new = decay(t - at, half_life_days), decay(t - c.at, half_life_days)
        a, b = a * k_old, b * k_old
        if c.grade > 0:
            a += k_new
        else:
            b += k_new
        tally[c.source] = (a, b, t)
    return replace(ev, claims=keep, tally=tally, base=base)
