"""A CrewAI memory storage on the bus: ``Memory(storage=BusStorage(bus, ctx), ...)``.

CrewAI's unified ``crewai.Memory`` keeps its records in a pluggable storage that meets
its ``StorageBackend`` protocol (``crewai.memory.storage.backend``): save, vector search,
delete, update, listings, scope and category views, reset, and async twins.
:class:`BusStorage` meets it structurally over a :class:`~memorybus.MemoryBus` and a
:class:`~memorybus.Context`, so a crew's memory is durable, shared with every agent of the
bus whose context sees its scope, and subject to the bus's visibility rule. This module
imports CrewAI only when it builds a ``MemoryRecord`` to return.

Guarantees:

- **Where.** Each record is one episodic memory (``decay_rate=0``, event time = the
  record's ``created_at``: records are never folded together as repeats) of
  ``context.resolve_scope(level)`` (default: the agent level, else user, else org), with
  the id ``derived_id(scope, "crewai/<name>/<record id>")``, its content as content,
  CrewAI's importance ``i`` as ``1 + 9 i``, and CrewAI's scope path, categories, metadata
  (made JSON-safe), source, privacy and creation time in ``structured["crewai"]``.
- **Reads** (search, get_record, list_records, count, scope and category views) see the
  records of every scope the context may see that a storage of the same ``name`` wrote
  (another agent's org-level crew memory included); memories it did not write are skipped.
- **Search is the bus's recall.** CrewAI passes a query *vector*; the storage's
  :attr:`BusStorage.embedder` (the bus's model) remembers which text gave each vector it
  returned, and the search recalls that text, so pass ``Memory(embedder=storage.embedder)``.
  A vector it did not make raises :class:`~memorybus.InvalidRequest`. The score is the
  hit's ``relevance`` (0..1); ``min_score`` is the recall's ``min_relevance`` (a floor: no
  hit under it is returned); scope, category and metadata filters apply after the recall,
  which asks for more hits until ``limit`` pass or the bus has no more.
- **Writes** (save, update, delete, reset) touch only the memories this storage wrote in
  its own scope; ``save`` of a record id already stored replaces it (an upsert), as
  ``update`` does. ``save`` is one bus write: bad input raises before anything is written.
- Scope paths match at segment boundaries (``/a`` matches ``/a`` and ``/a/b``, not ``/ab``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

import memorybus as mb

KEY_ROOT = "crewai"
MARK = "memorybus.crewai/1"
_PAGE = 500
_MAX_K = 1000


def norm_path(path: str | None) -> str:
    """A CrewAI scope path in one form: ``"/a/b"``; ``None``, ``""`` and ``"/"`` are ``"/"``."""
    if path is None:
        return "/"
    if not isinstance(path, str):
        raise mb.InvalidRequest("scope", "must be a string path such as '/team/research'")
    parts = [p for p in path.strip().split("/") if p]
    return "/" + "/".join(parts)


def under(path: str, prefix: str | None) -> bool:
    """Whether scope ``path`` is ``prefix`` or below it (segment boundaries)."""
    root = norm_path(prefix)
    return root in ("/", path) or path.startswith(root + "/")


def _stamp(value: Any) -> str:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return datetime.now(UTC).isoformat()


def _naive(stamp: str) -> datetime:
    """CrewAI's times are naive UTC (``datetime.utcnow``)."""
    return datetime.fromisoformat(stamp).astimezone(UTC).replace(tzinfo=None)


