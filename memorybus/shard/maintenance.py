"""The shard's side of broadcast, decay and consolidation, and event replay."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from memorybus.errors import InvalidRequest, MemoryNotFound, ScopeViolation
from memorybus.events import Event, EventFilter, EventKind, deliverable
from memorybus.maintenance import (
    Cluster,
    ConsolidationPolicy,
    DecayPolicy,
    cluster_memories,
    consolidated_node,
    plan_decay,
    recent_episodic,
)
from memorybus.model import MemoryKind, MemoryNode, MemoryStatus, broadcast_copy_id, evolve
from memorybus.scopes import Context, Level, Scope
from memorybus.shard.state import _ShardState
from memorybus.shard.writes import BROADCAST_SOURCE
from memorybus.storage.base import WriteBatch

#: the owner of maintenance operation records (they act for no caller's context)
_SYSTEM = "system"


def _managed(nodes: Iterable[MemoryNode], within: Context | None) -> list[MemoryNode]:
    """The nodes whose scope ``within`` manages (all of them for None)."""
    if within is None:
        return list(nodes)
    return [n for n in nodes if within.manages(n.scope)]


def broadcast_id(target: Scope, memory_id: str) -> str:
    """The id of ``memory_id``'s broadcast copy in ``target`` (deterministic: one copy)."""
    return broadcast_copy_id(memory_id, target)


