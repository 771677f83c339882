"""The operator's views of stored memories, computed from one shard's records and
store, and merged across shards: pages of a listing, one memory in full, counts,
export pages.

Pure functions over ``nodes`` (memory id -> its latest version, as a shard mirrors
its store) and a :class:`~memorybus.storage.base.Store`; no Ray, no model. The shard
serves them to a running bus (:mod:`memorybus.shard.reads`,
:mod:`memorybus.shard.transfer`), and :mod:`memorybus.operator.offline` serves the same
functions straight from a data directory no bus holds, so both paths give the same
answers by construction. None of them writes anything.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memorybus.errors import InvalidRequest
from memorybus.memory.codec import encode_node
from memorybus.memory.events import Event
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus, evolve
from memorybus.scopes import Scope
from memorybus.storage.base import Store
from memorybus.transfer import ExportedSlot, LoggedEvent
from memorybus.transfer import within as scope_within

#: memories named per shard in ``stats()["most_recalled"]``
MOST_RECALLED = 10


# ------------------------------------------------------------------ listing
@dataclass(slots=True)
class MemoryPage:
    """One page of :meth:`MemoryBus.list_memories`: the memories, and the cursor to
    pass for the next page (``None`` when this page is the last)."""

    memories: list[MemoryNode] = field(default_factory=list)
    cursor: str | None = None


def encode_cursor(node: MemoryNode) -> str:
    return f"{node.created_at!r}/{node.id}"


def decode_cursor(cursor: str) -> tuple[float, str]:
    stamp, sep, memory_id = cursor.partition("/") if isinstance(cursor, str) else ("", "", "")
    try:
        value = float(stamp)
    except ValueError:
        value = math.nan
    if not sep or not memory_id or not math.isfinite(value):
        raise InvalidRequest("cursor", "is not a cursor returned by list_memories")
    return value, memory_id


def as_enums(enum: Any, values: Sequence[Any] | None, name: str) -> list[Any]:
    """``values`` (one or many) as members of ``enum``; [] for None. InvalidRequest
    naming ``name`` for a value that is not one."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    try:
        return [enum(v) for v in values]
    except (ValueError, TypeError):
        raise InvalidRequest(name, f"unknown value in {list(values)!r}") from None


