"""The shard's audit trail: who read and wrote which memories, per org, hash-chained.

Writes: :meth:`AuditTrail.write_drafts` makes one entry per org a commit touches
(principal, operation, ids, content hashes; never content), and the store chains
them onto the log *in the same transaction* as the write (:meth:`Store.commit`): a
committed write always has its entry, and a write that did not commit has none. A
re-execution answered from its operation record adds no second entry.

Reads (recall, get, list, pinned, current fact, history): :meth:`AuditTrail.read`
buffers an entry in memory; :meth:`flush` appends the buffer in one transaction,
run by the shard's periodic flush (with access statistics, within about
``flush_seconds``) and on close. **Read entries buffered when the process crashes
are lost; write entries never are.**

Checkpoints: with a key, :meth:`flush` signs each org's chain head that moved since
the last checkpoint (at most once per ``checkpoint_seconds``) and stores it apart
from the log; :meth:`checkpoint` does so now (the shard does on close). Only the
newest checkpoint of a chain is needed to catch a cut tail or a re-hashed chain; the
stores keep the newest 100.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager

from memorybus.audit import Checkpoint, Draft, content_digest, principal_of, sign
from memorybus.clock import Clock
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Context
from memorybus.shard.records import store_or_keep
from memorybus.storage.base import Store, WriteBatch

#: the principal of operator calls made without a context (the operator's view)
OPERATOR = "operator"


def principal(owner: Context | str) -> str:
    """Who an operation acts for: a caller's principal, or the maintenance owner's name."""
    return principal_of(owner) if isinstance(owner, Context) else owner


class AuditTrail:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        lookup: Callable[[str], MemoryNode | None],
        *,
        flush_seconds: float = 1.0,
        key: bytes | None = None,
        checkpoint_seconds: float = 60.0,
    ) -> None:
        """``lookup``: a committed memory by id (the shard's mirror), for the content
        hash and org of a memory a write deletes. ``key``: the HMAC key checkpoints are
        signed with (None: no checkpoints); a flush signs at most once per
        ``checkpoint_seconds`` (closing the shard signs what moved since)."""
        self.store = store
        self.clock = clock
        self.lookup = lookup
        self.flush_seconds = flush_seconds
        self.key = key
        self._lock = threading.Lock()  # reads note entries on the reads thread
        self._pending: list[Draft] = []
        self._first = time.monotonic()
        self._moved = False  # whether a chain moved since the last checkpoint
        self.checkpoint_seconds = checkpoint_seconds
        self._last_checkpoint = -float("inf")  # monotonic time of the last checkpoint
        self._signed: dict[str, int] = {}  # org -> seq of its last checkpoint this process wrote

    # ------------------------------------------------------------------ writes
    def write_drafts(self, operation: str, who: str, batch: WriteBatch) -> list[Draft]:
        """One entry per org that ``batch`` writes: ids in batch order, each with the
        digest of its content (as written; for a delete, as it was)."""
        at = self.clock.now()
        by_org: dict[str, tuple[list[str], list[str]]] = {}

        def add(memory_id: str, node: MemoryNode | None) -> None:
            org = node.scope.org if node is not None else ""
            ids, hashes = by_org.setdefault(org, ([], []))
            ids.append(memory_id)
            hashes.append(content_digest(node.content) if node is not None else "")

        for n in batch.puts:
            add(n.id, n)
        for n, _ in batch.updates:
            add(n.id, n)
        for memory_id, _ in batch.deletes:
            add(memory_id, self.lookup(memory_id))
        if by_org:
            self._moved = True
        return [Draft(org or "-", at, who, operation, tuple(ids), tuple(h)) for org, (ids, h) in by_org.items()]

    # ------------------------------------------------------------------- reads
    def read(self, context: Context | None, operation: str, nodes: Iterable[MemoryNode]) -> None:
        """Note a read of ``nodes`` (by ``context``; None: the operator's view, one entry
        per org read). A read of nothing is noted too, under the caller's org."""
        at = self.clock.now()
        if context is not None:
            drafts = [Draft(context.org, at, principal_of(context), operation, tuple(n.id for n in nodes))]
        else:
            by_org: dict[str, list[str]] = {}
            for n in nodes:
                by_org.setdefault(n.scope.org, []).append(n.id)
            drafts = [Draft(org, at, OPERATOR, operation, tuple(ids)) for org, ids in by_org.items()]
        with self._lock:
            if not self._pending:
                self._first = time.monotonic()
            self._pending.extend(drafts)

    def due(self) -> bool:
        """Whether buffered reads (or, with a key, a moved chain) should be flushed now."""
        if self._pending:
            return time.monotonic() - self._first >= 0.5 * self.flush_seconds
        return self.key is not None and self._moved and self._checkpoint_due()

    def _checkpoint_due(self) -> bool:
        return time.monotonic() - self._last_checkpoint >= self.checkpoint_seconds

    def flush(self, *, wait: bool = True, outside: Callable[[], AbstractContextManager[None]] | None = None) -> int:
        """Append buffered read entries (one transaction); then, with a key, checkpoint
        the heads that moved. Returns how many entries were appended; entries a busy
        store (``wait=False``) or a failure did not take are kept for the next flush."""
        with self._lock:
            pending, self._pending = self._pending, []
        if pending:
            if not store_or_keep(pending, lambda: self.store.append_audit(pending, wait=wait), self._keep, outside):
                return 0
            self._moved = True
        if self.key is not None and self._moved and self._checkpoint_due():
            self.checkpoint()
        return len(pending)

    def _keep(self, pending: Sequence[Draft]) -> None:
        with self._lock:
            self._pending[:0] = pending  # before any noted since: chain order is read order

    # ------------------------------------------------------------- checkpoints
    def checkpoint(self, key: bytes | None = None, orgs: Sequence[str] | None = None) -> list[Checkpoint]:
        """Sign and store the current head of each org's chain (of ``orgs``; default:
        every org) that moved since this trail last signed it; returns the new ones."""
        key = key if key is not None else self.key
        if key is None:
            return []
        self._moved = False
        self._last_checkpoint = time.monotonic()
        made = []
        for org in orgs if orgs is not None else self.store.audit_orgs():
            seq, digest = self.store.audit_head(org)
            if seq == 0 or self._signed.get(org) == seq:
                continue
            cp = sign(key, org, seq, digest, self.clock.now())
            self.store.put_checkpoint(cp)
            self._signed[org] = seq
            made.append(cp)
        return made
