"""Operation ids: every write of the shard commits exactly once.

A mutating call carries an operation id (the client makes one per call; Ray
re-sends the same arguments when it re-runs a call after the actor died, and a
client may retry with the same id). The shard commits the call's effect together
with a record of the operation and of its answer, in one store transaction (one
SQLite transaction, one Lua script). A re-execution finds the record and returns
the recorded answer instead of acting again: a retried ``assert_fact`` says
``created`` again, not ``reinforced``; a retried ``forget`` says it succeeded.

Records are keyed by a digest of (method, caller's scope, operation id), so an id
answers only the same call of the same caller, and kept ``op_retention`` seconds.

A commit whose call failed (a Redis timeout) may still be applied by the server.
The shard keeps such an attempt "in doubt" and settles it before its next call:
:meth:`Store.resolve` either finds the record (the write happened: the shard
adopts it into its cache and index and publishes its events) or fences the
attempt off for good (it never happened). The caller got :class:`OutcomeUnknown`
with the operation id; retrying with that id returns the outcome, never a copy.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from memorybus.errors import InvalidRequest, OperationTimeout, OutcomeUnknown, StoreUnavailable
from memorybus.memory.codec import decode, encode, node_from_dict, node_to_dict
from memorybus.memory.events import Event
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Context
from memorybus.shard.auditing import AuditTrail, principal
from memorybus.shard.gate import Gate
from memorybus.shard.results import FactResult
from memorybus.storage.base import AlreadyApplied, Store, WriteBatch

T = TypeVar("T")
_OUTCOME = "outcome"
MAX_OP_CHARS = 200


def check_op(op: object) -> str | None:
    """An operation id as given by a caller: None, or a non-empty printable string."""
    if op is None:
        return None
    if not isinstance(op, str) or not op or len(op) > MAX_OP_CHARS or not op.isprintable():
        raise InvalidRequest("op_id", f"must be a printable string of 1 to {MAX_OP_CHARS} characters")
    return op


def new_op(op_id: str | None) -> str:
    """The operation id of a mutating client call: the caller's (checked), else a fresh one."""
    return check_op(op_id) or uuid.uuid4().hex


def tag_op(op: str, inner: Generator[Any, Any, T]) -> Generator[Any, Any, T]:
    """Drive the client operation ``inner``; an OutcomeUnknown or OperationTimeout it
    raises names the caller's operation id (what a retry passes as ``op_id``)."""
    try:
        return (yield from inner)
    except OutcomeUnknown as exc:
        raise OutcomeUnknown(exc.backend, exc.detail, op) from None
    except OperationTimeout as exc:
        raise OperationTimeout(exc.seconds, op) from None


def op_key(method: str, owner: Context | str, op: str) -> str:
    """The store's key of an operation record: small, fixed size, bound to the caller
    (a context, or a name for maintenance) and the method."""
    who = owner.scope.key if isinstance(owner, Context) else f"\x00{owner}"
    raw = "\x1f".join((method, who, op)).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def _fact_to_dict(r: FactResult) -> dict[str, Any]:
    return {"node": node_to_dict(r.node, with_embedding=False), "current": r.current, "previous": r.previous,
            "outcome": r.outcome, "fact_seq": r.fact_seq, "write_id": r.write_id}


def encode_outcome(value: Any) -> bytes:
    """The answer of a write, for its operation record (embeddings left out)."""
    if value is None or isinstance(value, bool):
        payload: dict[str, Any] = {"t": "plain", "v": value}
    elif isinstance(value, MemoryNode):
        payload = {"t": "node", "v": node_to_dict(value, with_embedding=False)}
    elif isinstance(value, dict):
        payload = {"t": "plain", "v": value}
    elif all(isinstance(x, MemoryNode) for x in value):
        payload = {"t": "nodes", "v": [node_to_dict(x, with_embedding=False) for x in value]}
    elif all(isinstance(x, FactResult) for x in value):
        payload = {"t": "facts", "v": [_fact_to_dict(x) for x in value]}
    else:  # pragma: no cover - a programming error
        raise TypeError(f"cannot record an answer of type {type(value).__name__}")
    return encode(_OUTCOME, payload)


def decode_outcome(blob: bytes) -> Any:
    payload = decode(blob, _OUTCOME)
    kind, value = payload["t"], payload["v"]
    if kind == "node":
        return node_from_dict(value)
    if kind == "nodes":
        return [node_from_dict(d) for d in value]
    if kind == "facts":
        return [FactResult(node_from_dict(d["node"]), d["current"], d["previous"], d["outcome"], d["fact_seq"],
                           d["write_id"]) for d in value]
    return value


@dataclass(frozen=True, slots=True)
class OpCall:
    """One mutating call: its record ``key`` and the caller's ``op`` id (None: the
    shard made one up, and nothing can re-execute it); the ``method`` and ``who``
    (the principal) its audit entry names."""

    key: str
    op: str | None
    method: str = ""
    who: str = ""


@dataclass(slots=True)
class Part:
    """One call of a group commit: its operation, its answer, its own events (indexes
    into the commit's) and what it wrote (its audit entries'; None: the whole batch)."""

    call: OpCall
    result: Any
    events: list[int]
    wrote: WriteBatch | None = None


