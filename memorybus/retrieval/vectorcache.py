"""Each memory's vector in RAM, one contiguous block per scope key: exact cosines for recall."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import numpy as np

K = TypeVar("K")

def centroid_cosines(vector: np.ndarray, sums: Mapping[K, np.ndarray]) -> dict[K, float]:
    """Cosine of ``vector`` with each group's centroid, given the sum of its members'
    vectors (a sum points where the mean does)."""
    if not sums:
        return {}
    mat = np.stack(list(sums.values()))
    sims = (mat @ np.asarray(vector, dtype=np.float32)) / np.maximum(np.linalg.norm(mat, axis=1), 1e-9)
    return {k: float(v) for k, v in zip(sums, sims.tolist(), strict=True)}


#: rows a scope's block starts with (it doubles as it fills): a scope of one memory costs
#: a few rows, not a page
_FIRST_ROWS = 4


class _Block:
    """One scope's vectors, columns ``0..n-1`` of ``mat`` (``dim`` x capacity: a memory's
    vector is a column, its "row" the column's number); a removed memory's row stays
    (``ids[row] is None``, ``alive[row]`` false) until the block is compacted.

    Column-wise because recall's product ``vector @ mat`` then runs BLAS's
    non-transposed kernel: in a shard actor (one BLAS thread) at 10,000 vectors, with
    the block out of cache as it is after a query was embedded, 0.91 ms instead of
    1.48 ms for ``mat_rows @ vector`` over the same vectors stored row-wise."""

    __slots__ = ("alive", "gen", "ids", "key", "live", "mat", "n")

    def __init__(self, key: str, dim: int) -> None:
        self.key = key
        self.mat = np.zeros((dim, _FIRST_ROWS), dtype=np.float32)
        self.alive = np.zeros(_FIRST_ROWS, dtype=bool)
        self.ids: list[str | None] = []
        self.n = 0
        self.live = 0
        #: changes whenever rows move (grown into a new matrix, compacted)
        self.gen = 0

    def grow(self) -> None:
        rows = 2 * self.mat.shape[1]
        mat = np.zeros((self.mat.shape[0], rows), dtype=np.float32)
        mat[:, : self.n] = self.mat[:, : self.n]
        alive = np.zeros(rows, dtype=bool)
        alive[: self.n] = self.alive[: self.n]
        self.mat, self.alive = mat, alive
        self.gen += 1

    def append(self, memory_id: str, vec: np.ndarray) -> int:
        """Put ``memory_id``'s vector in the next row (grown first when full); that row."""
        if self.n >= self.mat.shape[1]:
            self.grow()
        row = self.n
        self.mat[:, row] = vec
        self.alive[row] = True
        self.ids.append(memory_id)
        self.n += 1
        self.live += 1
        return row

    def drop(self, row: int) -> None:
        """Mark ``row`` removed (its column stays until the block is compacted)."""
        self.ids[row] = None
        self.alive[row] = False
        self.live -= 1


