"""What every job of a shard shares: its parts, its limits, and the checks every call makes.

:class:`ShardCore` owns the parts and wires them: the records (store and the
in-memory mirror, :mod:`.records`), the recall index (vectors on disk; keywords,
vectors and threads in memory, :mod:`.index`), the temporal graph, the commits
(:mod:`.ops`). A committed memory reaches all of them through :meth:`ShardCore.mirror`
and leaves through :meth:`ShardCore.forget`. Visibility is checked here, on every call.
The jobs (:mod:`.writes`, :mod:`.facts`, :mod:`.broadcast`, :mod:`.decay`,
:mod:`.consolidation`, :mod:`.replay`, :mod:`.transfer`) each take the core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import numpy as np

from memorybus.audit import principal_of
from memorybus.bus.conflicts import Judge
from memorybus.bus.reliability import Reliabilities
from memorybus.clock import Clock
from memorybus.config import BusPolicy, GraphPolicy, RankingWeights
from memorybus.errors import InvalidMemory, InvalidRequest, ScopeViolation
from memorybus.graph import TemporalGraph
from memorybus.memory import ids
from memorybus.memory.events import Event, EventKind
from memorybus.memory.model import MemoryKind, MemoryNode, evolve
from memorybus.scopes import Context
from memorybus.shard.gate import Gate
from memorybus.shard.index import SearchIndex, index_digest
from memorybus.shard.ops import Commits, OpCall
from memorybus.shard.records import Records
from memorybus.shard.texts import EmbeddingTexts
from memorybus.storage.base import Store, WriteBatch

T = TypeVar("T")


class Limits:
    """What a caller may write: a node's size limits and vector dimension."""

    def __init__(self, dim: int, max_content_chars: int, max_tags: int, max_structured_bytes: int) -> None:
        self.dim = dim
        self.max_content_chars = max_content_chars
        self.max_tags = max_tags
        self.max_structured_bytes = max_structured_bytes


