"""Consolidation on the shard: clusters of recent episodic memories planned per scope,
and a cluster turned into one semantic memory in one atomic, idempotent commit."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memorybus.errors import ScopeViolation
from memorybus.maintenance import Cluster, ConsolidationPolicy, cluster_memories, consolidated_node, recent_episodic
from memorybus.memory.events import EventKind
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus, evolve
from memorybus.scopes import Context
from memorybus.shard.decay import SYSTEM, managed
from memorybus.shard.job import Job
from memorybus.shard.similar import contradicted
from memorybus.storage.base import WriteBatch


class Consolidation(Job):
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
        candidates = recent_episodic(managed(self.core.nodes.values(), within), now, policy)
        by_scope: dict[str, list[str]] = {}
        for n in candidates:
            by_scope.setdefault(n.scope.key, []).append(n.id)
        wanted = set(scopes) if scopes is not None else set(by_scope)
        if due_only:
            wanted &= {k for k, v in self.core.importance_since.items() if v >= policy.reflect_importance}
        clusters: list[Cluster] = []
        for scope_key in sorted(wanted & set(by_scope)):
            members = [n for n in self.core.store.get_many(by_scope[scope_key]) if n is not None]
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
        call = self.core.op_call("consolidate", SYSTEM, op)
        done, answer = self.core.recorded(call)
        if done:
            return answer
        stored = [n for n in self.core.store.get_many(sorted(member_ids)) if n is not None]
        if not stored:
            return None
        if within is not None and not all(within.manages(n.scope) for n in stored):
            raise ScopeViolation("consolidate")
        members = [n for n in stored if n.status is MemoryStatus.ACTIVE and n.kind is MemoryKind.EPISODIC]
        cluster = Cluster(stored[0].scope.key, sorted(stored, key=lambda n: n.id), np.zeros(1))
        existing = self.core.nodes.get(cluster.semantic_id())
        if existing is not None:
            return evolve(existing)
        if len(members) < policy.min_cluster or len(members) != len(stored):
            return None
        sem = consolidated_node(cluster, text, now)
        sem = evolve(sem, embedding=np.asarray(vector, dtype=np.float32).reshape(-1), version=1)
        sem = sem.validate(dim=self.core.dim, max_content_chars=self.core.limits.max_content_chars)
        others = contradicted(self.core, sem)
        updates: dict[str, tuple[MemoryNode, int]] = {}
        if others:
            sem = evolve(sem, contradicts=tuple(others))
            for other_id in others:
                base = self.core.store.get(other_id)
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
        events = [self.core.system_event(EventKind.REMEMBERED, sem, "consolidation", now, sources=len(members))]
        events += [self.core.system_event(EventKind.CONSOLIDATED, u, "consolidation", now, into=sem.id)
                   for u, _ in updates.values() if u.id in {m.id for m in members}]
        changed = [sem] + [u for u, _ in updates.values()]

        def apply() -> None:
            self.core.index.upsert(changed)
            for n in changed:
                self.core.mirror(n)
            self.core.importance_since.pop(sem.scope.key, None)

        return self.core.commit(
            call, WriteBatch(puts=[sem], updates=list(updates.values())), events, sem.without_embedding(), apply
        )
