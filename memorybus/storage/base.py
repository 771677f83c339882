"""The durable store contract.

A :class:`Store` holds the records of one memory shard. It is the source of
truth: every index is derived from it. All writes go through :meth:`Store.commit`,
which applies a :class:`WriteBatch` atomically (all operations or none) and is
durable when it returns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol, runtime_checkable

from memorybus.audit.chain import Draft
from memorybus.audit.checkpoint import Checkpoint
from memorybus.memory.model import MemoryNode


@dataclass(frozen=True, slots=True)
class SlotWrite:
    """Compare-and-set of a keyed fact's head: ``(scope_key, key)`` must be at
    ``expected_seq`` (0 when the slot is new); it becomes ``expected_seq + count``
    (``count`` assertions in one batch) pointing at ``head_id``. ``evidence``: the
    fact's weighed assertions (:mod:`memorybus.bus.evidence`, encoded), stored with the
    slot in the same transaction; None leaves what is stored."""

    scope_key: str
    key: str
    expected_seq: int
    head_id: str
    count: int = 1
    evidence: bytes | None = None


@dataclass(slots=True)
class WriteBatch:
    """Operations applied together by :meth:`Store.commit`.

    - ``puts``: new nodes, stored with the version they carry (normally 1). A put
      whose id already exists with an identical record is a no-op (so a retried
      write is idempotent); with a different record it is a conflict.
    - ``updates``: ``(node, expected_version)``; stored only if the current
      version equals ``expected_version``; ``node.version`` must be
      ``expected_version + 1``. Scope and key of a node never change.
    - ``deletes``: ``(id, expected_version)``; ``None`` deletes any version.
    - ``slots``: keyed-fact head moves (:class:`SlotWrite`), checked like updates.
    - ``events``: ``(scope_key, blob)`` appended to the scope's event log; the
      store assigns each a sequence number, increasing by one per scope, in
      commit order.
    - ``event_keys``: for each event (same order; empty for none), the keyed fact
      it records, or None: the store indexes those events by key, so a fact's
      history is read without scanning its scope's log.
    - ``op``: the operation id, recorded in the same transaction with ``op_result``
      (the operation's answer) and the events' sequence numbers. A batch whose
      ``op`` is already recorded applies nothing: :meth:`Store.commit` raises
      :class:`AlreadyApplied` with the record. ``attempt`` names this commit attempt
      (see :meth:`Store.resolve`).
    - ``audit``: audit entries (:class:`~memorybus.audit.Draft`) the store chains onto
      their orgs' audit chains in the same transaction (none when the op was applied).
    - ``more_ops``: further operations committed by this batch (a group commit of
      several callers' calls, see :mod:`memorybus.shard.factgroup`): ``(op, answer,
      indexes of their own events)``, each recorded like ``op``; one already recorded
      makes the commit raise :class:`AlreadyApplied` naming it. Only a store whose
      ``group_ops`` is true takes them.
    """

    puts: list[MemoryNode] = field(default_factory=list)
    updates: list[tuple[MemoryNode, int]] = field(default_factory=list)
    deletes: list[tuple[str, int | None]] = field(default_factory=list)
    slots: list[SlotWrite] = field(default_factory=list)
    events: list[tuple[str, bytes]] = field(default_factory=list)
    event_keys: list[str | None] = field(default_factory=list)
    op: str | None = None
    op_result: bytes = b""
    attempt: str = ""
    audit: list[Draft] = field(default_factory=list)
    more_ops: list[tuple[str, bytes, list[int]]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.puts or self.updates or self.deletes or self.slots or self.events)

    def ids(self) -> list[str]:
        return [n.id for n in self.puts] + [n.id for n, _ in self.updates] + [i for i, _ in self.deletes]


@dataclass(slots=True)
class Scrub:
    """What an erasure rewrites in place (see :meth:`Store.scrub`).

    - ``events``: per scope key, ``{seq: new payload}`` (the same event without content)
    - ``ops``: ``{operation key: new answer}`` (the same answer without content)
    - ``slots``: keyed facts ``(scope_key, key)`` dropped with their fact-event index
    - ``evidence``: ``{(scope_key, key): new evidence}`` of facts kept (an erased
      source's assertions taken out)
    """

    events: dict[str, dict[int, bytes]] = field(default_factory=dict)
    ops: dict[str, bytes] = field(default_factory=dict)
    slots: list[tuple[str, str]] = field(default_factory=list)
    evidence: dict[tuple[str, str], bytes] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(any(self.events.values()) or self.ops or self.slots or self.evidence)


class OpRecord(NamedTuple):
    """What a store recorded for an operation id: its answer and its events' sequences."""

    result: bytes
    seqs: list[int]


class AlreadyApplied(Exception):  # noqa: N818 - a signal between store and shard, never raised to callers
    """:meth:`Store.commit` of a batch whose operation id is already recorded: nothing
    was applied; ``record`` is what the first commit recorded; ``op`` the operation
    (the batch's ``op`` or one of its ``more_ops``)."""

    def __init__(self, record: OpRecord, op: str | None = None) -> None:
        super().__init__(record)
        self.record = record
        self.op = op


#: How long a store keeps operation records by default (seconds): a re-execution or a
#: client retry within this window is answered from the record.
DEFAULT_OP_RETENTION = 86400.0


@runtime_checkable
class Store(Protocol):
    """Durable records of one shard. Implementations: SqliteStore, RedisStore."""

    backend: str

    def commit(self, batch: WriteBatch) -> list[int]:
        """Apply ``batch`` atomically and durably; return the events' sequence numbers.

        Raises AlreadyApplied (nothing applied) when ``batch.op`` is already recorded;
        VersionConflict (nothing applied) when an update or delete finds
        another version, a put finds a different record under its id, or a slot
        is not at its expected sequence;
        MemoryNotFound when an update or delete names a missing id;
        StoreUnavailable when the backend fails (for a server store the batch may
        still commit later: see :meth:`resolve`).
        """
        ...

    def op_record(self, op: str) -> OpRecord | None:
        """The record of operation ``op`` if it committed (within the retention)."""
        ...

    def resolve(self, op: str, attempt: str) -> OpRecord | None:
        """Settle a commit attempt whose outcome is unknown (its commit call failed):
        the record if operation ``op`` committed; otherwise None, and from then on
        that ``attempt`` can never commit (a request still on its way to the server
        is fenced off), so None means "not applied", for good."""
        ...

    def get(self, memory_id: str) -> MemoryNode | None: ...

    def slot(self, scope_key: str, key: str) -> tuple[str | None, int]:
        """The head node id and sequence of a keyed fact (``(None, 0)`` if new)."""
        ...

    def fact_slot(self, scope_key: str, key: str) -> tuple[str | None, int, bytes | None]:
        """:meth:`slot` and the slot's stored evidence (None if none), read together."""
        ...

    def all_evidence(self) -> list[tuple[str, str, bytes]]:
        """Every fact slot's stored evidence: ``(scope_key, key, blob)``, sorted."""
        ...

    def read_events(self, scope_key: str, after: int = 0, limit: int = 1000) -> list[tuple[int, bytes]]:
        """Events of a scope with sequence > ``after``, in order, at most ``limit``."""
        ...

    def last_seq(self, scope_key: str) -> int:
        """The sequence number of the scope's latest event (0 if none)."""
        ...

    def confirm_reads(self) -> None:
        """Return once everything this store has shown a reader so far would survive a
        failover; StoreUnavailable when that cannot be confirmed now. A Redis master
        serves writes its replicas do not have yet, and a failover loses them and reuses
        their event sequence numbers: with ``wait_replicas`` this writes a marker and
        waits (``WAIT``) until replicas have it, and with it every earlier write. Stores
        without replicas return at once."""
        ...

    def fact_events(self, scope_key: str, key: str) -> list[tuple[int, bytes]]:
        """The events committed with ``event_keys`` ``key`` in the scope, in order."""
        ...

    def event_scopes(self) -> list[str]:
        """Every scope key that has an event log (sorted)."""
        ...

    def all_slots(self) -> list[tuple[str, str, str, int]]:
        """Every keyed-fact head: ``(scope_key, key, head_id, seq)``, sorted."""
        ...

    def get_many(self, ids: Sequence[str]) -> list[MemoryNode | None]: ...

    def iter_all(self, batch_size: int = 1000) -> Iterator[MemoryNode]:
        """Every record, for rebuilding indexes. Order unspecified."""
        ...

    def touch(self, stats: Mapping[str, tuple[int, float]], *, wait: bool = True) -> bool:
        """Add access counts and raise last_accessed: ``{id: (count, when)}``.

        Access statistics are not versioned; ids that no longer exist are ignored.
        ``wait=False``: give up at once, returning False with nothing written, when
        another write holds the store (a read path flushing on the side must not wait).
        """
        ...

    def count(self) -> int: ...

    # ----------------------------------------------------------- audit trail
    # One hash chain per org of this shard (see memorybus.audit); entries hold ids and
    # content hashes only. Appends happen in :meth:`commit` (``batch.audit``) or here.

    def append_audit(self, drafts: Sequence[Draft], *, wait: bool = True) -> bool:
        """Chain ``drafts`` onto their orgs' chains in one transaction (durable when it
        returns True). ``wait=False``: give up, returning False with nothing written,
        when another write holds the store."""
        ...

    def read_audit(self, org: str, after: int = 0, limit: int = 1000) -> list[tuple[int, bytes]]:
        """``org``'s stored audit entries in storage order: ``(position, blob)`` with
        position > ``after``, at most ``limit``; pass the last position to read on.
        Blobs as stored (a tampered one may not decode: :func:`memorybus.audit.verify`)."""
        ...

    def audit_orgs(self) -> list[str]:
        """Every org with an audit chain, head or checkpoint here (sorted): an org whose
        entries were all deleted is still listed, so verify finds the cut."""
        ...

    def audit_head(self, org: str) -> tuple[int, str]:
        """The seq and hash of ``org``'s last entry as the store's head records it
        (``(0, GENESIS)`` when none)."""
        ...

    def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Keep a signed checkpoint of a chain head, apart from the log."""
        ...

    def checkpoints(self, org: str) -> list[bytes]:
        """``org``'s checkpoints as stored (:func:`memorybus.audit.decode_checkpoint`)."""
        ...

    def meta(self) -> dict[str, str]:
        """The store's identity (namespace, shard, shard count, store id); empty if none."""
        ...

    def set_meta(self, items: Mapping[str, str]) -> None:
        """Record identity fields (durable when it returns)."""
        ...

    def clear(self) -> None:
        """Delete every record of this shard (tests and tooling)."""
        ...

    # erasure (see memorybus.shard.erase and memorybus.storage.scrub)
    def op_results(self) -> list[tuple[str, bytes]]:
        """Every operation record held now: ``(operation key, answer)``."""
        ...

    def scrub(self, scrub: Scrub) -> None:
        """Rewrite event payloads and operation answers in place (sequence numbers, ids
        and expiry kept) and drop fact slots with their fact-event index; idempotent."""
        ...

    def compact(self) -> None:
        """Make removed and rewritten bytes leave the backing files (SQLite: VACUUM and a
        WAL checkpoint with truncation; Redis: an append-only-file rewrite)."""
        ...

    def erase_job(self) -> bytes | None:
        """The unfinished erase job recorded here, if any."""
        ...

    def set_erase_job(self, job: bytes | None) -> None:
        """Record (durably, when it returns) or clear the erase job."""
        ...

    def close(self) -> None: ...