class ShardCore:
    def __init__(
        self,
        name: str,
        records: Records,
        index: SearchIndex,
        commits: Commits,
        *,
        limits: Limits,
        clock: Clock,
        ranking: RankingWeights,
        policy: BusPolicy,
        graph: GraphPolicy,
        judge: Judge | None,
        dedupe: bool,
        detect_contradictions: bool,
        owns: Callable[[str], bool] | None,
    ) -> None:
        self.name = name
        self.records = records
        self.store: Store = records.store
        #: memory id -> committed version (no embedding): the records' mirror, read-only here
        self.nodes = records.nodes
        self.index = index
        self.commits = commits
        self.gate: Gate = commits.gate
        #: the audit trail (reads noted by the read jobs, writes by the commits)
        self.audit = commits.audit
        self.limits = limits
        self.dim = limits.dim
        self.clock = clock
        self.ranking = ranking
        self.policy = policy
        self.graph_policy = graph
        self.graph = TemporalGraph()
        self.judge = judge
        self.dedupe = dedupe
        self.detect_contradictions = detect_contradictions
        #: whether this shard owns a scope key (None: every scope, for a shard used alone);
        #: a new memory in a scope routed elsewhere is refused, so an id lives on one shard
        self.owns = owns
        #: per scope, the importance of episodic memories written since its last consolidation
        self.importance_since: dict[str, float] = {}
        #: whether the last start kept the on-disk vector index (its checkpoint matched)
        self.index_trusted = False
        #: learned source reliabilities per org, derived from the stored evidence (built on
        #: first use by :class:`~memorybus.shard.facts.Facts`; None again after an erasure or
        #: an import rewrote evidence, so the next use rebuilds it from the store)
        self.reliabilities: Reliabilities | None = None
        #: what this shard embeds for the memories it stores (see :mod:`.texts`)
        self.texts = EmbeddingTexts(ranking.contextual_text, index.structure, records.nodes)

    # ------------------------------------------------------------------ wiring
    def mirror(self, node: MemoryNode) -> None:
        """A committed node (new, or a new version) reaches the in-memory parts."""
        self.records.put(node)
        self.index.structure.add(node)
        if self.graph_policy.hops > 0:
            self.graph.add_memory(node)

    def forget(self, memory_id: str) -> None:
        """A deleted memory leaves the in-memory parts."""
        self.records.pop(memory_id)
        self.index.structure.remove(memory_id)
        if self.graph_policy.hops > 0:
            self.graph.remove_source(memory_id)

    def rebuild(self) -> int:
        """Rebuild records' mirror, recall structure and graph from the store, and the
        vector index unless its checkpoint shows it holds exactly these records (see
        :meth:`SearchIndex.open`); returns the record count. Raises IndexUnavailable
        when the vector index cannot be rebuilt."""
        self.records.reset()
        self.index.structure.reset()
        for node in self.store.iter_all():
            self.mirror(node)
        self.index_trusted = self.index.open(self.digest(), len(self.nodes), self._points)
        return len(self.nodes)

    def digest(self) -> str:
        """What the vector index must hold for the records mirrored now."""
        return index_digest(self.nodes.values(), self.dim)

    def _points(self) -> Iterator[MemoryNode]:
        """The mirrored records with their vectors (kept in memory): a rebuild's input."""
        vectors = self.index.structure.vectors
        for node in self.nodes.values():
            vec = vectors.vector(node.id)
            if vec is not None:
                yield evolve(node, embedding=vec)

    def checkpoint_index(self, idle: float | None = None) -> bool:
        """Checkpoint the vector index against the records now (a crash after this, with
        no write since, restarts without a rebuild). ``idle``: only if it has not
        changed for that many seconds since it last changed."""
        if idle is not None and not self.index.checkpoint_due(idle):
            return False
        return self.index.save(self.digest())

    def repair_index(self) -> bool:
        """Rebuild the vector index from the store if it is stale (it failed after a
        commit); True when it is current."""
        return self.index.repair(self.store.iter_all)

    # ------------------------------------------------------------------ checks
    def check_context(self, context: object) -> Context:
        """The caller's context, checked; every call starts here (and settles writes in
        doubt first, if the store can tell now: see :meth:`reading`)."""
        if not isinstance(context, Context):
            raise InvalidRequest("context", f"must be a Context, got {type(context).__name__}")
        self.reading()
        return context

    def reading(self) -> None:
        """Before a read: settle writes in doubt if the store can tell now (a write the
        store applied after its call failed becomes visible here)."""
        if self.commits.in_doubt:
            self.commits.settle(strict=False)

    @staticmethod
    def visible(node: MemoryNode, context: Context, action: str) -> None:
        """``node`` is visible to ``context``; a change (any action but ``read``) also
        needs the node's scope level among the levels the context's credential may
        write (``Context.levels``, set by the actor that verified it)."""
        if not node.scope.visible_to(context):
            raise ScopeViolation(action)
        if action != "read" and context.levels is not None and node.scope.level.value not in context.levels:
            raise ScopeViolation(action)

    def validate(self, node: MemoryNode) -> MemoryNode:
        """Validate a node a caller wrote, with this shard's limits."""
        lim = self.limits
        return node.validate(dim=lim.dim, max_content_chars=lim.max_content_chars, max_tags=lim.max_tags,
                             max_structured_bytes=lim.max_structured_bytes)

    def prepare_new(self, node: MemoryNode, vector: np.ndarray | None, context: Context, now: float) -> MemoryNode:
        """A new memory as it will be stored (version 1), or InvalidMemory/ScopeViolation."""
        if not isinstance(node, MemoryNode):
            raise InvalidMemory("node", f"must be a MemoryNode, got {type(node).__name__}")
        if vector is not None:
            node = evolve(node, embedding=vector)
        if node.embedding is None:
            raise InvalidMemory("embedding", "is required to store a memory")
        if node.version != 0:
            raise InvalidMemory("version", "a new memory must have version 0")
        node = self.validate(node)
        self.visible(node, context, "write")
        self.check_id(node)
        return evolve(node.stamped(now), version=1)

    def check_id(self, node: MemoryNode) -> None:
        """A new memory's id must be of its scope, and its scope routed to this shard:
        then an id can only ever live on one shard (see :mod:`memorybus.memory.ids`)."""
        if not ids.fits(node.id, node.scope):
            raise InvalidMemory("id", "is not an id of this memory's scope (ids carry their scope's routing "
                                "bucket: memorybus.new_id(scope) or derived_id(scope, name))")
        if self.owns is not None and not self.owns(node.scope.key):
            raise InvalidRequest("scope", f"is not routed to {self.name}")

    def is_authority(self, context: Context) -> bool:
        names = set(self.policy.authorities)
        return bool(
            (context.agent and context.agent in names) or any(f"role:{r}" in names for r in context.roles)
        )

    # ----------------------------------------------------------------- commits
    def op_call(self, method: str, owner: Context | str, op: str | None) -> OpCall:
        """A write's operation: settles attempts in doubt and rebuilds a stale vector
        index first (see :class:`~memorybus.shard.ops.Commits`)."""
        call = self.commits.call(method, owner, op)
        self.repair_index()
        return call

    def recorded(self, call: OpCall) -> tuple[bool, Any]:
        return self.commits.recorded(call)

    def commit(
        self, call: OpCall, batch: WriteBatch, events: Sequence[Event], result: T, apply: Callable[[], None]
    ) -> T:
        return self.commits.commit(call, batch, events, result, apply)

    def apply_changed(self, changed: Sequence[MemoryNode]) -> Callable[[], None]:
        """The usual ``apply`` of a commit: ``changed`` nodes reach index and mirror."""

        def apply() -> None:
            self.index.upsert(changed)
            for n in changed:
                self.mirror(n)

        return apply

    @staticmethod
    def event(kind: EventKind, node: MemoryNode, context: Context, now: float, **data: Any) -> Event:
        """The event of a caller's write (its actor: the caller's agent, else user); its
        data names the caller's principal (provenance, as the audit trail names it)."""
        return Event(kind, node.without_embedding(), now, context.agent or context.user, 0,
                     {**data, "principal": principal_of(context)})

    @staticmethod
    def system_event(kind: EventKind, node: MemoryNode, actor: str, now: float, **data: Any) -> Event:
        """The event of a maintenance write (its actor: ``decay`` or ``consolidation``)."""
        return Event(kind, node.without_embedding(), now, actor, 0, data)

    def contextualize(self, nodes: Sequence[MemoryNode], vectors: np.ndarray) -> np.ndarray:
        """Contextual vectors for new memories (see :meth:`RecallIndex.contextualize`)."""
        return self.index.structure.contextualize(nodes, vectors, self.ranking.context_mix, self._vector_of)

    def _vector_of(self, memory_id: str) -> np.ndarray | None:
        cached = self.index.structure.vectors.vector(memory_id)
        if cached is not None:
            return cached
        stored = self.store.get(memory_id)
        return None if stored is None or stored.embedding is None else np.asarray(stored.embedding)

    def touch(self, ids: Sequence[str], now: float) -> None:
        self.records.touch(ids, now)

    def noted(self, context: Context | None, operation: str, nodes: Sequence[MemoryNode]) -> None:
        """Note a read for the audit trail (buffered: see :mod:`.auditing`)."""
        if self.audit is not None:
            self.audit.read(context, operation, nodes)
            if self.records.flush_inline and self.audit.due():  # no timer flushes for this shard
                self.audit.flush(wait=False)

    def flush_due(self, within: float | None = None) -> bool:
        """Whether access statistics or audit entries wait to be written (the timer's test)."""
        return self.records.touches_due(within) or (self.audit is not None and self.audit.due())

    def flush(self, *, wait: bool = True, outside: Callable[[], AbstractContextManager[None]] | None = None) -> int:
        """Write pending access statistics, then buffered audit entries (see
        :meth:`Records.flush` and :meth:`AuditTrail.flush`), both in one ``outside``
        region; returns the statistics written."""
        audit = self.audit
        if audit is None:
            return self.records.flush(wait=wait, outside=outside)
        done: list[int] = []
        written = self.records.flush(wait=wait, outside=outside, then=lambda: done.append(audit.flush(wait=wait)))
        if not done:  # no statistics were due: the audit entries alone
            audit.flush(wait=wait, outside=outside)
        return written

    def note_written(self, node: MemoryNode) -> None:
        """Count a new episodic memory toward its scope's reflection trigger."""
        if node.kind is MemoryKind.EPISODIC:
            key = node.scope.key
            self.importance_since[key] = self.importance_since.get(key, 0.0) + node.importance
