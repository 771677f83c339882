"""The shard's vector index, kept serving when it fails.

The index is derived data: the store is the source of truth. A write whose store
commit succeeded is acknowledged even when the index then fails to take it
(:class:`~memorybus.errors.IndexUnavailable`): the index is marked *stale*, every
nearest-neighbour query is answered exactly from the shard's in-memory vectors
(:class:`~memorybus.retrieval.vectorcache.VectorCache`, which every committed write
reaches), and :meth:`SearchIndex.repair` rebuilds the index from the store at the
next write or timer flush. A durable write is therefore never reported as failed,
and never invisible until a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from memorybus.errors import IndexUnavailable
from memorybus.model import MemoryKind, MemoryNode, MemoryStatus
from memorybus.retrieval.structure import RecallIndex
from memorybus.retrieval.vectorcache import VectorCache
from memorybus.storage.vectors import VectorIndex

log = logging.getLogger("memorybus")

#: points per upsert while rebuilding
_BATCH = 1000


class SearchIndex:
    """The shard's recall index: the on-disk :class:`VectorIndex` and the in-memory
    ``structure`` (keywords, each memory's vector, threads, pinned memories), with a
    fallback: exact search over the in-memory vectors while the on-disk index is stale.

    ``lookup`` gives the cached node of an id (for the kind and status filters of an
    exact search)."""

    def __init__(
        self, index: VectorIndex, lookup: Callable[[str], MemoryNode | None], *, k1: float = 1.2, b: float = 0.75
    ) -> None:
        self.index = index
        self.backend = index.backend
        self.structure = RecallIndex(k1, b)
        self._cache: VectorCache = self.structure.vectors
        self._lookup = lookup
        #: the index missed a change (it failed after a commit): rebuild before trusting it
        self.stale = False

    def _change(self, what: str, apply: Callable[[], None]) -> None:
        if self.stale:
            return  # the rebuild takes every change from the store
        try:
            apply()
        except IndexUnavailable as exc:
            log.warning("vector index failed (%s): %s; serving from memory until it is rebuilt", what, exc)
            self.stale = True

    # ------------------------------------------------------------------ writes
    def upsert(self, nodes: Sequence[MemoryNode]) -> None:
        if nodes:
            self._change("upsert", lambda: self.index.upsert(nodes))

    def set_status(self, ids: Sequence[str], status: MemoryStatus) -> None:
        if ids:
            self._change("set_status", lambda: self.index.set_status(ids, status))

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            self._change("delete", lambda: self.index.delete(ids))

    def load(self, nodes: Iterable[MemoryNode]) -> None:
        """Reset the index and fill it with ``nodes`` (those with an embedding): the
        rebuild from the store. Raises IndexUnavailable (the index stays stale)."""
        self.stale = True
        self.index.reset()
        batch: list[MemoryNode] = []
        for node in nodes:
            if node.embedding is None:
                continue
            batch.append(node)
            if len(batch) >= _BATCH:
                self.index.upsert(batch)
                batch = []
        self.index.upsert(batch)
        self.stale = False

    def repair(self, nodes: Callable[[], Iterable[MemoryNode]]) -> bool:
        """Rebuild a stale index from ``nodes()`` (the store's records); True when the
        index is current. A failed rebuild leaves it stale, to try again later."""
        if not self.stale:
            return True
        try:
            self.load(nodes())
        except IndexUnavailable as exc:
            log.warning("vector index rebuild failed: %s; still serving from memory", exc)
            return False
        log.info("vector index rebuilt from the store")
        return True

    # ------------------------------------------------------------------- reads
    def search(
        self,
        vector: np.ndarray,
        limit: int,
        *,
        scope_keys: Sequence[str],
        kinds: Sequence[MemoryKind] | None = None,
        statuses: Sequence[MemoryStatus] | None = None,
    ) -> list[tuple[str, float]]:
        """Top ``limit`` ``(id, cosine)`` in ``scope_keys``: from the index, or exactly
        from memory while the index is stale (or fails now)."""
        if not self.stale:
            try:
                return self.index.search(vector, limit, scope_keys=scope_keys, kinds=kinds, statuses=statuses)
            except IndexUnavailable as exc:
                log.warning("vector index search failed: %s; serving from memory until it is rebuilt", exc)
                self.stale = True
        kind_set = None if not kinds else {MemoryKind(k) for k in kinds}
        status_set = None if not statuses else {MemoryStatus(s) for s in statuses}
        out: list[tuple[str, float]] = []
        for memory_id, cosine in self._cache.search(vector, scope_keys, self._cache.live_count(scope_keys)):
            node = self._lookup(memory_id)
            if node is None or (kind_set is not None and node.kind not in kind_set):
                continue
            if status_set is not None and node.status not in status_set:
                continue
            out.append((memory_id, cosine))
            if len(out) >= limit:
                break
        return out

    def count(self) -> int:
        return self.index.count()

    def close(self) -> None:
        self.index.close()
