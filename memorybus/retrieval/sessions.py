"""Sessions from time: memories written close together, grouped without being told.

Plain memories declare no thread, so none of the thread rules of recall reach them. A
*session* is what a shard can tell by itself: the episodic memories of one group (a scope
and the source that wrote them) whose event times (``valid_from``) follow one another
with no pause longer than ``gap`` seconds. Formally, sort a group's times; a session is a
maximal run in which each time is at most ``gap`` after the one before it. Memories with
one time are always in one session.

The partition depends only on the memories present, never on the order they were added
or removed in: a shard that rebuilds its indexes from its store gets the same sessions
(session numbers may differ; nothing outside the index sees them). An insert may join two
sessions; a removal may split one. Each operation looks only at the times within ``gap``
of its own (buckets of width ``gap``), and a join or split moves the smaller side
(a join) or the later side (a split).

Each session keeps the sum of its members' vectors, for the cosine of the session as a
whole with a query (:meth:`Sessions.scores`).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Hashable, Sequence

import numpy as np

Group = Hashable


class Sessions:
    """Sessions by pauses of more than ``gap`` seconds, per group; see the module."""

    def __init__(self, gap: float, vector_of: Callable[[str], np.ndarray | None]) -> None:
        if not gap > 0 or not math.isfinite(gap):
            raise ValueError("gap must be a positive number of seconds")
        self.gap = float(gap)
        self._vector_of = vector_of
        self._next = itertools.count(1)
        self._buckets: dict[Group, dict[int, list[float]]] = {}  # sorted distinct times per bucket
        self._at: dict[tuple[Group, float], set[str]] = {}  # the memories at one time
        self._sid: dict[tuple[Group, float], int] = {}  # the session of one time
        self._times: dict[int, set[float]] = {}  # session -> its distinct times
        self._group: dict[int, Group] = {}
        self._members: dict[int, int] = {}  # session -> how many memories
        #: session of two or more memories -> the sum of its members' vectors (a session of
        #: one keeps none: most memories of a slow writer are alone, and their vectors are
        #: in the vector cache already)
        self._sum: dict[int, np.ndarray] = {}
        self._of: dict[str, tuple[Group, float]] = {}

    def reset(self) -> None:
        for d in (self._buckets, self._at, self._sid, self._times, self._group, self._members, self._sum, self._of):
            d.clear()

    def __len__(self) -> int:
        return len(self._of)

    # ------------------------------------------------------------------ reads
    def session(self, memory_id: str) -> int | None:
        """The session of a memory (a number, stable until a join or split moves it)."""
        where = self._of.get(memory_id)
        return None if where is None else self._sid[where]

    def size(self, session: int) -> int:
        return self._members.get(session, 0)

    def scores(self, vector: np.ndarray, sessions: Sequence[int]) -> dict[int, float]:
        """Cosine of ``vector`` with the centroid (the mean of its members' vectors) of each
        of ``sessions`` that holds two or more memories."""
        known = [s for s in dict.fromkeys(sessions) if s in self._sum]
        if not known:
            return {}
        mat = np.stack([self._sum[s] for s in known])
        sims = (mat @ np.asarray(vector, dtype=np.float32)) / np.maximum(np.linalg.norm(mat, axis=1), 1e-9)
        return {s: float(v) for s, v in zip(known, sims.tolist(), strict=True)}

    def partition(self) -> set[frozenset[str]]:
        """Every session as the set of its memories (for checks; O(memories))."""
        out: dict[int, set[str]] = {}
        for memory_id, where in self._of.items():
            out.setdefault(self._sid[where], set()).add(memory_id)
        return {frozenset(v) for v in out.values()}

    # ----------------------------------------------------------------- writes
    def add(self, memory_id: str, group: Group, when: float, vector: np.ndarray | None = None) -> None:
        """Place a memory (``when``: its event time; ``vector``: its vector, else
        ``vector_of`` is asked); re-adding an id moves it."""
        if memory_id in self._of:
            self.remove(memory_id)
        when = float(when)
        key = (group, when)
        ids = self._at.get(key)
        if ids is not None:
            sid = self._sid[key]
        else:
            prev, nxt = self._near(group, when, -1), self._near(group, when, 1)
            self._insert_time(group, when)
            self._at[key] = ids = set()
            joined = [self._sid[(group, t)] for t in (prev, nxt) if t is not None]
            if not joined:
                sid = self._new(group)
            elif len(joined) == 2 and joined[0] != joined[1]:
                sid = self._join(joined[0], joined[1])
            else:
                sid = joined[0]
            self._sid[key] = sid
            self._times[sid].add(when)
        ids.add(memory_id)
        self._of[memory_id] = key
        self._members[sid] += 1
        if sid in self._sum:
            self._shift(sid, memory_id, 1.0, vector)
        else:
            self._resum(sid)

    def remove(self, memory_id: str) -> None:
        key = self._of.pop(memory_id, None)
        if key is None:
            return
        group, when = key
        sid = self._sid[key]
        self._shift(sid, memory_id, -1.0)
        self._members[sid] -= 1
        if self._members[sid] < 2:
            self._sum.pop(sid, None)
        ids = self._at[key]
        ids.discard(memory_id)
        if ids:
            return
        del self._at[key], self._sid[key]
        self._times[sid].discard(when)
        self._remove_time(group, when)
        if not self._times[sid]:
            del self._times[sid], self._group[sid], self._members[sid]
            self._sum.pop(sid, None)
            return
        prev, nxt = self._near(group, when, -1), self._near(group, when, 1)
        # both sides still in this session but now more than a gap apart: the later side leaves
        if prev is not None and nxt is not None and nxt - prev > self.gap:
            self._split(sid, group, nxt)

    # -------------------------------------------------------------- internals
    def _new(self, group: Group) -> int:
        sid = next(self._next)
        self._times[sid], self._group[sid], self._members[sid] = set(), group, 0
        return sid

    def _bucket(self, when: float) -> int:
        return math.floor(when / self.gap)

    def _insert_time(self, group: Group, when: float) -> None:
        times = self._buckets.setdefault(group, {}).setdefault(self._bucket(when), [])
        bisect.insort(times, when)

    def _remove_time(self, group: Group, when: float) -> None:
        buckets = self._buckets[group]
        b = self._bucket(when)
        times = buckets[b]
        times.pop(bisect.bisect_left(times, when))
        if not times:
            del buckets[b]
            if not buckets:
                del self._buckets[group]

    def _near(self, group: Group, when: float, step: int) -> float | None:
        """The nearest time of ``group`` before (``step`` -1) or after (+1) ``when``, if it
        is within a gap of it."""
        buckets = self._buckets.get(group)
        if not buckets:
            return None
        b = self._bucket(when)
        for bucket in (b, b + step):
            times = buckets.get(bucket)
            if not times:
                continue
            if step < 0:
                i = bisect.bisect_left(times, when) if bucket == b else len(times)
                if i > 0 and when - times[i - 1] <= self.gap:
                    return times[i - 1]
            else:
                i = bisect.bisect_right(times, when) if bucket == b else 0
                if i < len(times) and times[i] - when <= self.gap:
                    return times[i]
        return None

    def _join(self, a: int, b: int) -> int:
        """Merge two sessions of one group: the smaller's times move to the larger."""
        keep, gone = (a, b) if len(self._times[a]) >= len(self._times[b]) else (b, a)
        group = self._group[gone]
        for t in self._times[gone]:
            self._sid[(group, t)] = keep
        self._times[keep] |= self._times.pop(gone)
        self._members[keep] += self._members.pop(gone)
        moved, kept = self._sum.pop(gone, None), self._sum.get(keep)
        if moved is not None and kept is not None:
            kept += moved
        else:  # a side of one memory (or none): sum the joined session afresh (at most once per side)
            self._sum.pop(keep, None)
            self._resum(keep)
        del self._group[gone]
        return keep

    def _split(self, sid: int, group: Group, start: float) -> None:
        """The times of ``sid`` from ``start`` on (a run with no pause over the gap) become a
        new session."""
        new = self._new(group)
        t: float | None = start
        while t is not None and self._sid.get((group, t)) == sid:
            key = (group, t)
            self._sid[key] = new
            self._times[sid].discard(t)
            self._times[new].add(t)
            for memory_id in self._at[key]:
                self._members[sid] -= 1
                self._members[new] += 1
                self._shift(sid, memory_id, -1.0)
            t = self._near(group, t, 1)
        if self._members[sid] < 2:
            self._sum.pop(sid, None)
        self._resum(new)

    def _shift(self, sid: int, memory_id: str, sign: float, vec: np.ndarray | None = None) -> None:
        """Add (``sign`` 1) or take (-1) a member's vector to or from the session's sum, if it keeps one."""
        total = self._sum.get(sid)
        if total is None:
            return
        if vec is None:
            vec = self._vector_of(memory_id)
            if vec is None:
                return
        if sign > 0:
            total += vec
        else:
            total -= vec

    def _resum(self, sid: int) -> None:
        """The sum of a session of two or more memories from its members' vectors."""
        if self._members.get(sid, 0) < 2:
            return
        group = self._group[sid]
        vectors = [v for t in self._times[sid] for i in self._at[(group, t)] if (v := self._vector_of(i)) is not None]
        if vectors:
            self._sum[sid] = np.sum(np.asarray(vectors, dtype=np.float32), axis=0)