class Recorded(Exception):  # noqa: N818 - a signal inside the shard, never raised to callers
    """A group commit found the operation of its part ``index`` already recorded:
    nothing was applied; ``answer`` is that operation's recorded answer."""

    def __init__(self, index: int, answer: Any) -> None:
        super().__init__(index)
        self.index = index
        self.answer = answer


@dataclass(slots=True)
class _InDoubt:
    """A commit attempt whose call failed: it may or may not have been applied."""

    attempt: str
    events: list[Event]
    apply: Callable[[], None]


class Commits:
    """The shard's commits: each write with its events and operation record in one
    store transaction, attempts in doubt settled before the next call, committed
    events handed to ``on_events`` (the live push: it must not raise)."""

    def __init__(
        self,
        store: Store,
        gate: Gate,
        on_events: Callable[[list[Event]], None] | None = None,
        audit: AuditTrail | None = None,
    ) -> None:
        self.store = store
        self.gate = gate
        self.on_events = on_events
        #: writes the audit entries each commit carries (None: no audit trail)
        self.audit = audit
        self.in_doubt: dict[str, _InDoubt] = {}

    def call(self, method: str, owner: Context | str, op: str | None) -> OpCall:
        """The operation of this call. Settles attempts in doubt first, so the call
        sees every write the store applied."""
        self.settle()
        op = check_op(op)
        who = principal(owner)
        if op is None:
            return OpCall(uuid.uuid4().hex, None, method, who)  # an internal id: still settles a failed commit
        return OpCall(op_key(method, owner, op), op, method, who)

    def recorded(self, call: OpCall) -> tuple[bool, Any]:
        """``(True, answer)`` if this operation already committed, else ``(False, None)``.

        A re-execution computes its write again from the current state; where that
        state would make it fail or do nothing (the memory it deleted is gone, the
        version it bumped has moved on), the shard asks here before answering. A
        re-execution that reaches its commit is answered by the store itself
        (:class:`AlreadyApplied`), so the common path costs no extra read."""
        if call.op is None:
            return False, None
        record = self.store.op_record(call.key)
        return (False, None) if record is None else (True, decode_outcome(record.result))

    def commit(
        self, call: OpCall, batch: WriteBatch, events: Sequence[Event], result: T, apply: Callable[[], None]
    ) -> T:
        """Commit ``batch`` with ``events`` and the record of operation ``call`` (answer:
        ``result``) atomically; then ``apply`` the write to cache and index and hand
        the sequenced events to ``on_events``. Returns ``result``, or the recorded
        answer when the operation had already committed."""
        try:
            self.commit_group([Part(call, result, [])], batch, events, apply)
        except Recorded as done:
            return cast(T, done.answer)
        return result

    def commit_group(
        self, parts: Sequence[Part], batch: WriteBatch, events: Sequence[Event], apply: Callable[[], None]
    ) -> list[Any]:
        """:meth:`commit` of several calls' writes in one store transaction: each part's
        operation recorded with its own answer and events, each audited as its caller's.
        Returns the parts' answers; raises :class:`Recorded` (nothing applied) when a
        part's operation had already committed, OutcomeUnknown naming the first part's
        operation when the store failed (the attempt is in doubt for all of them)."""
        first = parts[0]
        evs = list(events)
        batch.events = [(e.scope_key, e.seal()) for e in evs]  # encoded once: the log's and every push's
        batch.event_keys = [e.node.key if "fact_seq" in e.data else None for e in evs]
        batch.op, batch.op_result, batch.attempt = first.call.key, encode_outcome(first.result), uuid.uuid4().hex[:16]
        batch.more_ops = [(p.call.key, encode_outcome(p.result), p.events) for p in parts[1:]]
        if self.audit is not None:  # chained by the store in the write's own transaction
            audit = self.audit
            batch.audit = [d for p in parts for d in audit.write_drafts(p.call.method, p.call.who, p.wrote or batch)]
        try:
            with self.gate.committing():  # reads go on while the store commits
                seqs = self.store.commit(batch)
        except AlreadyApplied as done:
            index = next((i for i, p in enumerate(parts) if p.call.key == done.op), 0)
            raise Recorded(index, decode_outcome(done.record.result)) from None
        except StoreUnavailable as exc:
            self.in_doubt[first.call.key] = _InDoubt(batch.attempt, evs, apply)
            raise OutcomeUnknown(exc.backend, exc.detail, first.call.op or "") from None
        self._applied(evs, seqs, apply)
        return [p.result for p in parts]

    def _applied(self, events: list[Event], seqs: Sequence[int], apply: Callable[[], None]) -> None:
        apply()
        for event, seq in zip(events, seqs, strict=False):
            event.seq = seq
        if events and self.on_events is not None:
            self.on_events(list(events))  # live push, best effort (it never raises): the log has them

    def settle(self, *, strict: bool = True) -> None:
        """Decide every commit attempt in doubt: adopt it if the store applied it, else
        fence it off. ``strict``: raise StoreUnavailable while the store cannot tell."""
        for key, pending in list(self.in_doubt.items()):
            try:
                record = self.store.resolve(key, pending.attempt)
            except StoreUnavailable:
                if strict:
                    raise
                return
            del self.in_doubt[key]
            if record is not None:
                self._applied(pending.events, record.seqs, pending.apply)
