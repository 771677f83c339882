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
of its own (buckets of width ``gap``); a join relabels the smaller session, a split the
later side.

A session of two or more memories keeps the sum of its members' vectors, for the cosine of
the session as a whole with a query (:meth:`Sessions.scores`). The bookkeeping is kept
small (about 0.6 KB a memory when every memory is alone in its session, the worst case):
a session is a group, a count and one of its times; its other times are found by walking
from that one.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import numpy as np

from memorybus.retrieval.vectorcache import centroid_cosines

Group = Hashable

# a slot: the memories at one time of one group, ``[session, ids, key]`` (``ids`` one id, or
# a set of them; ``key`` the slot's ``(group, time)``, shared by the memories' entries)
_SID, _IDS, _KEY = 0, 1, 2
# a session: ``[group, memories, one of its times]``
_GROUP, _COUNT, _ANCHOR = 0, 1, 2


class Sessions:
    """Sessions by pauses of more than ``gap`` seconds, per group; see the module."""

    def __init__(self, gap: float, vector_of: Callable[[str], np.ndarray | None]) -> None:
        if not gap > 0 or not math.isfinite(gap):
            raise ValueError("gap must be a positive number of seconds")
        self.gap = float(gap)
        self._vector_of = vector_of
        self._next = itertools.count(1)
        self._buckets: dict[Group, dict[int, list[float]]] = {}  # sorted distinct times per bucket
        self._slots: dict[tuple[Group, float], list[Any]] = {}
        self._sessions: dict[int, list[Any]] = {}
        #: session of two or more memories -> the sum of its members' vectors, None while
        #: none of them has a vector (a session of one keeps none: most memories of a slow
        #: writer are alone, and their vectors are in the vector cache already)
        self._sum: dict[int, np.ndarray | None] = {}
        self._of: dict[str, tuple[Group, float]] = {}

    def reset(self) -> None:
        for d in (self._buckets, self._slots, self._sessions, self._sum, self._of):
            d.clear()

    def __len__(self) -> int:
        return len(self._of)

    # ------------------------------------------------------------------ reads
    def session(self, memory_id: str) -> int | None:
        """The session of a memory (a number, stable until a join or split moves it)."""
        key = self._of.get(memory_id)
        return None if key is None else self._slots[key][_SID]

    def size(self, session: int) -> int:
        """How many memories the session holds (0: no such session)."""
        found = self._sessions.get(session)
        return 0 if found is None else found[_COUNT]

    def scores(self, vector: np.ndarray, sessions: Sequence[int]) -> dict[int, float]:
        """Cosine of ``vector`` with the centroid (the mean of its members' vectors) of each
        of ``sessions`` that holds two or more memories."""
        return centroid_cosines(vector, {s: v for s in dict.fromkeys(sessions) if (v := self._sum.get(s)) is not None})

    def partition(self) -> set[frozenset[str]]:
        """Every session as the set of its memories (for checks; O(memories))."""
        out: dict[int, set[str]] = {}
        for memory_id, key in self._of.items():
            out.setdefault(self._slots[key][_SID], set()).add(memory_id)
        return {frozenset(v) for v in out.values()}

    # ----------------------------------------------------------------- writes
    def add(self, memory_id: str, group: Group, when: float, vector: np.ndarray | None = None) -> None:
        """Place a memory (``when``: its event time; ``vector``: its vector, else
        ``vector_of`` is asked); re-adding an id moves it."""
        if memory_id in self._of:
            self.remove(memory_id)
        when = float(when)
        slot = self._slots.get((group, when))
        if slot is not None:
            sid, ids = slot[_SID], slot[_IDS]
            if isinstance(ids, str):
                slot[_IDS] = {ids, memory_id}
            else:
                ids.add(memory_id)
        else:
            prev, nxt = self._near(group, when, -1), self._near(group, when, 1)
            joined = [self._slots[(group, t)][_SID] for t in (prev, nxt) if t is not None]
            self._insert_time(group, when)
            if not joined:
                sid = next(self._next)
                self._sessions[sid] = [group, 0, when]
            elif len(joined) == 2 and joined[0] != joined[1]:
                sid = self._join(joined[0], joined[1])
            else:
                sid = joined[0]
            key = (group, when)
            slot = self._slots[key] = [sid, memory_id, key]
        self._of[memory_id] = slot[_KEY]
        self._sessions[sid][_COUNT] += 1
        if sid in self._sum:
            self._shift(sid, memory_id, 1.0, vector)
        else:
            self._resum(sid)

    def remove(self, memory_id: str) -> None:
        key = self._of.pop(memory_id, None)
        if key is None:
            return
        group, when = key
        slot = self._slots[key]
        sid = slot[_SID]
        session = self._sessions[sid]
        self._shift(sid, memory_id, -1.0)
        session[_COUNT] -= 1
        if session[_COUNT] < 2:
            self._sum.pop(sid, None)
        ids = slot[_IDS]
        if not isinstance(ids, str):
            ids.discard(memory_id)
            if len(ids) == 1:
                slot[_IDS] = next(iter(ids))
            return  # the time stays
        del self._slots[key]
        self._remove_time(group, when)
        if session[_COUNT] == 0:
            del self._sessions[sid]
            return
        # the session's times nearest this one are within a gap of it, so in this session
        prev, nxt = self._near(group, when, -1), self._near(group, when, 1)
        if session[_ANCHOR] == when:
            session[_ANCHOR] = prev if prev is not None else nxt
        # both sides still in this session but now more than a gap apart: the later side leaves
        if prev is not None and nxt is not None and nxt - prev > self.gap:
            self._split(sid, group, nxt)
            session[_ANCHOR] = prev

    # -------------------------------------------------------------- internals
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

    def _walk(self, sid: int, group: Group, start: float, step: int) -> Iterator[float]:
        """The times of session ``sid`` from ``start`` on (excluded), one way."""
        t = self._near(group, start, step)
        while t is not None:
            slot = self._slots.get((group, t))
            if slot is None or slot[_SID] != sid:  # another session, or a time being placed
                return
            yield t
            t = self._near(group, t, step)

    def _times(self, sid: int) -> list[float]:
        group, _, anchor = self._sessions[sid]
        return [*self._walk(sid, group, anchor, -1), anchor, *self._walk(sid, group, anchor, 1)]

    def _ids(self, sid: int) -> Iterator[str]:
        group = self._sessions[sid][_GROUP]
        for t in self._times(sid):
            ids = self._slots[(group, t)][_IDS]
            if isinstance(ids, str):
                yield ids
            else:
                yield from ids

    def _join(self, a: int, b: int) -> int:
        """Merge two sessions of one group: the smaller's times move to the larger."""
        keep, gone = (a, b) if self._sessions[a][_COUNT] >= self._sessions[b][_COUNT] else (b, a)
        parts = [p for p in (self._part(keep), self._part(gone)) if p is not None]
        group = self._sessions[gone][_GROUP]
        for t in self._times(gone):
            self._slots[(group, t)][_SID] = keep
        self._sessions[keep][_COUNT] += self._sessions.pop(gone)[_COUNT]
        self._sum.pop(gone, None)
        self._sum[keep] = np.asarray(np.sum(parts, axis=0), dtype=np.float32) if parts else None
        return keep

    def _part(self, sid: int) -> np.ndarray | None:
        """What a session adds to a sum: its own sum, or the vector of its one memory."""
        if sid in self._sum:
            return self._sum[sid]
        group, count, anchor = self._sessions[sid]
        if count != 1:
            return None
        ids = self._slots[(group, anchor)][_IDS]
        vec = self._vector_of(ids if isinstance(ids, str) else next(iter(ids)))
        return None if vec is None else np.asarray(vec, dtype=np.float32)

    def _split(self, sid: int, group: Group, start: float) -> None:
        """The times of ``sid`` from ``start`` on (a run with no pause over the gap) become a
        new session."""
        new = next(self._next)
        session: list[Any] = [group, 0, start]
        self._sessions[new] = session
        for t in [start, *self._walk(sid, group, start, 1)]:
            slot = self._slots[(group, t)]
            slot[_SID] = new
            ids = slot[_IDS]
            for memory_id in (ids,) if isinstance(ids, str) else ids:
                session[_COUNT] += 1
                self._shift(sid, memory_id, -1.0)
        self._sessions[sid][_COUNT] -= session[_COUNT]
        if self._sessions[sid][_COUNT] < 2:
            self._sum.pop(sid, None)
        self._resum(new)

    def _shift(self, sid: int, memory_id: str, sign: float, vec: np.ndarray | None = None) -> None:
        """Add (``sign`` 1) or take (-1) a member's vector to or from the session's sum, if it keeps one."""
        if sid not in self._sum:
            return
        if vec is None:
            vec = self._vector_of(memory_id)
            if vec is None:
                return
        total = self._sum[sid]
        if total is None:  # the first member with a vector
            if sign > 0:
                self._sum[sid] = np.array(vec, dtype=np.float32)
            return
        if sign > 0:
            total += vec
        else:
            total -= vec

    def _resum(self, sid: int) -> None:
        """The sum of a session of two or more memories from its members' vectors."""
        if self.size(sid) < 2:
            return
        vectors = [v for i in self._ids(sid) if (v := self._vector_of(i)) is not None]
        self._sum[sid] = np.sum(np.asarray(vectors, dtype=np.float32), axis=0) if vectors else None
