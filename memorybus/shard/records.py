"""The shard's records: its durable store and the in-memory mirror of what it holds.

The store is the source of truth. :class:`Records` keeps, for every committed
memory, its latest version without the embedding (``nodes``), the content-hash map
duplicate detection reads, and the access statistics recalls count until they are
flushed to the store (at most ``touch_flush_seconds`` later; a crash may lose that
window of statistics, never a memory).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

from memorybus.memory.model import MemoryNode, evolve
from memorybus.scopes import Scope
from memorybus.storage.base import Store

P = TypeVar("P")


def content_hash(node: MemoryNode) -> str:
    """The hash duplicate detection compares: the content, stripped."""
    return hashlib.blake2b(node.content.strip().encode(), digest_size=12).hexdigest()


class Records:
    def __init__(self, store: Store, touch_flush_seconds: float = 1.0) -> None:
        self.store = store
        self.touch_flush_seconds = touch_flush_seconds
        #: memory id -> its committed version, without the embedding
        self.nodes: dict[str, MemoryNode] = {}
        self._hashes: dict[tuple[str, str], set[str]] = {}
        #: one Scope object per scope, shared by its mirrored memories: recall reads every
        #: candidate's scope, and one shared object is in cache where 100,000 copies are not
        self._scopes: dict[Scope, Scope] = {}
        self._scope_uses: Counter[Scope] = Counter()  # mirrored memories per shared scope
        self._touches: dict[str, tuple[int, float]] = {}
        self._last_flush = time.monotonic()
        self._first_touch = self._last_flush
        #: whether a recall writes due statistics itself (False where a timer flushes
        #: them off the recall's path: the shard actor)
        self.flush_inline = True

    # ------------------------------------------------------------------ mirror
    def reset(self) -> None:
        self.nodes.clear()
        self._hashes.clear()
        self._scopes.clear()
        self._scope_uses.clear()

    def loaded(self) -> Iterator[MemoryNode]:
        """Every stored record (with its embedding), mirrored as it is read."""
        for node in self.store.iter_all():
            self.put(node)
            yield node

    def get(self, memory_id: str) -> MemoryNode | None:
        return self.nodes.get(memory_id)

    def put(self, node: MemoryNode) -> None:
        """Mirror a committed node (a new memory or a new version)."""
        old = self.nodes.get(node.id)
        if old is not None:
            self._unhash(old)
            self._unshare(old.scope)
        scope = self._scopes.setdefault(node.scope, node.scope)
        self._scope_uses[scope] += 1
        self.nodes[node.id] = evolve(node, embedding=None, scope=scope)
        self._hashes.setdefault((node.scope.key, content_hash(node)), set()).add(node.id)

    def pop(self, memory_id: str) -> MemoryNode | None:
        """Forget a deleted memory (and its pending access statistics)."""
        old = self.nodes.pop(memory_id, None)
        if old is not None:
            self._unhash(old)
            self._unshare(old.scope)
        self._touches.pop(memory_id, None)
        return old

    def twins(self, node: MemoryNode) -> list[MemoryNode]:
        """The memories of ``node``'s scope with the same content."""
        ids = self._hashes.get((node.scope.key, content_hash(node)), ())
        return [self.nodes[i] for i in ids if i in self.nodes]

    def _unshare(self, scope: Scope) -> None:
        """One memory fewer of ``scope`` mirrored: its shared object goes with its last one."""
        self._scope_uses[scope] -= 1
        if self._scope_uses[scope] <= 0:
            del self._scope_uses[scope]
            self._scopes.pop(scope, None)

    def _unhash(self, node: MemoryNode) -> None:
        """Drop ``node`` from the content-hash map (and its entry once empty: a memory
        rewritten many times leaves nothing behind)."""
        key = (node.scope.key, content_hash(node))
        ids = self._hashes.get(key)
        if ids is not None:
            ids.discard(node.id)
            if not ids:
                del self._hashes[key]

    # ------------------------------------------------------------------ access
    def touch(self, ids: Sequence[str], now: float) -> None:
        """Count one access of each of ``ids`` (cached at once, stored by :meth:`flush`)."""
        if ids and not self._touches:
            self._first_touch = time.monotonic()
        for memory_id in ids:
            node = self.nodes[memory_id]
            node.access_count += 1
            node.last_accessed = max(node.last_accessed, now)
            count, _ = self._touches.get(memory_id, (0, now))
            self._touches[memory_id] = (count + 1, now)
        if self.flush_inline and time.monotonic() - self._last_flush >= self.touch_flush_seconds:
            self.flush(wait=False)

    def touches_due(self, within: float | None = None) -> bool:
        """Whether pending access statistics must be written now to reach the store within
        ``within`` seconds (default ``touch_flush_seconds``) of the oldest pending access;
        a timer polls this at a fraction of that period."""
        if not self._touches:
            return False
        limit = self.touch_flush_seconds if within is None else within
        return time.monotonic() - self._first_touch >= 0.5 * limit

    def flush(
        self,
        *,
        wait: bool = True,
        outside: Callable[[], AbstractContextManager[None]] | None = None,
        then: Callable[[], object] | None = None,
    ) -> int:
        """Write pending access statistics to the store; returns how many nodes.
        ``wait=False`` (a recall flushing on the side): if a write holds the store,
        keep them for the next flush instead of waiting. ``outside``: a context the
        store write runs in (the shard's gate letting readers in while it commits);
        statistics counted meanwhile wait for the next flush. Statistics a write could
        not store (refused, or it raised) are kept for the next flush. ``then``: another
        store write run in the same ``outside`` (after the statistics' write, unless it
        raised); not run when there were no statistics to write."""
        pending, self._touches = self._touches, {}
        self._last_flush = time.monotonic()
        if not pending:
            return 0

        def write() -> bool:
            stored = self.store.touch(pending, wait=wait)
            if then is not None:
                then()
            return stored

        return len(pending) if store_or_keep(pending, write, self._keep, outside) else 0

    def _keep(self, pending: dict[str, tuple[int, float]]) -> None:
        """Put statistics back that a flush did not store (with any counted since)."""
        for memory_id, (count, when) in pending.items():
            if memory_id not in self.nodes:
                continue  # deleted since: nothing to count
            more, later = self._touches.get(memory_id, (0, when))
            self._touches[memory_id] = (count + more, max(when, later))


def store_or_keep(
    pending: P,
    write: Callable[[], bool],
    keep: Callable[[P], None],
    outside: Callable[[], AbstractContextManager[None]] | None = None,
) -> bool:
    """Run the store write ``write`` of ``pending`` (inside ``outside()`` when given: the
    shard's gate letting readers in while it commits); True when it stored them. When it
    raises (re-raised) or stores nothing (False), ``keep`` takes ``pending`` back for the
    next flush."""
    try:
        with outside() if outside is not None else contextlib.nullcontext():
            stored = write()
    except BaseException:
        keep(pending)
        raise
    if not stored:
        keep(pending)
    return stored
