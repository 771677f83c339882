"""Broadcast on the shard: a memory widened to its user's or org's scope, as a copy.

The copy has a deterministic id (from the original and the target scope), so
broadcasting twice yields one copy; its ``source`` is in a namespace only
:meth:`Broadcasts.put_broadcast` writes, so nobody can plant a node that passes
for it."""

from __future__ import annotations

from memorybus.errors import InvalidRequest, MemoryNotFound, ScopeViolation
from memorybus.memory.events import EventKind
from memorybus.memory.model import MemoryNode, broadcast_copy_id, evolve
from memorybus.scopes import Context, Level, Scope
from memorybus.shard.job import Job
from memorybus.shard.writes import BROADCAST_SOURCE
from memorybus.storage.base import WriteBatch

#: what a broadcast copy keeps of the original as it is stored; the rest is the copy's
#: own (id, scope, provenance, discounted confidence) or starts afresh (access
#: statistics, status, relations, conversation structure)
CARRIED = ("content", "kind", "embedding", "key", "created_at", "decay_rate", "valid_from", "valid_to",
           "importance", "tags")  # fmt: skip


def broadcast_id(target: Scope, memory_id: str) -> str:
    """The id of ``memory_id``'s broadcast copy in ``target`` (deterministic: one copy)."""
    return broadcast_copy_id(memory_id, target)


class Broadcasts(Job):
    def broadcast_source(self, context: Context, memory_id: str, to: Level | str) -> MemoryNode:
        """Check a broadcast of ``memory_id`` to the wider level ``to`` and build the copy.

        Only the memory's owner (the agent, or for agent-less memories the user, it
        belongs to) or an authority may widen it; widening never narrows. The copy
        has a deterministic id, so broadcasting twice yields one copy.
        """
        context = self.core.check_context(context)
        node = self.core.nodes.get(memory_id)
        if node is None:
            raise MemoryNotFound(memory_id)
        self.core.visible(node, context, "broadcast")
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
        if not owner and not self.core.is_authority(context):
            raise ScopeViolation("broadcast")
        stored = self.core.store.get(memory_id)
        if stored is None:
            raise MemoryNotFound(memory_id)
        carried = {name: getattr(stored, name) for name in CARRIED}
        return MemoryNode(
            **carried,
            id=broadcast_id(target, memory_id),
            scope=target,
            structured=dict(stored.structured),
            last_accessed=stored.created_at,
            parents=(memory_id,),
            confidence=round(stored.confidence * self.core.policy.broadcast_discount, 12),
            source=f"{BROADCAST_SOURCE}{context.agent or context.user}",
            source_ids=(memory_id,),
        )

    def put_broadcast(self, context: Context, copy: MemoryNode, *, op: str | None = None) -> MemoryNode:
        """Store a broadcast copy (idempotent: the existing copy is returned as is).

        A node already at the copy's id is returned only if it is that copy: in the
        copy's scope, visible to the caller, a broadcast (its ``source`` is in the
        namespace only this method writes) of the same original. Anything else there is
        refused with ScopeViolation and nothing changes: a broadcast never reports
        success with someone else's node.
        """
        context = self.core.check_context(context)
        call = self.core.op_call("broadcast", context, op)
        if not isinstance(copy, MemoryNode) or len(copy.parents) != 1 \
                or copy.id != broadcast_id(copy.scope, copy.parents[0]) \
                or not copy.source.startswith(BROADCAST_SOURCE):
            raise InvalidRequest("copy", "is not a broadcast copy")
        existing = self.core.nodes.get(copy.id)
        if existing is not None:
            if not (existing.scope == copy.scope and existing.scope.visible_to(context)
                    and existing.parents == copy.parents and existing.source.startswith(BROADCAST_SOURCE)):
                raise ScopeViolation("broadcast")
            return evolve(existing)
        prepared = self.core.prepare_new(evolve(copy, version=0), None, context, self.core.clock.now())
        now = self.core.clock.now()
        return self.core.commit(
            call,
            WriteBatch(puts=[prepared]),
            [self.core.event(EventKind.BROADCAST, prepared, context, now, origin=copy.parents[0])],
            prepared.without_embedding(),
            self.core.apply_changed([prepared]),
        )