class VectorCache:
    """Each memory's (contextual) vector, one block of rows per scope key.

    It lets recall score any candidate exactly (keyword-only candidates and
    thread neighbours get their true cosine, not a floor) and search the
    visible scopes exactly without an index round trip: a block is contiguous,
    so an exact search is one matrix-vector product per visible scope, with
    no gathering of rows (gathering 10,000 scattered rows cost about 25 times
    the product itself here). 1.5 KB per memory with MiniLM (154 MB per 100K
    memories), at most twice that while a block has room to grow.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._dim = 0
        self._blocks: dict[str, _Block] = {}
        self._where: dict[str, tuple[_Block, int]] = {}

    def __len__(self) -> int:
        return len(self._where)

    def rows(self) -> int:
        """Rows in use, live or dead (per scope: at most the live ones plus 16, or twice them)."""
        return sum(b.n for b in self._blocks.values())

    def add(self, memory_id: str, scope_key: str, vector: np.ndarray) -> None:
        """Cache ``memory_id``'s vector; a new vector of a cached memory replaces its row."""
        vec = np.asarray(vector, dtype=np.float32).reshape(-1)
        if self._dim not in (0, vec.shape[0]):
            return
        self._dim = vec.shape[0]
        where = self._where.get(memory_id)
        if where is not None and self._blocks.get(scope_key) is where[0]:
            where[0].mat[:, where[1]] = vec  # re-indexed: the same row, no new one
            return
        self.remove(memory_id)
        block = self._blocks.get(scope_key)
        if block is None:
            block = self._blocks[scope_key] = _Block(scope_key, self._dim)
        self._where[memory_id] = (block, block.append(memory_id, vec))

    def remove(self, memory_id: str) -> None:
        where = self._where.pop(memory_id, None)
        if where is None:
            return
        block, row = where
        block.drop(row)
        if not block.live:
            if self._blocks.get(block.key) is block:
                del self._blocks[block.key]
        elif block.n - block.live > max(16, block.live):
            self._compact(block)

    def _compact(self, block: _Block) -> None:
        """Drop the rows of removed memories: renumber the live ones ``0..live-1``."""
        keep = np.flatnonzero(block.alive[: block.n])
        block.mat[:, : len(keep)] = block.mat[:, keep]
        block.alive[:] = False
        block.alive[: len(keep)] = True
        block.ids = [block.ids[r] for r in keep.tolist()]
        block.n = len(keep)
        block.gen += 1
        for row, memory_id in enumerate(block.ids):
            if memory_id is not None:
                self._where[memory_id] = (block, row)

    def has(self, memory_id: str) -> bool:
        return memory_id in self._where

    def vector(self, memory_id: str) -> np.ndarray | None:
        where = self._where.get(memory_id)
        return None if where is None else where[0].mat[:, where[1]].copy()

    def live_count(self, scope_keys: Sequence[str]) -> int:
        blocks = self._blocks
        return sum(blocks[s].live for s in dict.fromkeys(scope_keys) if s in blocks)

    def scores(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Cosine (dot product of unit vectors) of ``vector`` with each known id."""
        get = self._where.get
        vec = np.asarray(vector, dtype=np.float32)
        by_block: dict[int, tuple[_Block, list[str], list[int]]] = {}
        for memory_id in ids:
            where = get(memory_id)
            if where is None:
                continue
            block, row = where
            group = by_block.get(id(block))
            if group is None:
                group = by_block[id(block)] = (block, [], [])
            group[1].append(memory_id)
            group[2].append(row)
        out: dict[str, float] = {}
        for block, members, rows in by_block.values():  # one gather and product per block
            out.update(zip(members, (vec @ block.mat[:, rows]).tolist(), strict=True))
        return out

    def search(self, vector: np.ndarray, scope_keys: Sequence[str], limit: int) -> list[tuple[str, float]]:
        """Exact top ``limit`` ``(id, cosine)`` over the live vectors of ``scope_keys``."""
        if limit <= 0:
            return []
        return self.scan(vector, scope_keys).top(limit)

    def scan(self, vector: np.ndarray, scope_keys: Sequence[str]) -> DenseScan:
        """The cosines of ``vector`` with every live vector of ``scope_keys``: one product
        per scope block, kept, so the top ones and any of those memories' cosines are
        then read off it (:class:`DenseScan`)."""
        vec = np.asarray(vector, dtype=np.float32)
        parts: list[tuple[_Block, int, np.ndarray]] = []
        for key in dict.fromkeys(scope_keys):
            block = self._blocks.get(key)
            if block is None:
                continue
            n = block.n
            sims = vec @ block.mat[:, :n]
            if block.live < n:  # removed rows wait for compaction: never rank them
                sims[~block.alive[:n]] = -np.inf
            parts.append((block, block.gen, sims))
        return DenseScan(self, vec, parts)


class DenseScan:
    """One query vector's cosines with every live vector of some scope blocks (see
    :meth:`VectorCache.scan`). Valid while the cache does not change (a recall reads
    it under the shard's state lock): a block that grew or was compacted since is
    scored again, never read off stale rows."""

    __slots__ = ("_cache", "_parts", "_vector")

    def __init__(self, cache: VectorCache, vector: np.ndarray,
                 parts: list[tuple[_Block, int, np.ndarray]]) -> None:  # fmt: skip
        self._cache, self._vector, self._parts = cache, vector, parts

    def top(self, limit: int) -> list[tuple[str, float]]:
        """The best ``limit`` ``(id, cosine)``, best first (ties by id)."""
        if limit <= 0:
            return []
        out: list[tuple[str, float]] = []
        for block, _, sims in self._parts:
            n = len(sims)
            top = np.argpartition(sims, n - limit)[n - limit :] if n > limit else np.arange(n)
            ids = block.ids
            for row, v in zip(top.tolist(), sims[top].tolist(), strict=True):
                if ids[row] is not None:  # a removed row (its cosine -inf) has no id
                    out.append((ids[row], v))
        out.sort(key=lambda x: (-x[1], x[0]))
        return out[:limit]

    def scores(self, ids: Sequence[str]) -> dict[str, float]:
        """The cosine of each known id: read off the scan for the blocks it covers (no
        gather of vectors), computed for the others (:meth:`VectorCache.scores`)."""
        scanned: dict[int, tuple[int, np.ndarray, list[str], list[int]]] = {
            id(block): (gen, sims, [], []) for block, gen, sims in self._parts
        }
        get = self._cache._where.get
        out: dict[str, float] = {}
        rest: list[str] = []
        for memory_id in ids:
            where = get(memory_id)
            if where is None:  # unknown: left out, as VectorCache.scores leaves it out
                continue
            block, row = where
            part = scanned.get(id(block))
            if part is not None and part[0] == block.gen and row < len(part[1]):
                part[2].append(memory_id)
                part[3].append(row)
            else:
                rest.append(memory_id)
        for _, sims, members, rows in scanned.values():  # one read of the scan per block
            if members:
                out.update(zip(members, sims[rows].tolist(), strict=True))
        if rest:
            out.update(self._cache.scores(self._vector, rest))
        return out
