"""The operator's side of the client: export, import, counts, one memory in full.

Operation generators of :class:`~memorybus.client.MemoryBus` (see
:mod:`memorybus.client.operation`). These calls take no ``Context``: like
a backup tool reading the store's files, they see every memory whatever its scope.
They are meant for operators and tools (``memorybus export|import|stats|show``), not
for agents, whose reads go through :meth:`MemoryBus.recall` / ``list_memories`` and
the visibility rule.

- :meth:`export` writes a scope (and every scope inside it) or everything to a
  versioned msgpack file (:mod:`memorybus.transfer`), page by page from every shard,
  atomically (a temporary file renamed at the end). For an exact copy, pause writers:
  pages are read one after the other, not as one snapshot.
- :meth:`import_` reads and validates the whole file first (format, version, seal,
  digest, every record and reference, embedding dimension: see
  :mod:`memorybus.transfer`) and asks every shard what it would conflict with; a
  corrupted, edited, unsealed or foreign file, a memory id or fact head that is not of
  its scope, or any conflict, is refused with ``InvalidRequest`` and nothing is
  written. Then each shard stores its part as it was: ids, versions, access
  statistics, embeddings, fact histories and current values. Records already present
  with the same content are skipped, so an import interrupted part-way can be rerun,
  and a rerun writes nothing twice. The backends may differ (SQLite -> Redis and back).

Keys: ``export(path, key=k)`` seals the file with HMAC-SHA256 under ``k`` (bytes, at
least 16); ``import_(path, key=k)`` accepts only a file sealed under ``k``. Without a
key, ``import_`` refuses every file unless ``trusted=True`` (the caller vouches for it:
only its unkeyed digest is checked, which anyone who edits the file can recompute).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from memorybus.actors.runtime import Op, Within
from memorybus.client import identity
from memorybus.client.identity import require_operator
from memorybus.errors import InvalidRequest, MemoryNotFound
from memorybus.memory.model import RELATION_FIELDS, MemoryNode
from memorybus.operator.monitoring import mark_backup
from memorybus.scopes import Scope, shard_name
from memorybus.transfer import (
    EventDigests,
    ExportWriter,
    LoggedEvent,
    Slot,
    check_key,
    event_digest,
    read_export,
    record_digest,
)
from memorybus.views import Inspection, merge_stats

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle

_PAGE = 500  # memories per export/import call (with embeddings: about 1 MB)
_WAIT = 300  # seconds each page may take
_EVENTS_PAGE = 5000


# ------------------------------------------------------------------ export
def export(
    bus: BusHandle, path: str | os.PathLike[str], *, within: Scope | None = None, key: bytes | None = None
) -> Op[dict[str, int]]:
    """Write every memory whose scope lies within ``within`` (all when None), with the
    event history and fact heads of those scopes, to ``path``, sealed under ``key``
    when given; returns the counts. A full export (``within=None``) that finished is
    recorded as a backup (:func:`memorybus.operator.monitoring.mark_backup`, kind ``export``)."""
    if within is not None and not isinstance(within, Scope):
        raise InvalidRequest("within", "must be a Scope or None")
    auth = require_operator(bus, "export")
    key = check_key(key) if key is not None else identity.export_key(bus)
    handles = bus._shard_handles()
    header = {
        "namespace": bus.config.namespace,
        "embedding_dim": bus.config.vector_dim(),
        "within": list(within.as_tuple()) if within else None,
    }
    writer = ExportWriter(path, header, key=key)
    try:
        for shard in handles:
            after: str | None = None
            while True:
                (blobs, after) = (yield Within([shard.export_nodes.remote(auth, within, after, _PAGE)], _WAIT))[0]
                for blob in blobs:
                    writer.node(blob)
                if after is None:
                    break
        for shard in handles:
            position: tuple[str, int] | None = (None, 0)  # type: ignore[assignment]
            while position is not None:
                scope_key, seq = position
                page = shard.export_events.remote(auth, within, scope_key, seq, _EVENTS_PAGE)
                events, position = (yield Within([page], _WAIT))[0]
                for logged_scope, n, blob in events:
                    writer.event(logged_scope, n, blob)
        for slots in (yield Within([s.export_slots.remote(auth, within) for s in handles], _WAIT)):
            for slot in slots:
                writer.slot(*slot)
        counts = writer.finish()
    except BaseException:
        writer.abort()
        raise
    if within is None:  # a full export is a backup: its time feeds the backup-age metric
        mark_backup(bus.config, "export", time.time())
    return counts


# ------------------------------------------------------------------ import
def import_(
    bus: BusHandle, path: str | os.PathLike[str], *, key: bytes | None = None, trusted: bool = False
) -> Op[dict[str, int]]:
    """Restore an :meth:`export` file into this bus (sealed under ``key``, by default
    this bus's own export key, or any file with ``trusted=True``); returns what was
    written (all zero for a rerun)."""
    auth = require_operator(bus, "import")
    if key is None and not trusted:
        key = identity.export_key(bus)
    data = read_export(path, dim=bus.config.vector_dim(), key=key, trusted=trusted)
    handles = bus._shard_handles()
    count = len(handles)
    nodes: list[list[MemoryNode]] = [[] for _ in range(count)]
    for node in data.nodes:
        nodes[bus._router.shard_for(node.scope.key)].append(node)
    events: list[list[LoggedEvent]] = [[] for _ in range(count)]
    for scope_key, log in data.events.items():
        events[bus._router.shard_for(scope_key)] += [(scope_key, seq, blob) for seq, blob in log]
    slots: list[list[Slot]] = [[] for _ in range(count)]
    for slot in data.slots:
        slots[bus._router.shard_for(slot[0])].append(slot)
    digests = [(n.id, record_digest(n)) for n in data.nodes]
    checks = []
    for i, shard in enumerate(handles):
        owned = [n.id for n in nodes[i]]
        logs: EventDigests = {}
        for scope_key, seq, blob in events[i]:
            logs.setdefault(scope_key, []).append((seq, event_digest(blob)))
        checks.append(shard.import_conflicts.remote(auth, digests, owned, logs, slots[i]))
    conflicts = [c for found in (yield Within(checks, _WAIT)) for c in found]
    if conflicts:
        more = f" (and {len(conflicts) - 5} more)" if len(conflicts) > 5 else ""
        raise InvalidRequest(
            "import",
            f"{os.fspath(path)}: conflicts with what is stored: {'; '.join(conflicts[:5])}{more}; nothing was imported",
        )
    written: Counter[str] = Counter()
    for i, shard in enumerate(handles):
        parts: list[tuple[list[MemoryNode], list[LoggedEvent], list[Slot]]]
        parts = [(nodes[i][j : j + _PAGE], [], []) for j in range(0, len(nodes[i]), _PAGE)]
        parts += [([], events[i][j : j + _EVENTS_PAGE], []) for j in range(0, len(events[i]), _EVENTS_PAGE)]
        parts.append(([], [], slots[i]))
        evidence = {(s[0], s[1]): data.evidence[(s[0], s[1])] for s in slots[i] if (s[0], s[1]) in data.evidence}
        for part_nodes, part_events, part_slots in parts:
            ref = shard.import_records.remote(auth, part_nodes, part_events, part_slots,
                                              evidence if part_slots else None)
            written.update((yield Within([ref], _WAIT))[0])
    return {k: written.get(k, 0) for k in ("nodes", "events", "slots")}


# --------------------------------------------------------------- inspection
def stats(bus: BusHandle) -> Op[dict[str, Any]]:
    """Counts per shard and per scope: ``{"memories", "shards": [...], "by_scope",
    "by_kind", "by_status", "events", "facts"}`` (each shard's own counts in
    ``shards``)."""
    auth = require_operator(bus, "stats")
    shards = yield [s.stats.remote(auth) for s in bus._shard_handles()]
    return merge_stats(shards)


def hub_stats(bus: BusHandle) -> Op[list[dict[str, int]]]:
    """Each hub actor's totals over every org: events published and delivered,
    subscriptions, how many are replaying from the log and how many are parked
    (waiting for their target actor)."""
    auth = require_operator(bus, "hub_stats")
    totals = yield [bus._hub(p).totals.remote(auth) for p in range(bus.config.bus.partitions)]
    return list(totals)


def inspect(bus: BusHandle, memory_id: str) -> Op[Inspection]:
    """One memory, whatever its scope, with its history and provenance (the memories
    its ``parents``, ``children``, ``related``, ``contradicts`` and ``source_ids``
    name). Raises MemoryNotFound."""
    if not isinstance(memory_id, str) or not memory_id:
        raise InvalidRequest("memory_id", "must be a non-empty string")
    auth = require_operator(bus, "inspect")
    handles = bus._shard_handles()
    found = yield Within([s.inspect.remote(auth, memory_id) for s in handles], 120)
    for index, hit in enumerate(found):
        if hit is None:
            continue
        node, history = hit
        named = {name: list(getattr(node, name)) for name in RELATION_FIELDS if getattr(node, name)}
        ids = sorted({i for values in named.values() for i in values})
        known: dict[str, MemoryNode] = {}
        if ids:
            for group in (yield Within([s.peek.remote(auth, ids) for s in handles], 120)):
                known.update((n.id, n) for n in group)
        links = {name: [known[i] for i in values if i in known] for name, values in named.items()}
        return Inspection(node, shard_name(index), history, links, [i for i in ids if i not in known])
    raise MemoryNotFound(memory_id)