@dataclass(frozen=True, slots=True)
class Listing:
    """What a listing asks for, beside its context and scope: the keyword filters of
    :meth:`MemoryBus.list_memories` (the bus client and the offline reader,
    :class:`memorybus.operator.offline.DirectReader`, both build one)."""

    key_prefix: str | None = None
    kinds: Sequence[MemoryKind | str] | None = None
    statuses: Sequence[MemoryStatus | str] | None = None
    limit: int = 100
    cursor: str | None = None
    within: Scope | None = None
    since: float | None = None
    until: float | None = None

    def filters(self) -> dict[str, Any]:
        """The arguments checked (InvalidRequest naming the bad one) and turned into the
        filters each shard applies (:meth:`memorybus.shard.reads.Reads.list_memories`)."""
        limit, key_prefix = self.limit, self.key_prefix
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidRequest("limit", "must be an int between 1 and 10000")
        if key_prefix is not None and (not isinstance(key_prefix, str) or not key_prefix):
            raise InvalidRequest("key_prefix", "must be a non-empty string or None")
        if self.within is not None and not isinstance(self.within, Scope):
            raise InvalidRequest("within", "must be a Scope or None")
        for name, value in (("since", self.since), ("until", self.until)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise InvalidRequest(name, "must be epoch seconds or None")
        return {
            "key_prefix": key_prefix,
            "kinds": None if self.kinds is None else as_enums(MemoryKind, self.kinds, "kinds"),
            "statuses": None if self.statuses is None else as_enums(MemoryStatus, self.statuses, "statuses"),
            "limit": limit,
            "after": None if self.cursor is None else decode_cursor(self.cursor),
            "within": self.within,
            "since": self.since,
            "until": self.until,
        }


def select(
    nodes: Iterable[MemoryNode],
    now: float,
    *,
    visible: frozenset[str] | None = None,
    key_prefix: str | None = None,
    kinds: frozenset[MemoryKind] | None = None,
    statuses: frozenset[MemoryStatus],
    after: tuple[float, str] | None = None,
    within: Scope | None = None,
    since: float | None = None,
    until: float | None = None,
) -> list[MemoryNode]:
    """The memories that pass every filter (``visible``: scope keys, None for all),
    not expired at ``now``, in ``(created_at, id)`` order. One pass over ``nodes``."""
    found = [
        n
        for n in nodes
        if (visible is None or n.scope.key in visible)
        and n.status in statuses
        and (kinds is None or n.kind in kinds)
        and (key_prefix is None or (n.key or "").startswith(key_prefix))
        and (n.expires_at is None or n.expires_at > now)
        and (after is None or (n.created_at, n.id) > after)
        and (since is None or n.created_at >= since)
        and (until is None or n.created_at < until)
        and (within is None or scope_within(n.scope, within))
    ]
    found.sort(key=lambda n: (n.created_at, n.id))
    return found


def merge_pages(groups: Sequence[Sequence[MemoryNode]], limit: int) -> MemoryPage:
    """One page of at most ``limit`` from each shard's page (each at most ``limit`` long)."""
    merged = sorted((n for g in groups for n in g), key=lambda n: (n.created_at, n.id))
    page = merged[:limit]
    more = len(merged) > limit or any(len(g) == limit for g in groups)
    return MemoryPage(page, encode_cursor(page[-1]) if page and more else None)


# ------------------------------------------------------------------ counts
def shard_stats(name: str, nodes: Mapping[str, MemoryNode], store: Store) -> dict[str, Any]:
    """Counts of one shard: memories per scope, kind and status; event logs; facts;
    and its ``MOST_RECALLED`` most recalled memories ``[id, access_count, scope key]``
    (most first, ties by id; never-recalled ones left out)."""
    by_scope: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    by_status: Counter[str] = Counter()
    for node in nodes.values():
        by_scope[node.scope.key] += 1
        by_kind[node.kind.value] += 1
        by_status[node.status.value] += 1
    scopes = store.event_scopes()
    recalled = heapq.nsmallest(MOST_RECALLED, (n for n in nodes.values() if n.access_count > 0),
                               key=lambda n: (-n.access_count, n.id))  # fmt: skip
    return {
        "shard": name,
        "memories": len(nodes),
        "by_scope": dict(by_scope),
        "by_kind": dict(by_kind),
        "by_status": dict(by_status),
        "events": sum(store.last_seq(k) for k in scopes),
        "facts": len(store.all_slots()),
        "backend": store.backend,
        "most_recalled": [[n.id, n.access_count, n.scope.key] for n in recalled],
    }


def merge_stats(shards: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The bus's counts from its shards' (:func:`shard_stats`): totals, merged
    counters, the ``MOST_RECALLED`` most recalled overall, each shard's own under ``shards``."""
    total: dict[str, Any] = {"memories": 0, "events": 0, "facts": 0, "shards": list(shards)}
    for name in ("by_scope", "by_kind", "by_status"):
        merged: Counter[str] = Counter()
        for s in shards:
            merged.update(s[name])
        total[name] = dict(merged)
    for s in shards:
        for name in ("memories", "events", "facts"):
            total[name] += s[name]
    recalled = [entry for s in shards for entry in s.get("most_recalled", [])]
    total["most_recalled"] = sorted(recalled, key=lambda e: (-e[1], e[0]))[:MOST_RECALLED]
    return total


# --------------------------------------------------------------- one memory
@dataclass(slots=True)
class Inspection:
    """One memory as an operator sees it: as stored, which shard holds it, its history
    (events, oldest first) and the memories its relations name (provenance)."""

    node: MemoryNode
    shard: str
    history: list[Event] = field(default_factory=list)
    links: dict[str, list[MemoryNode]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)


def inspect(
    nodes: Mapping[str, MemoryNode], store: Store, memory_id: str, limit: int = 200
) -> tuple[MemoryNode, list[Event]] | None:
    """One memory as stored (no embedding) and the events of its history: its keyed
    fact's assertions, or the events of its scope that name it (latest ``limit``)."""
    node = nodes.get(memory_id)
    if node is None:
        return None
    if node.key:
        blobs = store.fact_events(node.scope.key, node.key)
    else:
        blobs, after = [], 0
        while batch := store.read_events(node.scope.key, after, 1000):
            blobs += [(s, b) for s, b in batch if memory_id.encode() in b]
            after = batch[-1][0]
    events = [Event.decode(blob, seq) for seq, blob in blobs]
    return evolve(node), [e for e in events if e.node.id == memory_id or node.key][-limit:]


def peek(nodes: Mapping[str, MemoryNode], ids: Sequence[str]) -> list[MemoryNode]:
    """The memories of ``ids`` held here (no embeddings), for provenance."""
    return [evolve(nodes[i]) for i in ids if i in nodes]


# ------------------------------------------------------------------ export
def export_nodes(
    nodes: Mapping[str, MemoryNode], store: Store, outer: Scope | None, after: str | None, limit: int
) -> tuple[list[bytes], str | None]:
    """Up to ``limit`` records (id order, after id ``after``) whose scope lies within
    ``outer``, each encoded with its embedding, version and access statistics as the
    store holds them; and the id to continue after (None at the end)."""
    ids = sorted(i for i, n in nodes.items() if scope_within(n.scope, outer) and (after is None or i > after))
    page = ids[:limit]
    blobs = [encode_node(n) for n in store.get_many(page) if n is not None]
    return blobs, (page[-1] if len(ids) > limit else None)


def export_events(
    store: Store, outer: Scope | None, scope_key: str | None, after: int, limit: int
) -> tuple[list[LoggedEvent], tuple[str, int] | None]:
    """Up to ``limit`` events of the scopes within ``outer``: scope by scope (sorted
    keys), in sequence order, starting after ``(scope_key, after)``; and the position
    to continue from (None at the end)."""
    scopes = [k for k in store.event_scopes() if scope_within(Scope.from_key(k), outer)]
    out: list[LoggedEvent] = []
    for key in scopes:
        if scope_key is not None and key < scope_key:
            continue
        start = after if key == scope_key else 0
        while len(out) < limit:
            events = store.read_events(key, start, limit - len(out))
            if not events:
                break
            out += [(key, seq, blob) for seq, blob in events]
            start = events[-1][0]
        if len(out) >= limit:
            return out, (key, start)
    return out, None


def export_slots(store: Store, outer: Scope | None) -> list[ExportedSlot]:
    """The fact heads within ``outer``, each with its fact's evidence (None if none)."""
    evidence = {(s, k): blob for s, k, blob in store.all_evidence()}
    return [(*s, evidence.get((s[0], s[1]))) for s in store.all_slots() if scope_within(Scope.from_key(s[0]), outer)]
