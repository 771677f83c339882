"""What the inspector shows, read from a bus's stores: scopes, memories, search.

:class:`Inspector` reads the shards' stores it is given (read-only ones for a data
directory, see :mod:`memorybus.inspector.readonly`) and, when it is handed a
connected operator's :class:`~memorybus.client.MemoryBus`, asks that bus for what
only a running bus knows: semantic recall and the maintenance schedule. Every answer
is plain JSON-ready data. Nothing here writes.

Guarantees: listing and full-text search see every memory of every scope (an
operator's view) as of the last commit each store shows; they scan the stores (the
inspector is a tool for looking, not a query path), with each memory's keyword tokens
cached by ``(id, version)``. Bad filters raise :class:`~memorybus.errors.InvalidRequest`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from memorybus.errors import InvalidRequest
from memorybus.memory.codec import node_to_dict
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus
from memorybus.scopes import Scope

if TYPE_CHECKING:
    from memorybus.client import MemoryBus
    from memorybus.storage.base import Store

FIELDS = ("org", "user", "agent", "session")
MAX_LIMIT = 1000
_TOKEN_CACHE = 200_000


def scope_path(scope: Scope) -> str:
    """``org/user/agent/session`` with empty fields as ``*`` and trailing ones dropped."""
    return "/".join(p or "*" for p in scope.as_tuple()).rstrip("/*") or scope.org


def node_json(node: MemoryNode) -> dict[str, Any]:
    """A memory as JSON-ready data (no embedding), with its scope as a path."""
    d = node_to_dict(node, with_embedding=False)
    d.pop("embedding", None)
    d["scope_path"] = scope_path(node.scope)
    return d


def parse_scope(fields: dict[str, str]) -> Scope | None:
    """The scope that ``org``/``user``/``agent``/``session`` name (None: every scope)."""
    given = {f: (fields.get(f) or "") for f in FIELDS}
    if not given["org"]:
        if any(given.values()):
            raise InvalidRequest("org", "is required with user, agent or session")
        return None
    return Scope(**given)


def inside(scope: Scope, within: Scope | None) -> bool:
    """``scope`` lies in ``within``: every field ``within`` names is ``scope``'s."""
    return within is None or all(not w or w == s for w, s in zip(within.as_tuple(), scope.as_tuple(), strict=True))


def _choices(name: str, values: Sequence[str] | None, allowed: type[MemoryKind] | type[MemoryStatus]) -> set[str]:
    known = {v.value for v in allowed}
    out = {v for v in values or () if v}
    if out - known:
        raise InvalidRequest(name, f"unknown {sorted(out - known)}; one of {sorted(known)}")
    return out


