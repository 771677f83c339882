"""Each memory's vector in RAM, partitioned by scope key: exact cosines for recall."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np


class VectorCache:
    """Each memory's (contextual) vector, partitioned by scope key.

    It lets recall score any candidate exactly (keyword-only candidates and
    thread neighbours get their true cosine, not a floor) and search small
    visible sets exactly without an index round trip. 1.5 KB per memory with
    MiniLM (154 MB per 100K memories).
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._mat = np.zeros((0, 0), dtype=np.float32)
        self._n = 0
        self._slot: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._parts: dict[str, array] = {}
        self._live: dict[str, int] = {}
        self._scope_of: list[str] = []
        self._dead = 0

    def __len__(self) -> int:
        return len(self._slot)

    def rows(self) -> int:
        """Rows in use, live or dead (bounded by twice the live ones, plus 64)."""
        return self._n

    def add(self, memory_id: str, scope_key: str, vector: np.ndarray) -> None:
        """Cache ``memory_id``'s vector; a new vector of a cached memory replaces its row."""
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self._mat.shape[1] not in (0, vec.shape[0]):
            return
        slot = self._slot.get(memory_id)
        if slot is not None and self._scope_of[slot] == scope_key:
            self._mat[slot] = vec  # re-indexed: the same row, no new one
            return
        self.remove(memory_id)
        if self._dead > max(64, len(self._slot)):
            self._compact()
        if self._n >= self._mat.shape[0]:
            grown = np.zeros((max(64, 2 * self._mat.shape[0]), vec.shape[0]), dtype=np.float32)
            if self._n:
                grown[: self._n] = self._mat[: self._n]
            self._mat = grown
        slot = self._n
        self._n += 1
        self._mat[slot] = vec
        self._slot[memory_id] = slot
        self._ids.append(memory_id)
        self._scope_of.append(scope_key)
        self._parts.setdefault(scope_key, array("i")).append(slot)
        self._live[scope_key] = self._live.get(scope_key, 0) + 1

    def remove(self, memory_id: str) -> None:
        slot = self._slot.pop(memory_id, None)
        if slot is None:
            return
        self._ids[slot] = None
        self._dead += 1
        scope = self._scope_of[slot]
        self._live[scope] -= 1
        part = self._parts[scope]
        if len(part) > 64 and self._live[scope] * 2 < len(part):
            self._parts[scope] = array("i", (s for s in part if self._ids[s] is not None))

    def _compact(self) -> None:
        """Drop the rows of removed memories: renumber the live ones ``0..n-1``."""
        live = [(memory_id, slot) for memory_id, slot in self._slot.items()]
        live.sort(key=lambda x: x[1])
        old = np.fromiter((s for _, s in live), dtype=np.int64, count=len(live))
        rows = max(64, 2 * len(live))
        mat = np.zeros((rows, self._mat.shape[1]), dtype=np.float32)
        mat[: len(live)] = self._mat[old]
        scope_of = [self._scope_of[s] for _, s in live]
        self._mat, self._n, self._dead = mat, len(live), 0
        self._slot = {memory_id: i for i, (memory_id, _) in enumerate(live)}
        self._ids = [memory_id for memory_id, _ in live]
        self._scope_of = scope_of
        self._parts = {}
        for i, scope in enumerate(scope_of):
            self._parts.setdefault(scope, array("i")).append(i)

    def has(self, memory_id: str) -> bool:
        return memory_id in self._slot

    def vector(self, memory_id: str) -> np.ndarray | None:
        slot = self._slot.get(memory_id)
        return None if slot is None else self._mat[slot].copy()

    def live_count(self, scope_keys: Sequence[str]) -> int:
        return sum(self._live.get(s, 0) for s in dict.fromkeys(scope_keys))

    def scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Cosine (dot product of unit vectors) of ``vector`` with each known id."""
        known = [(i, self._slot[i]) for i in ids if i in self._slot]
        if not known:
            return {}
        slots = np.fromiter((s for _, s in known), dtype=np.int64, count=len(known))
        sims = self._mat[slots] @ np.asarray(vector, dtype=np.float32)
        return {i: float(v) for (i, _), v in zip(known, sims, strict=True)}

    def search(self, vector: np.ndarray, scope_keys: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """Exact top ``limit`` ``(id, cosine)`` over the live vectors of ``scope_keys``."""
        parts = [np.frombuffer(self._parts[s], dtype=np.int32) for s in dict.fromkeys(scope_keys) if s in self._parts]
        if not parts or limit <= 0:
            return []
        slots = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if self._dead:  # removed slots keep their rows until compaction: never rank them
            ids = self._ids
            slots = slots[np.fromiter((ids[x] is not None for x in slots.tolist()), dtype=bool, count=len(slots))]
        sims = self._mat[slots] @ np.asarray(vector, dtype=np.float32)
        if len(slots) > limit:
            top = np.argpartition(-sims, limit - 1)[:limit]
            slots, sims = slots[top], sims[top]
        out = []
        for s, v in zip(slots.tolist(), sims.tolist(), strict=True):
            memory_id = self._ids[s]
            if memory_id is not None:
                out.append((memory_id, float(v)))
        out.sort(key=lambda x: (-x[1], x[0]))
        return out
