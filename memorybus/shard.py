"""The memory shard: the plain class a ShardActor wraps.

A shard owns the scopes routed to it. It writes through to its durable
:class:`~memorybus.storage.Store` first and only then to its derived vector
index; it enforces scope visibility on every read and write; it ranks recall by
relevance and salience and records accesses.

Guarantees:
- ``put_many``, ``update`` and ``delete`` validate everything before writing;
  a rejected call changes nothing (store, index and cache).
- A call returns only after its store commit is durable.
- The index and cache are rebuilt from the store when the shard starts.
- Access statistics (counts, last access) are flushed to the store at most
  ``touch_flush_seconds`` after a recall, or on :meth:`flush`; a crash may lose
  that window of access statistics, never a memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memorybus.bus.conflicts import AUTHORITY_TAG, Judge, Strategy, is_contradiction, resolve
from memorybus.clock import Clock, SystemClock
from memorybus.config import BusPolicy, GraphPolicy, RankingWeights
from memorybus.errors import (
    InvalidMemory,
    InvalidRequest,
    MemoryNotFound,
    ScopeViolation,
    VersionConflict,
)
from memorybus.events import Event, EventFilter, EventKind, deliverable
from memorybus.graph import TemporalGraph
from memorybus.graph import entities as graph_entities
from memorybus.maintenance import (
    Cluster,
    ConsolidationPolicy,
    DecayPolicy,
    cluster_memories,
    consolidated_node,
    plan_decay,
    recent_episodic,
)
from memorybus.model import DEFAULT_MAX_CONTENT_CHARS, MemoryKind, MemoryNode, MemoryStatus, evolve
from memorybus.retrieval import RecallHit
from memorybus.retrieval.hybrid import RecallOptions
from memorybus.retrieval.reader import RecallReader, SearchPlan
from memorybus.scopes import Context, Level, Scope
from memorybus.storage.base import SlotWrite, Store, WriteBatch
from memorybus.storage.vectors import VectorIndex

#: Fields a caller may change with :meth:`Shard.update`.
UPDATABLE = frozenset(
    {
        "content",
        "structured",
        "kind",
        "status",
        "confidence",
        "importance",
        "decay_rate",
        "valid_from",
        "valid_to",
        "expires_at",
        "parents",
        "children",
        "related",
        "contradicts",
        "source",
        "source_ids",
        "tags",
    }
)


def _content_hash(node: MemoryNode) -> str:
    return hashlib.blake2b(node.content.strip().encode(), digest_size=12).hexdigest()


@dataclass(slots=True)
class FactResult:
    """What :meth:`Shard.assert_fact` did: the node written (or reinforced), whether
    it is now the current value, the previous current id, and the outcome
    (``created``, ``superseded``, ``rejected``, ``reinforced``)."""

    node: MemoryNode
    current: bool
    previous: str | None
    outcome: str
    fact_seq: int
    write_id: str = ""


class Shard:
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
        touch_flush_seconds: float = 1.0,
        policy: BusPolicy | None = None,
        on_events: Callable[[list[Event]], None] | None = None,
        judge: Judge | None = None,
        dedupe: bool = True,
        detect_contradictions: bool = True,
        graph: GraphPolicy | None = None,
    ) -> None:
        self.name = name
        self.store = store
        self.index = index
        self.dim = dim
        self.clock = clock or SystemClock()
        self.ranking = ranking or RankingWeights()
        self.max_content_chars = max_content_chars
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
        self._last_flush = time.monotonic()
        self._recall = RecallReader(self)  # derived read-side indexes (keyword, sessions)
        self.rebuild()

    # ----------------------------------------------------------------- startup
    def rebuild(self) -> int:
        """Rebuild cache and vector index from the store; returns the record count."""
        self.index.reset()
        self._nodes.clear()
        self._hashes.clear()
        self._recall.reset()
        batch: list[MemoryNode] = []
        for node in self.store.iter_all():
            if node.embedding is not None:
                batch.append(node)
            self._remember_local(node)
            if len(batch) >= 1000:
                self.index.upsert(batch)
                batch = []
        self.index.upsert(batch)
        return len(self._nodes)

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _check_context(context: object) -> Context:
        if not isinstance(context, Context):
            raise InvalidRequest("context", f"must be a Context, got {type(context).__name__}")
        return context

    def _visible(self, node: MemoryNode, context: Context, action: str) -> None:
        if not node.scope.visible_to(context):
            raise ScopeViolation(action, str(node.scope), str(context))

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
        node = node.validate(dim=self.dim, max_content_chars=self.max_content_chars)
        self._visible(node, context, "write")
        return evolve(node.stamped(now), version=1)

    # ------------------------------------------------------------------ writes
    def _commit(self, batch: WriteBatch, events: Sequence[Event]) -> list[Event]:
        """Commit ``batch`` with ``events`` appended to their scopes' logs, atomically;
        then hand the sequenced events to ``on_events`` (live fan-out)."""
        batch.events = [(e.scope_key, e.encode()) for e in events]
        batch.event_keys = [e.node.key if "fact_seq" in e.data else None for e in events]
        seqs = self.store.commit(batch)
        for event, seq in zip(events, seqs, strict=True):
            event.seq = seq
        if events and self.on_events is not None:
            with contextlib.suppress(Exception):  # live push is best effort; the log has them
                self.on_events(list(events))
        return list(events)

    def _event(self, kind: EventKind, node: MemoryNode, context: Context, now: float, **data: Any) -> Event:
        return Event(kind, node.without_embedding(), now, context.agent or context.user, 0, data)

    def _duplicate_of(self, node: MemoryNode) -> MemoryNode | None:
        """An existing memory this new one duplicates, in the same scope (the shard owns
        the scope, so this check cannot race with another writer)."""
        for other_id in self._hashes.get((node.scope.key, _content_hash(node)), ()):
            other = self._nodes.get(other_id)
            if other is None or other.kind is not node.kind:
                continue
            if node.kind is MemoryKind.EPISODIC and other.valid_from != node.valid_from:
                continue  # the same words said at another time are another event
            if other.status in (MemoryStatus.ACTIVE, MemoryStatus.CONSOLIDATED):
                return other
        if node.kind in (MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL) and node.embedding is not None:
            for other_id, cosine in self.index.search(
                node.embedding,
                1,
                scope_keys=[node.scope.key],
                kinds=[node.kind],
                statuses=[MemoryStatus.ACTIVE],
            ):
                other = self._nodes.get(other_id)
                if cosine >= self.policy.near_duplicate and other is not None:
                    if self.detect_contradictions and is_contradiction(node, other, self.judge):
                        return None  # nearly the same words, a different claim: keep both
                    return other
        return None

    def _contradicted(self, node: MemoryNode) -> list[str]:
        """Similar facts in the same scope that this one contradicts.

        Only semantic and procedural memories (statements of fact) are checked:
        episodic memories record events, and two events are not a contradiction.
        """
        if node.embedding is None or node.kind not in (MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL):
            return []
        found = []
        for other_id, cosine in self.index.search(
            node.embedding, 5, scope_keys=[node.scope.key], statuses=[MemoryStatus.ACTIVE]
        ):
            other = self._nodes.get(other_id)
            if other is None or cosine < self.policy.contradiction or other.id == node.id:
                continue
            if other.kind not in (MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL):
                continue
            if other.key and node.key and other.key == node.key:
                continue  # keyed facts are resolved by assert_fact, not flagged
            if is_contradiction(node, other, self.judge):
                found.append(other_id)
        return found

    def put_many(
        self,
        context: Context,
        nodes: Sequence[MemoryNode],
        vectors: np.ndarray | None = None,
        rows: Sequence[int] | None = None,
        *,
        event: EventKind = EventKind.REMEMBERED,
    ) -> list[MemoryNode]:
        """Store new memories atomically (all or none); returns them as stored.

        ``vectors[rows[i]]`` (or ``vectors[i]``) is the embedding of ``nodes[i]``
        when given. A node whose id is already stored with the same record is
        returned as stored (retries are idempotent). An exact duplicate of a stored
        memory (same scope, kind and content; for episodic memories also the same
        time) and a near duplicate of a semantic or procedural one are not stored
        again: the existing memory is returned. A memory that contradicts a
        similar one in its scope is stored with ``contradicts`` links both ways.
        """
        context = self._check_context(context)
        if vectors is not None:
            vectors = np.asarray(vectors)
            rows = list(range(len(nodes))) if rows is None else list(rows)
            if len(rows) != len(nodes) or (rows and max(rows) >= len(vectors)):
                raise InvalidRequest("vectors", "do not match the nodes")
        vectors, rows = self._recall.contextualize(nodes, vectors, rows)
        now = self.clock.now()
        prepared = [
            self._prepare_new(n, None if vectors is None or rows is None else vectors[rows[i]], context, now)
            for i, n in enumerate(nodes)
        ]
        ids = [n.id for n in prepared]
        if len(set(ids)) != len(ids):
            raise InvalidRequest("nodes", "duplicate ids in one batch")
        fresh: list[MemoryNode] = []
        result: list[MemoryNode | None] = [None] * len(prepared)
        batch_hashes: dict[tuple[str, str], MemoryNode] = {}
        for i, n in enumerate(prepared):
            existing = self._nodes.get(n.id)
            if existing is not None:
                if existing.content_equal(evolve(n, created_at=existing.created_at, valid_from=existing.valid_from)):
                    result[i] = evolve(existing)  # a retried write: already durable
                    continue
                raise VersionConflict(n.id, 0, existing.version)
            dup = self._duplicate_of(n) if self.dedupe else None
            in_batch = batch_hashes.get((n.scope.key, _content_hash(n)))
            if (
                dup is None
                and self.dedupe
                and in_batch is not None
                and in_batch.kind is n.kind
                and (n.kind is not MemoryKind.EPISODIC or in_batch.valid_from == n.valid_from)
            ):
                dup = in_batch
            if dup is not None:
                result[i] = dup  # resolved to its stored form below
                continue
            batch_hashes[(n.scope.key, _content_hash(n))] = n
            fresh.append(n)
        # contradiction links, both ways (the old side is a versioned update)
        updates: dict[str, tuple[MemoryNode, int]] = {}
        for i, n in enumerate(fresh):
            others = self._contradicted(n) if self.detect_contradictions else []
            if not others:
                continue
            fresh[i] = evolve(n, contradicts=tuple(dict.fromkeys((*n.contradicts, *others))))
            for other_id in others:
                base = updates[other_id][0] if other_id in updates else self.store.get(other_id)
                if base is None:
                    continue
                expected = updates[other_id][1] if other_id in updates else base.version
                linked = evolve(base, contradicts=(*base.contradicts, n.id), version=expected + 1)
                updates[other_id] = (linked, expected)
        events = [self._event(event, n, context, now) for n in fresh]
        events += [
            self._event(EventKind.UPDATED, u, context, now, contradicted_by=u.contradicts[-1])
            for u, _ in updates.values()
        ]
        if fresh or updates:
            self._commit(WriteBatch(puts=fresh, updates=list(updates.values())), events)
        self.index.upsert(fresh)
        for n in fresh:
            self._remember_local(n)
            if n.kind is MemoryKind.EPISODIC:
                self._importance_since[n.scope.key] = self._importance_since.get(n.scope.key, 0.0) + n.importance
        for u, _ in updates.values():
            self._remember_local(u)
        stored = {n.id: n for n in fresh}
        out: list[MemoryNode] = []
        for i, n in enumerate(prepared):
            r = result[i]
            node = stored.get(n.id) if r is None else self._nodes.get(r.id, r)
            assert node is not None
            out.append(evolve(node.without_embedding()))
        return out

    def _remember_local(self, node: MemoryNode) -> None:
        """Mirror a committed node in the cache and the content-hash map."""
        old = self._nodes.get(node.id)
        if old is not None:
            self._hashes.get((old.scope.key, _content_hash(old)), set()).discard(old.id)
        self._nodes[node.id] = node.without_embedding()
        self._hashes.setdefault((node.scope.key, _content_hash(node)), set()).add(node.id)
        self._recall.on_indexed(node)
        if self.graph_policy.hops > 0:
            self.graph.add_memory(node)

    def _forget_local(self, memory_id: str) -> None:
        old = self._nodes.pop(memory_id, None)
        if old is not None:
            self._hashes.get((old.scope.key, _content_hash(old)), set()).discard(memory_id)
        self._touches.pop(memory_id, None)
        self._recall.on_removed(memory_id)
        if self.graph_policy.hops > 0:
            self.graph.remove_source(memory_id)

    def update(
        self,
        context: Context,
        memory_id: str,
        expected_version: int,
        changes: dict[str, Any],
        vector: np.ndarray | None = None,
    ) -> MemoryNode:
        """Compare-and-set: apply ``changes`` if the stored version is ``expected_version``.

        Changing ``content`` requires its new ``vector``. Raises VersionConflict,
        MemoryNotFound, ScopeViolation, InvalidMemory/InvalidRequest.
        """
        context = self._check_context(context)
        if isinstance(expected_version, bool) or not isinstance(expected_version, int):
            raise InvalidRequest("expected_version", "must be an int")
        if not isinstance(changes, dict) or not changes:
            raise InvalidRequest("changes", "must be a non-empty dict")
        bad = set(changes) - UPDATABLE
        if bad:
            raise InvalidRequest("changes", f"cannot update {sorted(bad)}")
        current = self._nodes.get(memory_id)
        if current is None:
            raise MemoryNotFound(memory_id)
        self._visible(current, context, "update")
        if "content" in changes and changes["content"] != current.content and vector is None:
            raise InvalidRequest("vector", "changing content needs the new content's embedding")
        base = self.store.get(memory_id)
        if base is None:
            raise MemoryNotFound(memory_id)
        new = evolve(base, **changes, version=expected_version + 1)
        if vector is not None:
            new = evolve(new, embedding=vector)
        new = new.validate(dim=self.dim, max_content_chars=self.max_content_chars)
        if base.version != expected_version:
            if base.version == expected_version + 1 and base.content_equal(new):
                return base.without_embedding()  # a retried update that already committed
            raise VersionConflict(memory_id, expected_version, base.version)
        now = self.clock.now()
        kind = EventKind.UPDATED
        if new.status is not base.status and new.status is MemoryStatus.ARCHIVED:
            kind = EventKind.ARCHIVED
        self._commit(
            WriteBatch(updates=[(new, expected_version)]),
            [self._event(kind, new, context, now, fields=sorted(changes))],
        )
        self.index.upsert([new])
        self._remember_local(new)
        return evolve(self._nodes[memory_id])

    def delete(self, context: Context, memory_id: str, expected_version: int | None = None) -> bool:
        """Forget a memory (hard delete from store and index). False if already gone."""
        context = self._check_context(context)
        if expected_version is not None and (
            isinstance(expected_version, bool) or not isinstance(expected_version, int)
        ):
            raise InvalidRequest("expected_version", "must be an int or None")
        current = self._nodes.get(memory_id)
        if current is None:
            return False
        self._visible(current, context, "forget")
        self._commit(
            WriteBatch(deletes=[(memory_id, expected_version)]),
            [self._event(EventKind.FORGOTTEN, current, context, self.clock.now())],
        )
        self.index.delete([memory_id])
        self._forget_local(memory_id)
        return True

    # ------------------------------------------------------------- keyed facts
    def assert_fact(
        self,
        context: Context,
        node: MemoryNode,
        vector: np.ndarray | None = None,
        strategy: Strategy | str | None = None,
    ) -> FactResult:
        """Write a new value of the keyed fact ``(node.scope, node.key)``.

        Reads the fact's current head, resolves ``node`` against it with
        ``strategy``, and commits with compare-and-set on the fact's slot — all
        inside a bounded retry loop, so concurrent writers (another shard
        instance, another process on the same store) never lose an update: a
        miss re-reads and re-resolves. Every assertion is one entry in the
        fact's history. The loser is kept: status ``deprecated``, ``valid_to``
        closed at the winner's ``valid_from``, ``contradicts`` linked both ways.
        An assertion of the current value reinforces it instead of storing a copy.
        """
        vectors = None if vector is None else np.asarray(vector, dtype=np.float32)[None, :]
        return self.assert_facts(context, [node], vectors, strategy)[0]

    def assert_facts(
        self,
        context: Context,
        nodes: Sequence[MemoryNode],
        vectors: np.ndarray | None = None,
        strategy: Strategy | str | None = None,
    ) -> list[FactResult]:
        """:meth:`assert_fact` for many assertions, resolved in order and committed in
        one transaction (group commit): all are applied or none."""
        context = self._check_context(context)
        chosen = Strategy.parse(strategy or self.policy.strategy)
        now = self.clock.now()
        if vectors is not None and len(vectors) != len(nodes):
            raise InvalidRequest("vectors", "do not match the nodes")
        prepared: list[MemoryNode] = []
        for i, node in enumerate(nodes):
            if not isinstance(node, MemoryNode) or not node.key:
                raise InvalidMemory("key", "a fact needs a key")
            new = self._prepare_new(node, None if vectors is None else vectors[i], context, now)
            if self._is_authority(context):
                new = evolve(new, tags=tuple(dict.fromkeys((*new.tags, AUTHORITY_TAG))))
            prepared.append(new)
        if len({n.id for n in prepared}) != len(prepared):
            raise InvalidRequest("nodes", "duplicate ids in one batch")
        last: VersionConflict | None = None
        for _ in range(self.policy.max_cas_retries):
            try:
                return self._assert_round(context, prepared, chosen, now)
            except VersionConflict as exc:
                last = exc
        assert last is not None
        raise last

    def _assert_round(
        self, context: Context, prepared: list[MemoryNode], strategy: Strategy, now: float
    ) -> list[FactResult]:
        """One optimistic attempt: read the slots, resolve in order, commit with CAS."""
        slots: dict[tuple[str, str], list[Any]] = {}  # -> [head_id, seq0, current, count]
        puts: dict[str, MemoryNode] = {}
        updates: dict[str, tuple[MemoryNode, int]] = {}
        events: list[Event] = []
        results: list[FactResult] = []

        def stage(changed: MemoryNode) -> None:
            """Record a changed existing node (a put of this batch, or a CAS update)."""
            if changed.id in puts:
                puts[changed.id] = changed
            elif changed.id in updates:
                updates[changed.id] = (changed, updates[changed.id][1])
            else:
                updates[changed.id] = (changed, changed.version - 1)

        for new in prepared:
            assert new.key is not None
            slot_key = (new.scope.key, new.key)
            if slot_key not in slots:
                head_id, seq0 = self.store.slot(*slot_key)
                slots[slot_key] = [head_id, seq0, self.store.get(head_id) if head_id else None, 0]
            state = slots[slot_key]
            current: MemoryNode | None = state[2]
            state[3] += 1
            fact_seq = state[1] + state[3]
            if (
                current is not None
                and current.status is MemoryStatus.ACTIVE
                and _content_hash(current) == _content_hash(new)
            ):
                bump = 0 if current.id in puts or current.id in updates else 1
                reinforced = evolve(
                    current,
                    confidence=max(current.confidence, new.confidence),
                    source_ids=(*current.source_ids[-49:], new.id),
                    version=current.version + bump,
                )
                stage(reinforced)
                state[2] = reinforced
                events.append(self._event(EventKind.ASSERTED, reinforced, context, now, outcome="reinforced",
                                          fact_seq=fact_seq, write=new.id))
                results.append(FactResult(reinforced, True, None, "reinforced", fact_seq, new.id))
                continue
            decision = resolve(current, new, strategy, half_life_days=self.policy.fact_half_life_days)
            fact = evolve(new, fact_seq=fact_seq)
            bump = 0 if current is not None and (current.id in puts or current.id in updates) else 1
            if current is None:
                outcome = "created"
                events.append(self._event(EventKind.ASSERTED, fact, context, now, outcome=outcome,
                                          fact_seq=fact_seq, write=fact.id))
            elif decision.new_wins:
                outcome = "superseded"
                fact = evolve(fact, contradicts=(*fact.contradicts, current.id))
                loser = evolve(current, status=MemoryStatus.DEPRECATED,
                                valid_to=max(fact.valid_from, current.valid_from),
                                contradicts=(*current.contradicts, fact.id), version=current.version + bump)
                stage(loser)
                events.append(self._event(EventKind.ASSERTED, fact, context, now, outcome=outcome, fact_seq=fact_seq,
                                          write=fact.id, replaced=current.id, reason=decision.reason))
                events.append(self._event(EventKind.DEPRECATED, loser, context, now, superseded_by=fact.id,
                                          reason=decision.reason))
            else:
                outcome = "rejected"
                fact = evolve(fact, status=MemoryStatus.DEPRECATED, valid_to=fact.valid_from,
                               contradicts=(*fact.contradicts, current.id))
                linked = evolve(current, contradicts=(*current.contradicts, fact.id), version=current.version + bump)
                stage(linked)
                state[2] = linked
                events.append(self._event(EventKind.DEPRECATED, fact, context, now, outcome=outcome, fact_seq=fact_seq,
                                          write=fact.id, kept=current.id, reason=decision.reason))
            puts[fact.id] = fact
            if outcome != "rejected":
                state[0], state[2] = fact.id, fact
            results.append(FactResult(fact, outcome != "rejected", current.id if current else None, outcome,
                                      fact_seq, fact.id))
        slot_writes = [SlotWrite(sk, k, st[1], st[0], st[3]) for (sk, k), st in slots.items()]
        self._commit(WriteBatch(puts=list(puts.values()), updates=list(updates.values()), slots=slot_writes), events)
        changed = list(puts.values()) + [u for u, _ in updates.values()]
        self.index.upsert(changed)
        for n in changed:
            self._remember_local(n)
        final = {n.id: n for n in changed}
        return [
            evolve(r, node=final.get(r.node.id, r.node).without_embedding()) for r in results
        ]

    def _is_authority(self, context: Context) -> bool:
        names = set(self.policy.authorities)
        return bool(
            (context.agent and context.agent in names) or any(f"role:{r}" in names for r in context.roles)
        )

    def current_fact(self, context: Context, key: str, scope: Scope) -> MemoryNode | None:
        context = self._check_context(context)
        if not scope.visible_to(context):
            raise ScopeViolation("read", str(scope), str(context))
        head_id, _ = self.store.slot(scope.key, key)
        node = self._nodes.get(head_id) if head_id else None
        return evolve(node) if node else None

    def history(self, context: Context, key: str, scope: Scope) -> list[Event]:
        """Every assertion of a keyed fact, in commit order, with its outcome."""
        context = self._check_context(context)
        if not scope.visible_to(context):
            raise ScopeViolation("read", str(scope), str(context))
        # the store indexes a fact's events by key: no scan of the scope's log
        return [Event.decode(blob, seq) for seq, blob in self.store.fact_events(scope.key, key)]

    # ---------------------------------------------------------------- broadcast
    def broadcast_source(self, context: Context, memory_id: str, to: Level | str) -> MemoryNode:
        """Check a broadcast of ``memory_id`` to the wider level ``to`` and build the copy.

        Only the memory's owner (the agent, or for agent-less memories the user, it
        belongs to) or an authority may widen it; widening never narrows. The copy
        has a deterministic id, so broadcasting twice yields one copy.
        """
        context = self._check_context(context)
        node = self._nodes.get(memory_id)
        if node is None:
            raise MemoryNotFound(memory_id)
        self._visible(node, context, "broadcast")
        try:
            level = Level(to)
        except ValueError:
            raise InvalidRequest("to", f"unknown scope level {to!r}") from None
        if level not in (Level.USER, Level.ORG):
            raise InvalidRequest("to", "broadcast widens to 'user' or 'org'")
        target = node.scope.widen(level)
        if target == node.scope:
            raise InvalidRequest("to", f"{node.scope} is not narrower than {level.value}")
        owner = (
            (node.scope.agent and node.scope.agent == context.agent)
            or (not node.scope.agent and node.scope.user and node.scope.user == context.user)
            or (node.source == f"agent:{context.agent}" and bool(context.agent))
        )
        if not owner and not self._is_authority(context):
            raise ScopeViolation("broadcast", str(node.scope), str(context))
        stored = self.store.get(memory_id)
        if stored is None:
            raise MemoryNotFound(memory_id)
        copy_id = str(uuid.uuid5(uuid.UUID(memory_id), f"broadcast:{target.key}"))
        return MemoryNode(
            id=copy_id,
            content=stored.content,
            scope=target,
            kind=stored.kind,
            structured=dict(stored.structured),
            embedding=stored.embedding,
            key=stored.key,
            created_at=stored.created_at,
            last_accessed=stored.created_at,
            decay_rate=stored.decay_rate,
            valid_from=stored.valid_from,
            valid_to=stored.valid_to,
            parents=(memory_id,),
            confidence=round(stored.confidence * self.policy.broadcast_discount, 12),
            importance=stored.importance,
            source=f"broadcast:{context.agent or context.user}",
            source_ids=(memory_id,),
            tags=stored.tags,
        )

    def put_broadcast(self, context: Context, copy: MemoryNode) -> MemoryNode:
        """Store a broadcast copy (idempotent: an existing copy is returned as is)."""
        context = self._check_context(context)
        existing = self._nodes.get(copy.id)
        if existing is not None:
            return evolve(existing)
        prepared = self._prepare_new(evolve(copy, version=0), None, context, self.clock.now())
        now = self.clock.now()
        self._commit(
            WriteBatch(puts=[prepared]),
            [self._event(EventKind.BROADCAST, prepared, context, now, origin=copy.parents[0])],
        )
        self.index.upsert([prepared])
        self._remember_local(prepared)
        return prepared.without_embedding()

    # -------------------------------------------------------------- maintenance
    def _system_event(self, kind: EventKind, node: MemoryNode, actor: str, now: float, **data: Any) -> Event:
        return Event(kind, node.without_embedding(), now, actor, 0, data)

    def decay_sweep(self, now: float, policy: DecayPolicy, chunk: int = 2000) -> dict[str, int]:
        """Archive memories whose salience fell below the policy's threshold and remove
        working memories past their TTL, from store and index, with an event each.

        Archived memories are kept (status ``archived``): default recall skips them,
        ``include_archived=True`` finds them. Each chunk is one atomic commit.
        """
        plan = plan_decay(list(self._nodes.values()), now, policy)
        archived = expired = 0
        for start in range(0, len(plan.archive), chunk):
            ids = plan.archive[start : start + chunk]
            stored = [n for n in self.store.get_many(ids) if n is not None]
            changed = [evolve(n, status=MemoryStatus.ARCHIVED, version=n.version + 1) for n in stored]
            events = [self._system_event(EventKind.ARCHIVED, n, "decay", now) for n in changed]
            self._commit(WriteBatch(updates=[(n, n.version - 1) for n in changed]), events)
            self.index.set_status([n.id for n in changed], MemoryStatus.ARCHIVED)
            for n in changed:
                self._remember_local(n)
            archived += len(changed)
        for start in range(0, len(plan.expire), chunk):
            ids = [i for i in plan.expire[start : start + chunk] if i in self._nodes]
            events = [self._system_event(EventKind.EXPIRED, self._nodes[i], "decay", now) for i in ids]
            self._commit(WriteBatch(deletes=[(i, None) for i in ids]), events)
            self.index.delete(ids)
            for i in ids:
                self._forget_local(i)
            expired += len(ids)
        return {"scanned": plan.scanned, "archived": archived, "expired": expired}

    def consolidation_plan(
        self, now: float, policy: ConsolidationPolicy, scopes: Sequence[str] | None = None, due_only: bool = False
    ) -> list[Cluster]:
        """Clusters of recent episodic memories, per scope, ready to consolidate.

        ``scopes`` limits the scopes; ``due_only`` takes only scopes whose new episodic
        memories' importance reached ``policy.reflect_importance`` (the reflection trigger).
        """
        candidates = recent_episodic(list(self._nodes.values()), now, policy)
        by_scope: dict[str, list[str]] = {}
        for n in candidates:
            by_scope.setdefault(n.scope.key, []).append(n.id)
        wanted = set(scopes) if scopes is not None else set(by_scope)
        if due_only:
            wanted &= {k for k, v in self._importance_since.items() if v >= policy.reflect_importance}
        clusters: list[Cluster] = []
        for scope_key in sorted(wanted & set(by_scope)):
            members = [n for n in self.store.get_many(by_scope[scope_key]) if n is not None]
            clusters += cluster_memories(members, policy)
        return clusters

    def apply_consolidation(
        self, member_ids: Sequence[str], text: str, vector: np.ndarray, now: float, policy: ConsolidationPolicy
    ) -> MemoryNode | None:
        """Turn a cluster into one semantic memory, atomically: the new memory and the
        sources' change to ``consolidated`` (faster decay, ``children`` link) commit
        together. Idempotent: the semantic memory's id derives from its sources, and
        sources already consolidated are not consolidated again. Returns the semantic
        memory, or None when nothing was left to do."""
        stored = [n for n in self.store.get_many(sorted(member_ids)) if n is not None]
        members = [n for n in stored if n.status is MemoryStatus.ACTIVE and n.kind is MemoryKind.EPISODIC]
        cluster = Cluster(stored[0].scope.key if stored else "", sorted(stored, key=lambda n: n.id), np.zeros(1))
        existing = self._nodes.get(cluster.semantic_id())
        if existing is not None:
            return evolve(existing)
        if len(members) < policy.min_cluster or len(members) != len(stored):
            return None
        sem = consolidated_node(cluster, text, now)
        sem = evolve(sem, embedding=np.asarray(vector, dtype=np.float32).reshape(-1), version=1)
        sem = sem.validate(dim=self.dim, max_content_chars=self.max_content_chars)
        others = self._contradicted(sem) if self.detect_contradictions else []
        updates: dict[str, tuple[MemoryNode, int]] = {}
        if others:
            sem = evolve(sem, contradicts=tuple(others))
            for other_id in others:
                base = self.store.get(other_id)
                if base is not None:
                    updates[other_id] = (evolve(base, contradicts=(*base.contradicts, sem.id),
                                                 version=base.version + 1), base.version)
        for m in members:
            updates[m.id] = (
                evolve(
                    m,
                    status=MemoryStatus.CONSOLIDATED,
                    decay_rate=min(100.0, m.decay_rate * policy.source_decay_factor),
                    children=(*m.children, sem.id),
                    version=m.version + 1,
                ),
                m.version,
            )
        events = [self._system_event(EventKind.REMEMBERED, sem, "consolidation", now, sources=len(members))]
        events += [self._system_event(EventKind.CONSOLIDATED, u, "consolidation", now, into=sem.id)
                   for u, _ in updates.values() if u.id in {m.id for m in members}]
        self._commit(WriteBatch(puts=[sem], updates=list(updates.values())), events)
        changed = [sem] + [u for u, _ in updates.values()]
        self.index.upsert(changed)
        for n in changed:
            self._remember_local(n)
        self._importance_since.pop(sem.scope.key, None)
        return sem.without_embedding()

    # ------------------------------------------------------------ event replay
    def read_events(
        self, context: Context, cursors: dict[str, int], flt: EventFilter | None = None, limit: int = 1000
    ) -> tuple[list[Event], dict[str, int]]:
        """Events after ``cursors[scope_key]`` for every scope that ``context`` may see,
        in per-scope order, keeping only those it could recall and ``flt`` selects.

        Returns the events and the new cursors (advanced past events filtered out).
        """
        context = self._check_context(context)
        flt = flt or EventFilter()
        out: list[Event] = []
        new_cursors: dict[str, int] = {}
        for scope in context.visible_scopes():
            after = int(cursors.get(scope.key, 0))
            for seq, blob in self.store.read_events(scope.key, after, limit):
                ev = Event.decode(blob, seq)
                if deliverable(ev, context, flt):
                    out.append(ev)
                after = seq
            new_cursors[scope.key] = after
        return out, new_cursors

    def last_seqs(self, context: Context) -> dict[str, int]:
        context = self._check_context(context)
        return {s.key: self.store.last_seq(s.key) for s in context.visible_scopes()}

    # ------------------------------------------------------------------- reads
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
        :mod:`memorybus.retrieval.hybrid`), followed by the expansions ``options`` asks for.

        Visibility is enforced here twice: the indexes are filtered to the
        context's visible scope keys, and every candidate is checked again.
        ``as_of``: the state at that time — memories valid then (``valid_from <= t <
        valid_to``), including facts deprecated since, excluding later ones.
        """
        plan = self.plan_search(
            context, k, kinds=kinds, statuses=statuses, touch=touch, as_of=as_of, query=query, options=options
        )
        return self.run_search(plan, vector)

    def plan_search(
        self,
        context: Context,
        k: int = 10,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        statuses: Sequence[MemoryStatus] | None = None,
        touch: bool = True,
        as_of: float | None = None,
        query: str | None = None,
        options: RecallOptions | None = None,
    ) -> tuple[SearchPlan, dict[str, float]]:
        """The part of :meth:`search` that needs no query vector (checks, keyword
        candidates, graph links): the actor runs it while the query is embedded."""
        plan = self._recall.plan(
            context, k, kinds=kinds, statuses=statuses, touch=touch, as_of=as_of, query=query, options=options
        )
        # memories the temporal graph links to the query's entities: one more fused signal
        use_graph = self.ranking.graph > 0 and self._recall.has_facts(plan.context)
        linked = self._graph_links(plan.context, query, plan.options.as_of) if query and use_graph else {}
        return plan, linked

    def run_search(self, planned: tuple[SearchPlan, dict[str, float]], vector: np.ndarray) -> list[RecallHit]:
        """Finish a search planned by :meth:`plan_search` with the query vector."""
        plan, linked = planned
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
        return self._recall.pinned(context)

    def list_scope(self, context: Context, scope_key: str) -> list[MemoryNode]:
        context = self._check_context(context)
        return [n for n in self._nodes.values() if n.scope.key == scope_key and n.scope.visible_to(context)]

    def count(self) -> int:
        return len(self._nodes)

    # ------------------------------------------------------------------ access
    def _touch(self, ids: Sequence[str], now: float) -> None:
        for memory_id in ids:
            node = self._nodes[memory_id]
            node.access_count += 1
            node.last_accessed = max(node.last_accessed, now)
            count, _ = self._touches.get(memory_id, (0, now))
            self._touches[memory_id] = (count + 1, now)
        if time.monotonic() - self._last_flush >= self.touch_flush_seconds:
            self.flush()

    def flush(self) -> int:
        """Write pending access statistics to the store; returns how many nodes."""
        pending, self._touches = self._touches, {}
        self._last_flush = time.monotonic()
        if pending:
            self.store.touch(pending)
        return len(pending)

    def close(self) -> None:
        self.flush()
        self.index.close()
        self.store.close()
