"""The export file: a versioned msgpack stream of a bus's records (pure, no Ray).

Layout, one msgpack map after another::

    {"format": "memorybus-export", "version": 1, "created_at": ..., "namespace": ...,
     "embedding_dim": 384, "within": [org, user, agent, session] | None,
     "seal": "hmac-sha256" | None}
    {"t": "node",  "d": <node envelope, with its embedding, version and access stats>}
    {"t": "event", "scope": <scope key>, "seq": n, "d": <event envelope>}
    {"t": "slot",  "scope": <scope key>, "key": <fact key>, "head": <id>, "seq": n,
     "e": <the fact's evidence, encoded> (when it has some)}
    ...
    {"t": "end", "nodes": N, "events": M, "slots": S, "digest": <blake2b of all above>,
     "mac": <HMAC-SHA256 of all above, under the export key> (sealed files only)}

The end record counts and digests everything before it, so a truncated or corrupted
file is recognised before anything is imported. The digest is unkeyed: anyone can
edit a file and digest it again. Only the ``mac`` (a file *sealed* with a key of at
least 16 bytes: ``ExportWriter(..., key=...)``) tells that a file is as its exporter
wrote it: :func:`read_export` given ``key`` refuses a file that is not sealed, or
sealed under another key, or edited (even with a recomputed digest). Without a key it
refuses every file unless ``trusted=True`` (the caller vouches for the file: only the
digest is checked).

:func:`read_export` also validates the whole file (every envelope decoded, every node
validated) and its references: every memory id is a memory id of its memory's scope
(:mod:`memorybus.memory.ids`: canonical, carrying the scope's bucket; no empty or aliased
ids), no id twice, every event's memory in the event's scope, every fact head (slot)
an id of its scope and, when the file holds that memory, a memory of the same scope
and key. It raises :class:`~memorybus.errors.InvalidRequest` naming the first problem.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import msgpack

from memorybus.bus.evidence import KeyEvidence
from memorybus.errors import InvalidRequest, MemoryBusError
from memorybus.memory import ids
from memorybus.memory.codec import decode, decode_node, encode_node
from memorybus.memory.events import Event
from memorybus.memory.model import MemoryNode, evolve
from memorybus.scopes import Scope

FORMAT = "memorybus-export"
VERSION = 1
SEAL = "hmac-sha256"
#: the shortest export key accepted (bytes)
MIN_KEY_BYTES = 16

#: a keyed fact's head: ``(scope key, fact key, current memory id, fact sequence)``
Slot = tuple[str, str, str, int]
#: a head as exported: with the fact's evidence (:mod:`memorybus.bus.evidence`, encoded) or None
ExportedSlot = tuple[str, str, str, int, bytes | None]
#: an event of a scope's log, encoded: ``(scope key, sequence, envelope)``
LoggedEvent = tuple[str, int, bytes]
#: per scope key, ``(sequence, digest)`` of each event: the history an import must match
EventDigests = dict[str, list[tuple[int, str]]]


def record_digest(node: MemoryNode) -> str:
    """What identifies a stored record across stores: everything a writer set and its
    version (not its access statistics, which recall changes, nor its embedding)."""
    plain = evolve(node, access_count=0, last_accessed=0.0, embedding=None)
    return hashlib.blake2b(encode_node(plain, with_embedding=False), digest_size=16).hexdigest()


def event_digest(blob: bytes) -> str:
    return hashlib.blake2b(blob, digest_size=16).hexdigest()


def event_key(blob: bytes) -> str | None:
    """The keyed fact an event records (indexed by key in the store), or None."""
    event = Event.decode(blob, 0)
    return event.node.key if "fact_seq" in event.data else None


def check_key(key: object) -> bytes | None:
    """An export key as given (None: no key), or InvalidRequest when it is not bytes of
    at least :data:`MIN_KEY_BYTES`."""
    if key is None:
        return None
    if not isinstance(key, bytes | bytearray) or len(key) < MIN_KEY_BYTES:
        raise InvalidRequest("key", f"an export key is bytes, at least {MIN_KEY_BYTES} long (e.g. os.urandom(32))")
    return bytes(key)


def within(node_scope: Scope, outer: Scope | None) -> bool:
    """Whether ``node_scope`` lies inside ``outer`` (each field ``outer`` sets is equal)."""
    if outer is None:
        return True
    return all(not o or o == n for o, n in zip(outer.as_tuple(), node_scope.as_tuple(), strict=True))


class ExportWriter:
    """Writes an export to ``path`` atomically: a temporary file renamed at the end,
    so an interrupted export never leaves a file that looks complete."""

    def __init__(self, path: str | os.PathLike[str], header: dict[str, Any], *, key: bytes | None = None) -> None:
        key = check_key(key)
        self.path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        fd, self._tmp = tempfile.mkstemp(prefix=".memorybus-export-", dir=folder)
        self._file: IO[bytes] = os.fdopen(fd, "wb")
        self._digest = hashlib.blake2b(digest_size=32)
        self._mac = hmac.new(key, digestmod=hashlib.sha256) if key is not None else None
        self.counts = {"nodes": 0, "events": 0, "slots": 0}
        self._write({"format": FORMAT, "version": VERSION, "created_at": time.time(), **header,
                     "seal": SEAL if key is not None else None})

    def _write(self, record: dict[str, Any]) -> None:
        blob = msgpack.packb(record, use_bin_type=True)
        self._digest.update(blob)
        if self._mac is not None:
            self._mac.update(blob)
        self._file.write(blob)

    def node(self, blob: bytes) -> None:
        self._write({"t": "node", "d": blob})
        self.counts["nodes"] += 1

    def event(self, scope_key: str, seq: int, blob: bytes) -> None:
        self._write({"t": "event", "scope": scope_key, "seq": seq, "d": blob})
        self.counts["events"] += 1

    def slot(self, scope_key: str, key: str, head: str, seq: int, evidence: bytes | None = None) -> None:
        record: dict[str, Any] = {"t": "slot", "scope": scope_key, "key": key, "head": head, "seq": seq}
        if evidence:
            record["e"] = evidence
        self._write(record)
        self.counts["slots"] += 1

    def finish(self) -> dict[str, int]:
        end: dict[str, Any] = {"t": "end", **self.counts, "digest": self._digest.hexdigest()}
        if self._mac is not None:
            end["mac"] = self._mac.hexdigest()
        self._file.write(msgpack.packb(end, use_bin_type=True))
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self._tmp, self.path)
        return dict(self.counts)

    def abort(self) -> None:
        self._file.close()
        if os.path.exists(self._tmp):
            os.unlink(self._tmp)


@dataclass
class ExportData:
    """A validated export: its header, nodes, events per scope (in order), slots and
    the slots' evidence."""

    header: dict[str, Any]
    nodes: list[MemoryNode] = field(default_factory=list)
    events: dict[str, list[tuple[int, bytes]]] = field(default_factory=dict)
    slots: list[Slot] = field(default_factory=list)
    evidence: dict[tuple[str, str], bytes] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        return {
            "nodes": len(self.nodes),
            "events": sum(len(v) for v in self.events.values()),
            "slots": len(self.slots),
        }


