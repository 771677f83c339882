"""Memories by event time (``valid_from``), per scope key: the ones a named time covers.

Recall asks it for the memories inside a time the query names ("on 8 May",
"last week"), so that they are candidates even when their words do not match
the query. Sorted arrays per scope key; ``add``/``remove`` cost O(log n) to
find and O(n) to shift (a memmove), ``between`` O(log n + hits).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence


class Timeline:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._times: dict[str, list[tuple[float, str]]] = {}
        self._at: dict[str, tuple[str, float]] = {}

    def __len__(self) -> int:
        return len(self._at)

    def add(self, memory_id: str, scope_key: str, when: float) -> None:
        self.remove(memory_id)
        bisect.insort(self._times.setdefault(scope_key, []), (when, memory_id))
        self._at[memory_id] = (scope_key, when)

    def remove(self, memory_id: str) -> None:
        entry = self._at.pop(memory_id, None)
        if entry is None:
            return
        scope_key, when = entry
        items = self._times[scope_key]
        i = bisect.bisect_left(items, (when, memory_id))
        if i < len(items) and items[i] == (when, memory_id):
            items.pop(i)
        if not items:
            del self._times[scope_key]

    def holds(self, scope_keys: Sequence[str]) -> bool:
        """Whether any memory of ``scope_keys`` is here (every indexed memory is)."""
        times = self._times
        return any(key in times for key in scope_keys)

    def count(self, scope_keys: Sequence[str], start: float, end: float) -> int:
        """How many memories of ``scope_keys`` have an event time in ``[start, end)``."""
        total = 0
        for key in dict.fromkeys(scope_keys):
            items = self._times.get(key)
            if items:
                total += bisect.bisect_left(items, (end, "")) - bisect.bisect_left(items, (start, ""))
        return total

    def between(self, scope_keys: Sequence[str], start: float, end: float) -> list[str]:
        """The ids of ``scope_keys`` with an event time in ``[start, end)``, in time order."""
        found: list[tuple[float, str]] = []
        for key in dict.fromkeys(scope_keys):
            items = self._times.get(key)
            if items:
                found += items[bisect.bisect_left(items, (start, "")) : bisect.bisect_left(items, (end, ""))]
        found.sort()
        return [i for _, i in found]