def memory_fields(record: Any, scope: mb.Scope, name: str) -> dict[str, Any]:
    """The bus memory (``remember`` fields) that holds CrewAI record ``record``."""
    content, rid = getattr(record, "content", None), getattr(record, "id", None)
    if not isinstance(content, str) or not content.strip():
        raise mb.InvalidRequest("content", "a CrewAI record needs a non-empty content")
    if not isinstance(rid, str) or not rid:
        raise mb.InvalidRequest("id", "a CrewAI record needs a non-empty id")
    importance = float(getattr(record, "importance", 0.5))
    if not 0.0 <= importance <= 1.0:
        raise mb.InvalidRequest("importance", "must be between 0 and 1")
    categories = [str(c) for c in getattr(record, "categories", None) or []]
    raw = getattr(record, "metadata", None) or {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise mb.InvalidRequest("metadata", "must be a dict with string keys")
    try:  # JSON-safe: values JSON cannot hold are kept as their str()
        metadata = json.loads(json.dumps(raw, default=str))
    except (TypeError, ValueError) as exc:
        raise mb.InvalidRequest("metadata", f"cannot be stored: {exc}") from None
    source = getattr(record, "source", None)
    meta = {"store": MARK, "name": name, "id": rid, "scope": norm_path(getattr(record, "scope", "/")),
            "categories": categories, "metadata": metadata, "importance": importance,
            "created_at": _stamp(getattr(record, "created_at", None)),
            "source": source if isinstance(source, str) else None,
            "private": bool(getattr(record, "private", False))}  # fmt: skip
    when = datetime.fromisoformat(meta["created_at"]).timestamp()
    return {"content": content, "scope": scope, "kind": "episodic", "decay_rate": 0.0, "valid_from": when,
            "id": mb.derived_id(scope, f"{KEY_ROOT}/{name}/{rid}"), "key": f"{KEY_ROOT}/{name}/{rid}",
            "importance": 1.0 + 9.0 * importance, "structured": {"crewai": meta}}  # fmt: skip


def record_fields(node: mb.MemoryNode, name: str) -> dict[str, Any] | None:
    """The ``MemoryRecord`` fields of a memory a storage named ``name`` wrote, else None."""
    meta = node.structured.get("crewai") if isinstance(node.structured, dict) else None
    if not (isinstance(meta, dict) and meta.get("store") == MARK and meta.get("name") == name
            and isinstance(meta.get("id"), str) and node.key == f"{KEY_ROOT}/{name}/{meta['id']}"):  # fmt: skip
        return None
    return {"id": meta["id"], "content": node.content, "scope": norm_path(meta.get("scope")),
            "categories": list(meta.get("categories") or []), "metadata": dict(meta.get("metadata") or {}),
            "importance": float(meta.get("importance", 0.5)), "created_at": _naive(meta["created_at"]),
            "last_accessed": datetime.fromtimestamp(node.last_accessed or node.created_at, UTC).replace(tzinfo=None),
            "source": meta.get("source"), "private": bool(meta.get("private", False))}  # fmt: skip


def matches(fields: dict[str, Any], scope_prefix: str | None = None, categories: Sequence[str] | None = None,
            metadata_filter: dict[str, Any] | None = None, record_ids: Iterable[str] | None = None,
            older_than: datetime | None = None) -> bool:  # fmt: skip
    """Whether a record passes every filter given: scope prefix, any of ``categories``,
    every ``metadata_filter`` item, one of ``record_ids``, created before ``older_than``."""
    if not under(fields["scope"], scope_prefix):
        return False
    if categories and not set(categories) & set(fields["categories"]):
        return False
    if metadata_filter and any(fields["metadata"].get(k) != v for k, v in metadata_filter.items()):
        return False
    if record_ids is not None and fields["id"] not in set(record_ids):
        return False
    return older_than is None or fields["created_at"] < _naive(_stamp(older_than))


def _vector_key(vector: Sequence[float]) -> bytes:
    return hashlib.blake2b(np.asarray(vector, dtype="<f4").tobytes(), digest_size=16).digest()


class BusStorage:
    """CrewAI's ``StorageBackend`` protocol over a :class:`memorybus.MemoryBus`."""

    def __init__(self, bus: mb.MemoryBus, context: mb.Context, *, name: str = "crew",
                 level: mb.Level | str | None = None, remembered_queries: int = 4096) -> None:  # fmt: skip
        if not isinstance(context, mb.Context):
            raise mb.InvalidRequest("context", "must be a memorybus.Context")
        if not isinstance(name, str) or not name or "/" in name:
            raise mb.InvalidRequest("name", "must be a non-empty string without '/'")
        if level is None:
            level = mb.Level.AGENT if context.agent else mb.Level.USER if context.user else mb.Level.ORG
        self.bus, self.context, self.name = bus, context, name
        self.scope = context.resolve_scope(mb.Level(level))
        self._texts: OrderedDict[bytes, str] = OrderedDict()
        self._limit = remembered_queries
        self._lock = threading.Lock()

    def __copy__(self) -> BusStorage:
        return self  # a handle on the bus (CrewAI deep-copies its Memory per crew): copies share it

    def __deepcopy__(self, memo: dict[int, Any]) -> BusStorage:
        return self

    # ------------------------------------------------------------- embedding
    def embedder(self, texts: Sequence[str]) -> list[list[float]]:
        """CrewAI's embedder callable (a list of texts in, one vector each out): the bus's
        model. It remembers the text of each vector, which :meth:`search` recalls."""
        texts = [texts] if isinstance(texts, str) else list(texts)
        rows = [[float(x) for x in row] for row in np.asarray(self.bus.embed(texts), dtype="<f4")] if texts else []
        with self._lock:
            for text, row in zip(texts, rows, strict=True):
                key = _vector_key(row)
                self._texts[key] = text
                self._texts.move_to_end(key)
            while len(self._texts) > self._limit:
                self._texts.popitem(last=False)
        return rows

    # --------------------------------------------------------------- reading
    def _record(self, fields: dict[str, Any]) -> Any:
        from crewai.memory.types import MemoryRecord  # CrewAI only where its type is returned

        return MemoryRecord(**fields)

    def _scan(self, scope: mb.Scope | None = None) -> list[tuple[dict[str, Any], mb.MemoryNode]]:
        """Every record of this storage's name the context sees (or: in ``scope``)."""
        found, cursor = [], None
        while True:
            page = self.bus.list_memories(self.context, scope=scope, key_prefix=f"{KEY_ROOT}/{self.name}/",
                                          limit=_PAGE, cursor=cursor)  # fmt: skip
            found += [(f, n) for n in page.memories if (f := record_fields(n, self.name)) is not None]
            if page.cursor is None:
                return found
            cursor = page.cursor

    def search(self, query_embedding: list[float], scope_prefix: str | None = None,
               categories: list[str] | None = None, metadata_filter: dict[str, Any] | None = None,
               limit: int = 10, min_score: float = 0.0) -> list[tuple[Any, float]]:  # fmt: skip
        """The records that best answer the query, best first, as ``(record, relevance)``."""
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise mb.InvalidRequest("limit", "must be a positive int")
        with self._lock:
            text = self._texts.get(_vector_key(query_embedding)) if len(query_embedding) else None
        if text is None:
            raise mb.InvalidRequest("query_embedding", "was not made by this storage's embedder: "
                                    "pass Memory(embedder=storage.embedder)")  # fmt: skip
        k = min(_MAX_K, max(4 * limit, 20))
        while True:
            hits = self.bus.recall(text, self.context, k=k, min_relevance=max(0.0, float(min_score)))
            out = [(f, h.relevance) for h in hits
                   if (f := record_fields(h.node, self.name)) is not None
                   and matches(f, scope_prefix, categories, metadata_filter)]  # fmt: skip
            if len(out) >= limit or len(hits) < k or k == _MAX_K:
                return [(self._record(f), float(s)) for f, s in out[:limit]]
            k = min(_MAX_K, 4 * k)

    def get_record(self, record_id: str) -> Any | None:
        """The record with this id (this storage's scope first, then every visible one)."""
        found = self._find(record_id)
        return None if found is None else self._record(found[0])

    def _find(self, record_id: str) -> tuple[dict[str, Any], mb.MemoryNode] | None:
        try:
            node = self.bus.get(mb.derived_id(self.scope, f"{KEY_ROOT}/{self.name}/{record_id}"), self.context)
            fields = record_fields(node, self.name)
            if fields is not None:
                return fields, node
        except mb.MemoryNotFound:
            pass
        return next(((f, n) for f, n in self._scan() if f["id"] == record_id), None)

    def list_records(self, scope_prefix: str | None = None, limit: int = 200, offset: int = 0) -> list[Any]:
        """Records under ``scope_prefix``, newest first, ``offset`` skipped."""
        rows = sorted((f for f, _ in self._scan() if matches(f, scope_prefix)),
                      key=lambda f: f["created_at"], reverse=True)  # fmt: skip
        return [self._record(f) for f in rows[offset: offset + limit]]

    def count(self, scope_prefix: str | None = None) -> int:
        """How many records are under ``scope_prefix``."""
        return sum(1 for f, _ in self._scan() if matches(f, scope_prefix))

    def list_categories(self, scope_prefix: str | None = None) -> dict[str, int]:
        """How many records under ``scope_prefix`` have each category."""
        return dict(Counter(c for f, _ in self._scan() if matches(f, scope_prefix) for c in f["categories"]))

    def list_scopes(self, parent: str = "/") -> list[str]:
        """The immediate child scope paths of ``parent`` that hold records."""
        root = norm_path(parent)
        depth = 0 if root == "/" else root.count("/")
        children = {"/" + "/".join(f["scope"].split("/")[1: depth + 2])
                    for f, _ in self._scan() if under(f["scope"], root) and f["scope"] != root}  # fmt: skip
        return sorted(children)

    def get_scope_info(self, scope: str) -> Any:
        """Record count, categories, oldest and newest record, child scopes of ``scope``."""
        from crewai.memory.types import ScopeInfo

        rows = [f for f, _ in self._scan() if matches(f, scope)]
        times = [f["created_at"] for f in rows]
        return ScopeInfo(path=norm_path(scope), record_count=len(rows),
                         categories=sorted({c for f in rows for c in f["categories"]}),
                         oldest_record=min(times, default=None), newest_record=max(times, default=None),
                         child_scopes=self.list_scopes(scope))  # fmt: skip

    # --------------------------------------------------------------- writing
    def save(self, records: list[Any]) -> None:
        """Store ``records`` (one bus write; a record id already stored is replaced)."""
        items = [memory_fields(r, self.scope, self.name) for r in records]
        if len({i["id"] for i in items}) != len(items):
            raise mb.InvalidRequest("records", "the same record id twice in one save")
        if not items:
            return
        try:
            self.bus.remember_many(items, self.context)
        except mb.VersionConflict:  # a record id already stored (nothing was written): replace those
            for record in records:
                self.update(record)

    def update(self, record: Any) -> None:
        """Replace the record with ``record.id`` in this storage's scope (compare-and-set);
        store it when absent. A record only another scope holds (another storage's, seen
        through a wider scope) raises :class:`~memorybus.ScopeViolation`: it is read-only here."""
        fields = memory_fields(record, self.scope, self.name)
        found = self._find(record.id)
        if found is None:
            self.bus.remember_many([fields], self.context)
            return
        node = found[1]
        if node.scope != self.scope:
            raise mb.ScopeViolation("write")
        self.bus.update(node.id, self.context, expected_version=node.version, content=fields["content"],
                        importance=fields["importance"], structured=fields["structured"])  # fmt: skip

    def delete(self, scope_prefix: str | None = None, categories: list[str] | None = None,
               record_ids: list[str] | None = None, older_than: datetime | None = None,
               metadata_filter: dict[str, Any] | None = None) -> int:  # fmt: skip
        """Remove this storage's records (in its own scope) that pass every filter given
        (none given: all of them); returns how many were removed."""
        gone = 0
        for fields, node in self._scan(self.scope):
            if matches(fields, scope_prefix, categories, metadata_filter, record_ids, older_than):
                try:
                    gone += bool(self.bus.forget(node.id, self.context))
                except mb.MemoryNotFound:
                    continue
        return gone

    def reset(self, scope_prefix: str | None = None) -> None:
        """Remove this storage's records under ``scope_prefix`` (None: all of them)."""
        self.delete(scope_prefix=scope_prefix)

    # ----------------------------------------------------------------- async
    async def asave(self, records: list[Any]) -> None:
        await asyncio.to_thread(self.save, records)

    async def asearch(self, query_embedding: list[float], scope_prefix: str | None = None,
                      categories: list[str] | None = None, metadata_filter: dict[str, Any] | None = None,
                      limit: int = 10, min_score: float = 0.0) -> list[tuple[Any, float]]:  # fmt: skip
        return await asyncio.to_thread(self.search, query_embedding, scope_prefix, categories,
                                       metadata_filter, limit, min_score)  # fmt: skip

    async def adelete(self, scope_prefix: str | None = None, categories: list[str] | None = None,
                      record_ids: list[str] | None = None, older_than: datetime | None = None,
                      metadata_filter: dict[str, Any] | None = None) -> int:  # fmt: skip
        return await asyncio.to_thread(self.delete, scope_prefix, categories, record_ids, older_than,
                                       metadata_filter)  # fmt: skip