class MaintenanceMixin(_ShardState):
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
            raise ScopeViolation("broadcast")
        stored = self.store.get(memory_id)
        if stored is None:
            raise MemoryNotFound(memory_id)
        copy_id = broadcast_id(target, memory_id)
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
            source=f"{BROADCAST_SOURCE}{context.agent or context.user}",
            source_ids=(memory_id,),
            tags=stored.tags,
        )

    def put_broadcast(self, context: Context, copy: MemoryNode, *, op: str | None = None) -> MemoryNode:
        """Store a broadcast copy (idempotent: the existing copy is returned as is).

        A node already at the copy's id is returned only if it is that copy: in the
        copy's scope, visible to the caller, a broadcast (its ``source`` is in the
        namespace only this method writes) of the same original. Anything else there is
        refused with ScopeViolation and nothing changes: a broadcast never reports
        success with someone else's node.
        """
        context = self._check_context(context)
        call = self._op_call("broadcast", context, op)
        if not isinstance(copy, MemoryNode) or len(copy.parents) != 1 \
                or copy.id != broadcast_id(copy.scope, copy.parents[0]) \
                or not copy.source.startswith(BROADCAST_SOURCE):
            raise InvalidRequest("copy", "is not a broadcast copy")
        existing = self._nodes.get(copy.id)
        if existing is not None:
            if not (existing.scope == copy.scope and existing.scope.visible_to(context)
                    and existing.parents == copy.parents and existing.source.startswith(BROADCAST_SOURCE)):
                raise ScopeViolation("broadcast")
            return evolve(existing)
        prepared = self._prepare_new(evolve(copy, version=0), None, context, self.clock.now())
        now = self.clock.now()

        def apply() -> None:
            self.index.upsert([prepared])
            self._remember_local(prepared)

        return self._commit_op(
            call,
            WriteBatch(puts=[prepared]),
            [self._event(EventKind.BROADCAST, prepared, context, now, origin=copy.parents[0])],
            prepared.without_embedding(),
            apply,
        )

    # -------------------------------------------------------------- maintenance
    def _system_event(self, kind: EventKind, node: MemoryNode, actor: str, now: float, **data: Any) -> Event:
        return Event(kind, node.without_embedding(), now, actor, 0, data)

    def decay_sweep(
        self,
        now: float,
        policy: DecayPolicy,
        chunk: int = 2000,
        *,
        op: str | None = None,
        within: Context | None = None,
    ) -> dict[str, int]:
        """Archive memories whose salience fell below the policy's threshold and remove
        working memories past their TTL, from store and index, with an event each.

        ``within``: only memories whose scope that context manages
        (:meth:`~memorybus.scopes.Context.manages`); None sweeps every memory (the
        scheduled, operator-wide run). Archived memories are kept (status ``archived``): default recall skips them,
        ``include_archived=True`` finds them. Each chunk is one atomic commit with its
        own operation record (``op/<n>``, the counts so far); the last one records
        ``op`` itself. A re-execution answers the first outcome, and one that finds a
        sweep cut short resumes it, counting what the first run already did.
        """
        call = self._op_call("decay", _SYSTEM, op)
        done, answer = self._recorded(call)
        if done:
            return answer
        archived = expired = first = 0
        while op is not None:  # chunks an earlier, interrupted run of this sweep committed
            done, answer = self._recorded(self._op_call("decay", _SYSTEM, f"{op}/{first}"))
            if not done:
                break
            archived, expired, first = answer["archived"], answer["expired"], first + 1
        plan = plan_decay(_managed(self._nodes.values(), within), now, policy)
        steps = [("archive", plan.archive[i : i + chunk]) for i in range(0, len(plan.archive), chunk)]
        steps += [("expire", plan.expire[i : i + chunk]) for i in range(0, len(plan.expire), chunk)]
        for n, (what, planned) in enumerate(steps):
            sub = None if op is None else f"{op}/{first + n}"
            step = call if n == len(steps) - 1 else self._op_call("decay", _SYSTEM, sub)
            if what == "archive":
                stored = [x for x in self.store.get_many(planned) if x is not None]
                changed = [evolve(x, status=MemoryStatus.ARCHIVED, version=x.version + 1) for x in stored]
                events = [self._system_event(EventKind.ARCHIVED, x, "decay", now) for x in changed]
                archived += len(changed)
                batch = WriteBatch(updates=[(x, x.version - 1) for x in changed])
                apply = self._archive_applier(changed)
            else:
                ids = [i for i in planned if i in self._nodes]
                events = [self._system_event(EventKind.EXPIRED, self._nodes[i], "decay", now) for i in ids]
                expired += len(ids)
                batch = WriteBatch(deletes=[(i, None) for i in ids])
                apply = self._expire_applier(ids)
            counts = {"scanned": plan.scanned, "archived": archived, "expired": expired}
            if batch:
                counts = self._commit_op(step, batch, events, counts, apply)
        return {"scanned": plan.scanned, "archived": archived, "expired": expired}

    def _archive_applier(self, changed: list[MemoryNode]) -> Callable[[], None]:
        def apply() -> None:
            self.index.set_status([x.id for x in changed], MemoryStatus.ARCHIVED)
            for x in changed:
                self._remember_local(x)

        return apply

    def _expire_applier(self, ids: list[str]) -> Callable[[], None]:
        def apply() -> None:
            self.index.delete(ids)
            for i in ids:
                self._forget_local(i)

        return apply

    def consolidation_plan(
        self,
        now: float,
        policy: ConsolidationPolicy,
        scopes: Sequence[str] | None = None,
        due_only: bool = False,
        *,
        within: Context | None = None,
    ) -> list[Cluster]:
        """Clusters of recent episodic memories, per scope, ready to consolidate.

        ``scopes`` limits the scopes; ``due_only`` takes only scopes whose new episodic
        memories' importance reached ``policy.reflect_importance`` (the reflection trigger);
        ``within``: only scopes that context manages (None: every scope).
        """
        candidates = recent_episodic(_managed(self._nodes.values(), within), now, policy)
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
        self,
        member_ids: Sequence[str],
        text: str,
        vector: np.ndarray,
        now: float,
        policy: ConsolidationPolicy,
        *,
        op: str | None = None,
        within: Context | None = None,
    ) -> MemoryNode | None:
        """Turn a cluster into one semantic memory, atomically: the new memory and the
        sources' change to ``consolidated`` (faster decay, ``children`` link) commit
        together. Idempotent: the semantic memory's id derives from its sources, and
        sources already consolidated are not consolidated again. Returns the semantic
        memory, or None when nothing was left to do. A re-execution (same ``op``)
        answers the first outcome. ``within``: every source must be in a scope that
        context manages, else ScopeViolation and nothing changes."""
        call = self._op_call("consolidate", _SYSTEM, op)
        done, answer = self._recorded(call)
        if done:
            return answer
        stored = [n for n in self.store.get_many(sorted(member_ids)) if n is not None]
        if not stored:
            return None
        if within is not None and not all(within.manages(n.scope) for n in stored):
            raise ScopeViolation("consolidate")
        members = [n for n in stored if n.status is MemoryStatus.ACTIVE and n.kind is MemoryKind.EPISODIC]
        cluster = Cluster(stored[0].scope.key, sorted(stored, key=lambda n: n.id), np.zeros(1))
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
        changed = [sem] + [u for u, _ in updates.values()]

        def apply() -> None:
            self.index.upsert(changed)
            for n in changed:
                self._remember_local(n)
            self._importance_since.pop(sem.scope.key, None)

        return self._commit_op(
            call, WriteBatch(puts=[sem], updates=list(updates.values())), events, sem.without_embedding(), apply
        )

    # ------------------------------------------------------------ event replay
    def read_events(
        self, context: Context, cursors: dict[str, int], flt: EventFilter | None = None, limit: int = 1000
    ) -> tuple[list[Event], dict[str, int]]:
        """One page of :meth:`read_events_page`, without the "more" flag."""
        events, new_cursors, _ = self.read_events_page(context, cursors, flt, limit)
        return events, new_cursors

    def read_events_page(
        self, context: Context, cursors: dict[str, int], flt: EventFilter | None = None, limit: int = 1000
    ) -> tuple[list[Event], dict[str, int], bool]:
        """Events after ``cursors[scope_key]`` for every scope that ``context`` may see,
        in per-scope order, keeping only those it could recall and ``flt`` selects.

        Reads at most ``limit`` log entries in all (a page: replay from the start of a
        long log never loads it at once). Returns the events, the new cursors (advanced
        past events filtered out; scopes not reached keep theirs) and whether more
        entries may follow.
        """
        context = self._check_context(context)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidRequest("limit", "must be a positive int")
        flt = flt or EventFilter()
        out: list[Event] = []
        new_cursors: dict[str, int] = {}
        left = limit
        more = False
        for scope in context.visible_scopes():
            if left <= 0:
                more = True
                break
            after = int(cursors.get(scope.key, 0))
            rows = self.store.read_events(scope.key, after, left)
            for seq, blob in rows:
                ev = Event.decode(blob, seq)
                if deliverable(ev, context, flt):
                    out.append(ev)
                after = seq
            new_cursors[scope.key] = after
            left -= len(rows)
            more = more or left <= 0
        return out, new_cursors, more

    def last_seqs(self, context: Context) -> dict[str, int]:
        context = self._check_context(context)
        return {s.key: self.store.last_seq(s.key) for s in context.visible_scopes()}