def _records(path: str) -> Iterator[tuple[dict[str, Any], bytes]]:
    """Each record with its packed bytes (re-packed: msgpack is canonical for these maps)."""
    with open(path, "rb") as f:
        unpacker = msgpack.Unpacker(f, raw=False, strict_map_key=True, max_buffer_size=1 << 30)
        for record in unpacker:
            if not isinstance(record, dict):
                raise _refuse(path, "not a memorybus export (a record is not a map)")
            yield record, msgpack.packb(record, use_bin_type=True)


def _refuse(path: str, reason: str) -> InvalidRequest:
    return InvalidRequest("import", f"{path}: {reason}; nothing was imported")


def read_export(
    path: str | os.PathLike[str], *, dim: int | None = None, key: bytes | None = None, trusted: bool = False
) -> ExportData:
    """Read and validate a whole export file (see the module docstring).

    With ``key``: the file must be sealed under that key (its MAC checked in constant
    time). Without: the file is refused unless ``trusted=True``. Raises InvalidRequest
    when the file is not an export, of another format version, unsealed or sealed
    under another key, truncated, corrupted (digest or counts differ), edited, holds an
    invalid record or reference, or when ``dim`` is given and its embeddings have
    another dimension.
    """
    path = os.fspath(path)
    key = check_key(key)
    if key is None and not trusted:
        raise InvalidRequest("import", f"{path}: no key given: pass the key the file was exported with "
                             "(or trusted=True for a file you vouch for); nothing was imported")
    if not os.path.isfile(path):
        raise InvalidRequest("import", f"{path}: no such file")
    digest = hashlib.blake2b(digest_size=32)
    mac = hmac.new(key, digestmod=hashlib.sha256) if key is not None else None
    data: ExportData | None = None
    end: dict[str, Any] | None = None
    try:
        for record, blob in _records(path):
            if end is not None:
                raise _refuse(path, "records after the end record")
            if data is None:
                if record.get("format") != FORMAT:
                    raise _refuse(path, "not a memorybus export")
                if record.get("version") != VERSION:
                    raise _refuse(path, f"export format version {record.get('version')!r}, expected {VERSION}")
                data = ExportData(header=record)
            elif record.get("t") == "end":
                end = record
                continue
            else:
                _take(data, record, path)
            digest.update(blob)
            if mac is not None:
                mac.update(blob)
    except MemoryBusError:
        raise
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise _refuse(path, f"unreadable ({type(exc).__name__}: {exc})") from None
    if data is None:
        raise _refuse(path, "empty file")
    if end is None:
        raise _refuse(path, "truncated (no end record)")
    if mac is not None:
        sealed = end.get("mac")
        if not isinstance(sealed, str) or data.header.get("seal") != SEAL:
            raise _refuse(path, "not sealed with a key (exported without one, or its seal removed)")
        if not hmac.compare_digest(sealed, mac.hexdigest()):
            raise _refuse(path, "its seal does not match this key (another key, or the file was edited)")
    if end.get("digest") != digest.hexdigest():
        raise _refuse(path, "corrupted (digest mismatch)")
    if {k: end.get(k) for k in ("nodes", "events", "slots")} != data.counts:
        raise _refuse(path, "corrupted (record counts differ)")
    problem = reference_problem(data)
    if problem is not None:
        raise _refuse(path, problem)
    if dim is not None:
        for node in data.nodes:
            size = 0 if node.embedding is None else len(node.embedding)
            if size != dim:
                raise _refuse(path, f"memory {node.id} has a {size}-dimensional embedding, this bus uses {dim} "
                              "(another model?)")
    return data


