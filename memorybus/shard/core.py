"""The :class:`Shard` itself: construction and rebuild from the store, the checks
every call makes, reads and recall, and access statistics. Writes, keyed facts and
maintenance are its mixins (:mod:`.writes`, :mod:`.facts`, :mod:`.maintenance`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from memorybus import ids
from memorybus.clock import Clock, SystemClock
from memorybus.config import BusPolicy, GraphPolicy, RankingWeights
from memorybus.conflicts import Judge
from memorybus.errors import InvalidMemory, InvalidRequest, MemoryNotFound, ScopeViolation
from memorybus.events import Event
from memorybus.graph import TemporalGraph
from memorybus.graph import entities as graph_entities
from memorybus.model import (
    DEFAULT_MAX_CONTENT_CHARS,
    DEFAULT_MAX_STRUCTURED_BYTES,
    DEFAULT_MAX_TAGS,
    MemoryKind,
    MemoryNode,
    MemoryStatus,
    evolve,
)
from memorybus.retrieval import DEFAULT_STATUSES, RecallHit
from memorybus.retrieval.options import RecallOptions
from memorybus.retrieval.reader import RecallReader
from memorybus.scopes import Context, Scope
from memorybus.shard.facts import FactsMixin
from memorybus.shard.gate import Gate
from memorybus.shard.index import SearchIndex
from memorybus.shard.maintenance import MaintenanceMixin
from memorybus.shard.ops import OpsMixin
from memorybus.shard.transfer import TransferMixin
from memorybus.shard.writes import WritesMixin
from memorybus.storage.base import Store
from memorybus.storage.vectors import VectorIndex
from memorybus.transfer import within as scope_within


class Shard(OpsMixin, WritesMixin, FactsMixin, MaintenanceMixin, TransferMixin):
    def __init__(
        self,
        name: str,
        store: Store,
        index: VectorIndex,
        *,
        dim: int,
        clock: Clock | None = None,
        ranking: RankingWeights | None = None,
        max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
        max_tags: int = DEFAULT_MAX_TAGS,
        max_structured_bytes: int = DEFAULT_MAX_STRUCTURED_BYTES,
        touch_flush_seconds: float = 1.0,
        policy: BusPolicy | None = None,
        on_events: Callable[[list[Event]], None] | None = None,
        judge: Judge | None = None,
        dedupe: bool = True,
        detect_contradictions: bool = True,
        graph: GraphPolicy | None = None,
        owns: Callable[[str], bool] | None = None,
    ) -> None:
        self.name = name
        self.gate = Gate()  # how the actor's read and write threads share this shard
        #: whether this shard owns a scope key (None: every scope, for a shard used alone);
        #: a new memory in a scope routed elsewhere is refused, so an id lives on one shard
        self.owns = owns
        self.store = store
        self.dim = dim
        self.clock = clock or SystemClock()
        self.ranking = ranking or RankingWeights()
        self.max_content_chars = max_content_chars
        self.max_tags = max_tags
        self.max_structured_bytes = max_structured_bytes
        self.touch_flush_seconds = touch_flush_seconds
        self.policy = policy or BusPolicy()
        self.on_events = on_events
        self.judge = judge
        self.dedupe = dedupe
        self.detect_contradictions = detect_contradictions
        self._nodes: dict[str, MemoryNode] = {}
        self._hashes: dict[tuple[str, str], set[str]] = {}
        self._importance_since: dict[str, float] = {}
        self.graph_policy = graph or GraphPolicy()
        self.graph = TemporalGraph()
        self._touches: dict[str, tuple[int, float]] = {}
        self._in_doubt = {}
        self._last_flush = time.monotonic()
        self._first_touch = self._last_flush
        #: the recall index: vectors on disk and keywords, vectors and threads in memory
        self.index = SearchIndex(index, self._nodes.get, k1=self.ranking.bm25_k1, b=self.ranking.bm25_b)
        self._recall = RecallReader(self._nodes, self.index, self.index.structure, ranking=self.ranking,
                                    dim=dim, clock=self.clock, stored=store.get, touch=self._touch)
        self.rebuild()

    # ----------------------------------------------------------------- startup
    def rebuild(self) -> int:
        """Rebuild cache and vector index from the store; returns the record count.
        Raises IndexUnavailable when the index cannot be rebuilt."""
        self._nodes.clear()
        self._hashes.clear()
        self._recall.reset()

        def mirrored() -> Iterator[MemoryNode]:
            for node in self.store.iter_all():
                self._remember_local(node)
                yield node

        self.index.load(mirrored())
        return len(self._nodes)

    # ------------------------------------------------------------------ checks
    def _check_context(self, context: object) -> Context:
        """The caller's context, checked; every call starts here (and settles writes in
        doubt first, if the store can tell now: see :meth:`_reading`)."""
        if not isinstance(context, Context):
            raise InvalidRequest("context", f"must be a Context, got {type(context).__name__}")
        self._reading()
        return context

    def _visible(self, node: MemoryNode, context: Context, action: str) -> None:
        if not node.scope.visible_to(context):
            raise ScopeViolation(action)

    def _validate(self, node: MemoryNode) -> MemoryNode:
        """Validate a node a caller wrote, with this shard's limits."""
        return node.validate(dim=self.dim, max_content_chars=self.max_content_chars, max_tags=self.max_tags,
                             max_structured_bytes=self.max_structured_bytes)

    def _prepare_new(
        self, node: MemoryNode, vector: np.ndarray | None, context: Context, now: float
    ) -> MemoryNode:
        if not isinstance(node, MemoryNode):
            raise InvalidMemory("node", f"must be a MemoryNode, got {type(node).__name__}")
        if vector is not None:
            node = evolve(node, embedding=vector)
        if node.embedding is None:
            raise InvalidMemory("embedding", "is required to store a memory")
        if node.version != 0:
            raise InvalidMemory("version", "a new memory must have version 0")
        node = self._validate(node)
        self._visible(node, context, "write")
        self._check_id(node)
        return evolve(node.stamped(now), version=1)

    def _check_id(self, node: MemoryNode) -> None:
        """A new memory's id must be of its scope, and its scope routed to this shard:
        then an id can only ever live on one shard (see :mod:`memorybus.ids`)."""
        if not ids.fits(node.id, node.scope):
            raise InvalidMemory("id", "is not an id of this memory's scope (ids carry their scope's routing "
                                "bucket: memorybus.new_id(scope) or derived_id(scope, name))")
        if self.owns is not None and not self.owns(node.scope.key):
            raise InvalidRequest("scope", f"is not routed to {self.name}")

    # ------------------------------------------------------------------- reads
    def _reading(self) -> None:
        """Before a read: settle writes in doubt if the store can tell now (a write the
        store applied after its call failed becomes visible here)."""
        if self._in_doubt:
            self._settle(strict=False)

    def get(self, context: Context, memory_id: str, *, with_embedding: bool = False) -> MemoryNode:
        context = self._check_context(context)
        node = self._nodes.get(memory_id)
        if node is None:
            raise MemoryNotFound(memory_id)
        self._visible(node, context, "read")
        if with_embedding:
            stored = self.store.get(memory_id)
            if stored is None:
                raise MemoryNotFound(memory_id)
            return stored
        return evolve(node)

    def search(
        self,
        context: Context,
        vector: np.ndarray,
        k: int = 10,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        statuses: Sequence[MemoryStatus] | None = None,
        touch: bool = True,
        as_of: float | None = None,
        query: str | None = None,
        options: RecallOptions | None = None,
    ) -> list[RecallHit]:
        """Top ``k`` memories visible to ``context`` for the query ``vector`` (and its
        ``query`` text: hybrid, structure-aware recall, see
        :mod:`memorybus.retrieval.ranking`), followed by the expansions ``options`` asks for.

        Visibility is enforced here twice: the indexes are filtered to the
        context's visible scope keys, and every candidate is checked again.
        ``as_of``: the state at that time — memories valid then (``valid_from <= t <
        valid_to``), including facts deprecated since, excluding later ones.
        """
        context = self._check_context(context)
        plan = self._recall.plan(
            context, k, kinds=kinds, statuses=statuses, touch=touch, as_of=as_of, query=query, options=options
        )
        # memories the temporal graph links to the query's entities: one more fused signal
        use_graph = self.ranking.graph > 0 and self._recall.has_facts(plan.context)
        linked = self._graph_links(plan.context, query, plan.options.as_of) if query and use_graph else {}
        return self._recall.execute(plan, vector, linked)

    def _graph_links(self, context: Context, query: str, as_of: float | None) -> dict[str, float]:
        """Memories linked to the query's entities by graph edges valid at the query time."""
        if self.graph_policy.hops <= 0:
            return {}
        seeds = list(dict.fromkeys([*graph_entities(query), *self.graph.match_entities(query)]))
        if not seeds:
            return {}
        at = self.clock.now() if as_of is None else as_of
        scope_keys = [s.key for s in context.visible_scopes()]
        return self.graph.memories_for(seeds, at, scope_keys, hops=self.graph_policy.hops,
                                       fanout=self.graph_policy.fanout)

    def pinned(self, context: Context) -> list[MemoryNode]:
        """The pinned (core) memories visible to ``context``: most important first."""
        return self._recall.pinned(self._check_context(context))

    def list_scope(self, context: Context, scope_key: str) -> list[MemoryNode]:
        context = self._check_context(context)
        return [n for n in self._nodes.values() if n.scope.key == scope_key and n.scope.visible_to(context)]

    def list_memories(
        self,
        context: Context | None,
        *,
        scope_key: str | None = None,
        key_prefix: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        statuses: Sequence[MemoryStatus] | None = None,
        limit: int = 100,
        after: tuple[float, str] | None = None,
        within: Scope | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[MemoryNode]:
        """The memories here that ``context`` may see, in ``(created_at, id)`` order: at
        most ``limit`` of them, starting after the position ``after``. Filters: one exact
        scope, scopes ``within`` a wider one, a key prefix, kinds, statuses (default active
        and consolidated), ``since <= created_at < until``. Expired memories are left
        out, as recall leaves them out. Read-only (no access counted). ``context=None``
        is the operator's view: every memory, whatever its scope.

        Cost: one pass over this shard's in-memory mirror of its records.
        """
        if context is not None:
            context = self._check_context(context)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidRequest("limit", "must be an int between 1 and 10000")
        kind_set = frozenset(MemoryKind(k) for k in kinds) if kinds else None
        status_set = frozenset(MemoryStatus(s) for s in statuses) if statuses else frozenset(DEFAULT_STATUSES)
        visible = None if context is None else frozenset(s.key for s in context.visible_scopes())
        if scope_key is not None:
            visible = frozenset({scope_key}) if visible is None else visible & {scope_key}
        now = self.clock.now()
        found = [
            n
            for n in self._nodes.values()
            if (visible is None or n.scope.key in visible)
            and n.status in status_set
            and (kind_set is None or n.kind in kind_set)
            and (key_prefix is None or (n.key or "").startswith(key_prefix))
            and (n.expires_at is None or n.expires_at > now)
            and (after is None or (n.created_at, n.id) > after)
            and (since is None or n.created_at >= since)
            and (until is None or n.created_at < until)
            and (within is None or scope_within(n.scope, within))
        ]
        found.sort(key=lambda n: (n.created_at, n.id))
        return [evolve(n) for n in found[:limit] if context is None or n.scope.visible_to(context)]

    def count(self) -> int:
        self._reading()
        return len(self._nodes)

    # ------------------------------------------------------------------ access
    def _touch(self, ids: Sequence[str], now: float) -> None:
        if ids and not self._touches:
            self._first_touch = time.monotonic()
        for memory_id in ids:
            node = self._nodes[memory_id]
            node.access_count += 1
            node.last_accessed = max(node.last_accessed, now)
            count, _ = self._touches.get(memory_id, (0, now))
            self._touches[memory_id] = (count + 1, now)
        if time.monotonic() - self._last_flush >= self.touch_flush_seconds:
            self.flush(wait=False)

    def touches_due(self, within: float | None = None) -> bool:
        """Whether pending access statistics must be written now to reach the store within
        ``within`` seconds (default ``touch_flush_seconds``) of the oldest pending access;
        a timer polls this at a fraction of that period."""
        if not self._touches:
            return False
        limit = self.touch_flush_seconds if within is None else within
        return time.monotonic() - self._first_touch >= 0.5 * limit

    def flush(self, *, wait: bool = True) -> int:
        """Write pending access statistics to the store; returns how many nodes.
        ``wait=False`` (a recall flushing on the side): if a write holds the store,
        keep them for the next flush instead of waiting."""
        pending, self._touches = self._touches, {}
        self._last_flush = time.monotonic()
        if pending and not self.store.touch(pending, wait=wait):
            for memory_id, (count, when) in pending.items():
                more, later = self._touches.get(memory_id, (0, when))
                self._touches[memory_id] = (count + more, max(when, later))
            return 0
        return len(pending)

    def repair_index(self) -> bool:
        """Rebuild the vector index from the store if it is stale (it failed after a
        commit); True when it is current. Writes call it first; the actor's timer too."""
        return self.index.repair(self.store.iter_all)

    def close(self) -> None:
        self.flush()
        self.index.close()
        self.store.close()
