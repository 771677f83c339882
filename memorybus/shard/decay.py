"""Decay on the shard: memories whose salience fell below the policy's threshold are
archived, working memories past their TTL removed, in atomic, resumable chunks."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from memorybus.maintenance import DecayPolicy, plan_decay
from memorybus.memory.events import EventKind
from memorybus.memory.model import MemoryNode, MemoryStatus, evolve
from memorybus.scopes import Context
from memorybus.shard.job import Job
from memorybus.storage.base import WriteBatch

#: the owner of maintenance operation records (they act for no caller's context)
SYSTEM = "system"


def managed(nodes: Iterable[MemoryNode], within: Context | None) -> list[MemoryNode]:
    """The nodes whose scope ``within`` manages (all of them for None)."""
    if within is None:
        return list(nodes)
    return [n for n in nodes if within.manages(n.scope)]


class Decay(Job):
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
        call = self.core.op_call("decay", SYSTEM, op)
        done, answer = self.core.recorded(call)
        if done:
            return answer
        archived = expired = first = 0
        while op is not None:  # chunks an earlier, interrupted run of this sweep committed
            done, answer = self.core.recorded(self.core.op_call("decay", SYSTEM, f"{op}/{first}"))
            if not done:
                break
            archived, expired, first = answer["archived"], answer["expired"], first + 1
        plan = plan_decay(managed(self.core.nodes.values(), within), now, policy)
        steps = [("archive", plan.archive[i : i + chunk]) for i in range(0, len(plan.archive), chunk)]
        steps += [("expire", plan.expire[i : i + chunk]) for i in range(0, len(plan.expire), chunk)]
        for n, (what, planned) in enumerate(steps):
            sub = None if op is None else f"{op}/{first + n}"
            step = call if n == len(steps) - 1 else self.core.op_call("decay", SYSTEM, sub)
            if what == "archive":
                stored = [x for x in self.core.store.get_many(planned) if x is not None]
                changed = [evolve(x, status=MemoryStatus.ARCHIVED, version=x.version + 1) for x in stored]
                events = [self.core.system_event(EventKind.ARCHIVED, x, "decay", now) for x in changed]
                archived += len(changed)
                batch = WriteBatch(updates=[(x, x.version - 1) for x in changed])
                apply = self._archive_applier(changed)
            else:
                ids = [i for i in planned if i in self.core.nodes]
                events = [self.core.system_event(EventKind.EXPIRED, self.core.nodes[i], "decay", now) for i in ids]
                expired += len(ids)
                batch = WriteBatch(deletes=[(i, None) for i in ids])
                apply = self._expire_applier(ids)
            counts = {"scanned": plan.scanned, "archived": archived, "expired": expired}
            if batch:
                counts = self.core.commit(step, batch, events, counts, apply)
        return {"scanned": plan.scanned, "archived": archived, "expired": expired}

    def _archive_applier(self, changed: list[MemoryNode]) -> Callable[[], None]:
        def apply() -> None:
            self.core.index.set_status([x.id for x in changed], MemoryStatus.ARCHIVED)
            for x in changed:
                self.core.mirror(x)

        return apply

    def _expire_applier(self, ids: list[str]) -> Callable[[], None]:
        def apply() -> None:
            self.core.index.delete(ids)
            for i in ids:
                self.core.forget(i)

        return apply
