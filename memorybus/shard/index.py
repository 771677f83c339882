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

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from memorybus.errors import IndexUnavailable
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus
from memorybus.retrieval.structure import RecallIndex
from memorybus.retrieval.vectorcache import VectorCache
from memorybus.storage.vectors import EdgeVectorIndex, VectorIndex, point_payload

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
        self, index: VectorIndex, lookup: Callable[[str], MemoryNode | None], *, k1: float = 1.2, b: float = 0.75,
        session_gap: float = 1800.0,
    ) -> None:
        self.index = index
        self.backend = index.backend
        self.structure = RecallIndex(k1, b, session_gap)
        self._cache: VectorCache = self.structure.vectors
        self._lookup = lookup
        #: the index missed a change (it failed after a commit): rebuild before trusting it
        self.stale = False
        #: a checkpoint on disk says the index holds what the records hold now
        self._checkpointed = False
        self._changed_at = time.monotonic()
        #: while a copy is built elsewhere (:meth:`begin_build`): the changes made since
        self._journal: list[Callable[[VectorIndex], None]] | None = None
        self._closed = False
        #: points changed since the index was last built elsewhere; an index opened or
        #: rebuilt at start counts all its points (whether it was built is not recorded)
        self.changes_since_build = 0

    def _change(self, what: str, apply: Callable[[VectorIndex], None], n: int) -> None:
        if self.stale:
            return  # the rebuild takes every change from the store
        self._changed_at = time.monotonic()
        try:
            if self._checkpointed:  # the checkpoint goes before the index changes
                self.index.drop_checkpoint()
                self._checkpointed = False
            apply(self.index)
        except (IndexUnavailable, OSError) as exc:
            log.warning("vector index failed (%s): %s; serving from memory until it is rebuilt", what, exc)
            self.stale = True
            return
        self.changes_since_build += n
        if self._journal is not None:
            self._journal.append(apply)

    # ------------------------------------------------------------------ writes
    def upsert(self, nodes: Sequence[MemoryNode]) -> None:
        if nodes:
            batch = tuple(nodes)
            self._change("upsert", lambda ix: ix.upsert(batch), len(batch))

    def set_status(self, ids: Sequence[str], status: MemoryStatus) -> None:
        if ids:
            chosen = tuple(ids)
            self._change("set_status", lambda ix: ix.set_status(chosen, status), len(chosen))

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            gone = tuple(ids)
            self._change("delete", lambda ix: ix.delete(gone), len(gone))

    # ------------------------------------------------- a build in another process
    def buildable(self) -> bool:
        """Whether the on-disk index can be built elsewhere and swapped in (Qdrant Edge)."""
        return isinstance(self.index, EdgeVectorIndex)

    def begin_build(self, dest: str) -> bool:
        """Copy the index to ``dest`` (to be built by another process) and journal every
        change from now on. Call it where no change runs (the shard's write gate). False
        (nothing copied) when the index is stale or cannot be built elsewhere."""
        if self.stale or not isinstance(self.index, EdgeVectorIndex):
            return False
        self.index.copy_to(dest)
        self._journal = []
        self.changes_since_build = 0
        return True

    def finish_build(self, built: str | None, open_copy: Callable[[str], VectorIndex]) -> bool:
        """Serve from ``built`` (the copy, optimized elsewhere) after replaying the changes
        journaled since :meth:`begin_build` onto it; ``built=None`` abandons the build.
        Call it where no change runs. False when the build was abandoned, or overtaken
        (a rebuild from the store, a failure that made the index stale): the old index
        serves on. A failure of the swap itself leaves the index stale (rebuilt from the
        store by :meth:`repair`)."""
        journal, self._journal = self._journal, None
        overtaken = self.stale or self._closed
        if built is None or journal is None or overtaken or not isinstance(self.index, EdgeVectorIndex):
            return False
        try:
            copy = open_copy(built)
            try:
                for apply in journal:
                    apply(copy)
            finally:
                copy.close()
        except (IndexUnavailable, OSError) as exc:
            log.warning("vector index build not used: replaying %d changes onto it failed: %s", len(journal), exc)
            return False
        try:
            self.index.drop_checkpoint()
            self._checkpointed = False
            self._changed_at = time.monotonic()
            self.index.swap_in(built)
        except (IndexUnavailable, OSError) as exc:
            log.warning("vector index swap failed: %s; serving from memory until it is rebuilt", exc)
            self.stale = True
            return False
        return True

    def load(self, nodes: Iterable[MemoryNode]) -> None:
        """Reset the index and fill it with ``nodes`` (those with an embedding): the
        rebuild from the store. Raises IndexUnavailable (the index stays stale)."""
        self._invalidate()
        self.index.reset()
        self._fill(nodes, {})

    def _invalidate(self) -> None:
        """Before the index is brought back to the store: stale until that is done."""
        self._journal = None  # a build under way no longer matches: abandoned
        self.stale = True
        self._checkpointed = False

    def _fill(self, nodes: Iterable[MemoryNode], held: dict[str, dict[str, object]]) -> None:
        """Write each of ``nodes`` (those with an embedding) whose point is not in ``held``
        (the points in the index: id -> payload) as its record says, delete the points
        left in ``held`` (their records are gone); the index is current again."""
        batch: list[MemoryNode] = []
        for node in nodes:
            if node.embedding is None:
                continue
            if held:  # the point there, if any, by the index's spelling of its id
                there = held.pop(node.id if node.id in held else _point_id(node.id), None)
                if there == point_payload(node):
                    continue
            batch.append(node)
            if len(batch) >= _BATCH:
                self.index.upsert(batch)
                batch = []
        self.index.upsert(batch)
        self.index.delete(list(held))
        self.stale = False
        self.changes_since_build = self.index.count()

    def open(self, digest: str, count: int, nodes: Callable[[], Iterable[MemoryNode]]) -> bool:
        """At start: keep the on-disk index if its checkpoint is ``digest`` (the store's
        records, see :func:`index_digest`) and it holds ``count`` points; else bring it to
        ``nodes()`` (checked in place, :meth:`reconcile`, or rebuilt when that fails) and
        checkpoint it. A checkpoint exists only while the index holds
        what it says: the first change after it removes it (:meth:`_change`). Returns
        whether the index was trusted. Raises IndexUnavailable when it cannot be rebuilt."""
        saved = self.index.checkpoint()
        try:
            if saved is not None and saved == digest and self.index.count() == count:
                self.stale, self._checkpointed = False, True  # still true: kept until a change
                self.changes_since_build = count
                return True
        except IndexUnavailable:
            pass  # unreadable: rebuilt below
        if self.buildable():
            try:
                self.reconcile(nodes())
                self.save(digest)
                return False
            except IndexUnavailable as exc:
                log.warning("vector index could not be checked against the store (%s): rebuilding it", exc)
        self.load(nodes())
        self.save(digest)
        return False

    def reconcile(self, nodes: Iterable[MemoryNode]) -> None:
        """Make the on-disk index hold exactly ``nodes`` (those with an embedding) without
        rebuilding it: every point's id and payload is read back (:func:`point_payload`:
        scope, kind, status and version; a new vector always comes with a new version),
        points whose record is missing, differs or is gone are written or deleted. What a
        start does when the checkpoint does not vouch for the index (after a crash): reading
        the payloads back costs a few microseconds a point, writing every point again tens.
        Raises IndexUnavailable (the index stays stale; the caller rebuilds it)."""
        if not isinstance(self.index, EdgeVectorIndex):
            raise IndexUnavailable(self.backend, "only a Qdrant Edge index is checked in place")
        self._invalidate()
        self._fill(nodes, self.index.payloads())

    def save(self, digest: str) -> bool:
        """Record that the index holds what ``digest`` describes (a current index only)."""
        if self.stale:
            return False
        if self._checkpointed:
            return True
        try:
            self.index.save_checkpoint(digest)
        except IndexUnavailable as exc:
            log.warning("vector index checkpoint failed: %s (the next start rebuilds it)", exc)
            return False
        self._checkpointed = True
        return True

    def checkpoint_due(self, idle: float) -> bool:
        """Whether the index changed since its checkpoint and then stayed still ``idle``
        seconds (a timer checkpoints it then, so a crash restarts without a rebuild)."""
        return not self.stale and not self._checkpointed and time.monotonic() - self._changed_at >= idle

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
    def search(self, vector: np.ndarray, limit: int, *, scope_keys: Sequence[str],
               kinds: Sequence[MemoryKind] | None = None,
               statuses: Sequence[MemoryStatus] | None = None) -> list[tuple[str, float]]:  # fmt: skip
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

    def close(self, digest: str | None = None) -> None:
        """Close; with ``digest`` (what the records hold now), checkpoint first, so the
        next start can trust the index instead of rebuilding it."""
        if digest is not None:
            self.save(digest)
        self._closed = True  # a build that ends after this is not swapped in
        self.index.close()


def _point_id(memory_id: str) -> str:
    """A memory id as the vector index gives it back (a UUID's canonical form), so a
    point is never taken for one whose record is gone because of how its id is written."""
    try:
        return str(uuid.UUID(memory_id))
    except ValueError:
        return memory_id


def index_digest(nodes: Iterable[MemoryNode], dim: int) -> str:
    """What the vector index of these records holds, in a few bytes: a sum of one hash
    per record over what its point carries (id, version, status, kind, scope: a new
    vector always comes with a new version), order-independent."""
    total, count = 0, 0
    for n in nodes:
        raw = f"{n.id}\x1f{n.version}\x1f{n.status.value}\x1f{n.kind.value}\x1f{n.scope.key}"
        total += int.from_bytes(hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=16).digest())
        count += 1
    return f"v1:{dim}:{count}:{total % (1 << 128):032x}"