def id_problem(memory_id: str, scope: Scope) -> str | None:
    """Why ``memory_id`` cannot name a memory of ``scope``, or None (see :mod:`memorybus.memory.ids`)."""
    if not isinstance(memory_id, str) or not memory_id:
        return "an empty id"
    if not ids.fits(memory_id, scope):
        return f"id {memory_id!r} is not a memory id of scope {scope} (ids are canonical and carry their scope)"
    return None


def slot_problem(slot: Slot, head: MemoryNode | None) -> str | None:
    """Why a fact head cannot be restored, or None: its key must be a key, its head an
    id of its scope and, when ``head`` (the memory it names) is known, a memory of the
    same scope and key."""
    scope_key, key, head_id, seq = slot
    if not key or seq < 1:
        return f"fact head {key!r} in {Scope.from_key(scope_key)} has an empty key or position {seq}"
    problem = id_problem(head_id, Scope.from_key(scope_key))
    if problem is not None:
        return f"fact {key!r}: its head has {problem}"
    if head is not None and (head.scope.key != scope_key or head.key != key):
        return f"fact {key!r} in {Scope.from_key(scope_key)}: its head {head_id} is a memory of another scope or key"
    return None


def reference_problem(data: ExportData) -> str | None:
    """The first reference of ``data`` that an import must not restore, or None."""
    nodes: dict[str, MemoryNode] = {}
    for node in data.nodes:
        problem = id_problem(node.id, node.scope)
        if problem is not None:
            return f"memory with {problem}"
        if node.id in nodes:
            return f"memory {node.id} appears twice"
        nodes[node.id] = node
    for scope_key, log in data.events.items():
        for seq, blob in log:
            event = Event.decode(blob, seq)
            problem = id_problem(event.node.id, event.node.scope)
            if problem is not None:
                return f"event {seq} of {Scope.from_key(scope_key)} names a memory with {problem}"
    heads: set[tuple[str, str]] = set()
    for slot in data.slots:
        if (slot[0], slot[1]) in heads:
            return f"fact {slot[1]!r} in {Scope.from_key(slot[0])} has two heads"
        heads.add((slot[0], slot[1]))
        problem = slot_problem(slot, nodes.get(slot[2]))
        if problem is not None:
            return problem
    return None


def _take(data: ExportData, record: dict[str, Any], path: str) -> None:
    kind = record.get("t")
    try:
        if kind == "node":
            node = decode_node(record["d"]).validate()
            if node.version < 1:
                raise InvalidRequest("import", f"memory {node.id} has version {node.version}")
            data.nodes.append(node)
        elif kind == "event":
            scope_key, seq, blob = str(record["scope"]), int(record["seq"]), bytes(record["d"])
            Scope.from_key(scope_key)
            event = Event.decode(blob, seq)
            if event.node.scope.key != scope_key:
                raise InvalidRequest("import", f"event {seq} is filed under another scope")
            log = data.events.setdefault(scope_key, [])
            if seq < 1 or (log and seq <= log[-1][0]):
                raise InvalidRequest("import", f"events of a scope out of order at {seq}")
            log.append((seq, blob))
        elif kind == "slot":
            Scope.from_key(str(record["scope"]))
            data.slots.append((str(record["scope"]), str(record["key"]), str(record["head"]), int(record["seq"])))
            if "e" in record:
                blob = bytes(record["e"])
                KeyEvidence.from_plain(decode(blob, "evidence"))  # readable, or the file is refused
                data.evidence[(data.slots[-1][0], data.slots[-1][1])] = blob
        else:
            raise InvalidRequest("import", f"unknown record type {kind!r}")
    except MemoryBusError as exc:
        raise _refuse(path, f"invalid record: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise _refuse(path, f"invalid record: {exc!r}") from None