class Inspector:
    """Read-only views over ``stores`` (``(shard name, Store)``) and ``hubs``
    (``(hub name, KeyValue)``); ``bus`` (an operator's handle) for semantic search and
    maintenance status; ``report_dir`` for a simulation's report."""

    def __init__(self, stores: Sequence[tuple[str, Store]], hubs: Sequence[tuple[str, Any]] = (), *,
                 bus: MemoryBus | None = None, report_dir: str | None = None, source: str = "") -> None:
        self.stores = list(stores)
        self.hubs = list(hubs)
        self.bus = bus
        self.report_dir = report_dir
        self.source = source
        self._tokens: dict[tuple[str, int], frozenset[str]] = {}

    # ------------------------------------------------------------ overview
    def overview(self) -> dict[str, Any]:
        shards = [{"shard": name, "memories": store.count(), "backend": store.backend} for name, store in self.stores]
        return {
            "source": self.source,
            "shards": shards,
            "memories": sum(s["memories"] for s in shards),
            "facts": sum(len(store.all_slots()) for _, store in self.stores),
            "hubs": len(self.hubs),
            "semantic": self.bus is not None,
            "report": self.report_dir is not None,
            "read_only": True,
            "now": time.time(),
        }

    def _nodes(self) -> Iterator[MemoryNode]:
        for _, store in self.stores:
            yield from store.iter_all()

    def scopes(self) -> dict[str, Any]:
        """The scopes holding memories as a tree: ``{"name", "path", "count", "total",
        "children": [...]}`` from each org down to sessions; ``count`` is the memories
        stored in exactly that scope, ``total`` those in it and every scope inside."""
        root: dict[str, Any] = {"name": "", "fields": {}, "count": 0, "total": 0, "children": {}}
        for node in self._nodes():
            at = root
            at["total"] += 1
            parts = node.scope.as_tuple()
            depth = max(i for i, p in enumerate(parts) if p or i == 0) + 1
            for i in range(depth):
                name = parts[i] or "*"
                child = at["children"].get(name)
                if child is None:
                    child = {"name": name, "fields": {**at["fields"], FIELDS[i]: parts[i]}, "count": 0, "total": 0,
                             "children": {}}
                    at["children"][name] = child
                child["total"] += 1
                at = child
            at["count"] += 1

        def finish(n: dict[str, Any]) -> dict[str, Any]:
            return {**n, "children": [finish(c) for _, c in sorted(n["children"].items())]}

        return finish(root)

    # ------------------------------------------------------------ memories
    def memories(self, *, within: Scope | None = None, kinds: Sequence[str] | None = None,
                 statuses: Sequence[str] | None = None, key_prefix: str = "", text: str = "",
                 limit: int = 100) -> dict[str, Any]:
        """Memories in ``within`` (None: all) of the given kinds and statuses (empty:
        any), keyed ones whose key starts with ``key_prefix``, matching ``text``
        (full-text: every keyword of it, ranked by how often they occur; newest first
        without text). At most ``limit`` (1..1000); ``total`` counts every match."""
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidRequest("limit", f"must be an integer from 1 to {MAX_LIMIT}")
        want_kinds = _choices("kind", kinds, MemoryKind)
        want_status = _choices("status", statuses, MemoryStatus)
        terms = self._query_terms(text)
        phrase = text.strip().lower()
        found: list[tuple[float, MemoryNode]] = []
        for node in self._nodes():
            if not inside(node.scope, within):
                continue
            if (want_kinds and node.kind.value not in want_kinds) or (want_status and node.status.value not in
                                                                        want_status):
                continue
            if key_prefix and not (node.key or "").startswith(key_prefix):
                continue
            score = 0.0
            if phrase:
                score = self._match(node, terms, phrase)
                if score <= 0:
                    continue
            found.append((score, node))
        found.sort(key=lambda sn: (-sn[0], -sn[1].created_at, sn[1].id))
        return {"total": len(found), "memories": [{**node_json(n), "score": s} for s, n in found[:limit]],
                "mode": "full-text" if phrase else "list"}

    def _query_terms(self, text: str) -> list[str]:
        from memorybus.retrieval.text import tokens

        return sorted(set(tokens(text))) if text.strip() else []

    def _match(self, node: MemoryNode, terms: list[str], phrase: str) -> float:
        """Full-text score: occurrences of the query's keywords (all of them must occur);
        a query of stop words only matches as a case-insensitive substring."""
        if not terms:
            return 1.0 if phrase in node.content.lower() else 0.0
        have = self._tokens.get((node.id, node.version))
        if have is None:
            from memorybus.retrieval.text import tokens

            if len(self._tokens) >= _TOKEN_CACHE:
                self._tokens.clear()
            have = frozenset(tokens(" ".join(filter(None, (node.content, node.key or "", *node.tags)))))
            self._tokens[(node.id, node.version)] = have
        if not all(t in have for t in terms):
            return 0.0
        return float(len(terms)) + (0.5 if phrase in node.content.lower() else 0.0)

    def memory(self, memory_id: str) -> dict[str, Any]:
        """One memory, the shard holding it, and its events (newest last)."""
        from memorybus.memory.events import Event

        for name, store in self.stores:
            node = store.get(memory_id)
            if node is None:
                continue
            events = []
            if node.key:
                events = [event_json(Event.decode(b, s)) for s, b in store.fact_events(node.scope.key, node.key)]
            return {"memory": node_json(node), "shard": name, "fact_events": events}
        from memorybus.errors import MemoryNotFound

        raise MemoryNotFound(memory_id)

    def semantic(self, query: str, within: Scope | None, limit: int = 10) -> dict[str, Any]:
        """Recall through the bus, as an agent of ``within`` would (it sees that scope
        and the wider ones above it). InvalidRequest without a bus or a scope."""
        if self.bus is None:
            raise InvalidRequest("semantic", "needs a running bus (memorybus ui --ray-address ...); full-text works "
                                             "on a data directory")
        if within is None:
            raise InvalidRequest("org", "semantic search recalls as one scope's agent: choose a scope")
        from memorybus.scopes import Context

        ctx = Context(*within.as_tuple())
        hits = self.bus.recall(query, ctx, k=limit)
        return {"total": len(hits), "mode": "semantic",
                "memories": [{**node_json(h.node), "score": round(float(h.score), 4)} for h in hits]}


def event_json(event: Any) -> dict[str, Any]:
    """A change event as JSON-ready data (its memory without embedding)."""
    return {"seq": event.seq, "kind": event.kind.value, "at": event.at, "by": event.by,
            "data": {k: v for k, v in event.data.items() if isinstance(v, str | int | float | bool | None)},
            "memory": node_json(event.node)}
