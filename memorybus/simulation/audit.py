"""End-of-run audits through the public API: lost writes, duplicates, delivery.

- A write is *lost* when the bus acknowledged it and afterwards the memory is
  missing or holds other content (``get`` from the writer's own scope), or, for
  a keyed fact, when the fact's history has no entry for the acknowledged write.
- A fact assertion is *duplicated* when its history holds it more than once (a
  retried call applied twice). Memories the bus holds beyond everything
  acknowledged, every summary consolidation reported and every write that failed
  (which may still have landed) are *unaccounted*.
- Events: for every subscription, the acknowledged fact writes and broadcasts
  it may see are *committed* to it; those it received are *delivered*.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from typing import Any

from memorybus.client import MemoryBus
from memorybus.errors import MemoryNotFound
from memorybus.scopes import Context
from memorybus.simulation.agent import FAULTS
from memorybus.simulation.grading import visible
from memorybus.simulation.tasks import Ack, AgentSpec, Received

ScopeTuple = tuple[str, str, str, str]


async def _gather(coros: list[Any], width: int = 32) -> list[Any]:
    out: list[Any] = []
    for i in range(0, len(coros), width):
        out += await asyncio.gather(*coros[i : i + width], return_exceptions=True)
    return out


async def lost_writes(bus: MemoryBus, acks: list[Ack], timeout: float = 60.0) -> dict[str, Any]:
    """Every acknowledged memory, read back from the scope it was written to."""
    nodes: dict[str, Ack] = {}
    for a in acks:
        nodes.setdefault(a.node, a)

    async def one(a: Ack) -> str | None:
        for attempt in range(3):
            try:
                got = await asyncio.wait_for(bus.get_async(a.node, Context(*a.scope)), timeout)
            except MemoryNotFound:
                return "missing"
            except FAULTS as exc:  # a restarting part: ask again
                if attempt == 2:
                    return f"unreadable: {type(exc).__name__}"
                await asyncio.sleep(1.0)
                continue
            return None if got.content == a.content else "changed"
        return "unreadable"  # pragma: no cover

    results = await _gather([one(a) for a in nodes.values()])
    bad = [{"memory": a.node, "write": a.write, "problem": str(r)} for a, r in zip(nodes.values(), results,
                                                                                     strict=True) if r]
    return {"checked": len(nodes), "lost": len(bad), "examples": bad[:10]}


async def fact_histories(
    bus: MemoryBus, facts: dict[str, tuple[ScopeTuple, str, list[str]]], timeout: float = 60.0
) -> dict[str, Any]:
    """``facts``: key -> (scope, level, acknowledged write ids). Each acknowledged
    assertion must be in the key's history exactly once."""

    async def one(key: str, scope: ScopeTuple, level: str) -> Any:
        ctx = Context(*scope)
        for attempt in range(3):
            try:
                return await asyncio.wait_for(bus.history_async(key, ctx, scope=level), timeout)
            except FAULTS as exc:
                if attempt == 2:
                    return exc
                await asyncio.sleep(1.0)
        return None  # pragma: no cover

    items = list(facts.items())
    results = await _gather([one(k, scope, level) for k, (scope, level, _) in items])
    missing, duplicated, unreadable, examples = 0, 0, 0, []
    for (key, (_, _, writes)), history in zip(items, results, strict=True):
        if isinstance(history, BaseException) or history is None:
            unreadable += 1
            continue
        counts = Counter(str(ev.data.get("write", "")) for ev in history)
        for w in writes:
            if counts[w] == 0:
                missing += 1
                examples.append({"key": key, "write": w, "problem": "not in history"})
        duplicated += sum(n - 1 for w, n in counts.items() if w and n > 1)
    return {"keys": len(items), "missing": missing, "duplicated": duplicated, "unreadable": unreadable,
            "examples": examples[:10]}


def deliveries(
    agents: list[AgentSpec], received: list[list[Received]], acks: Iterable[Ack]
) -> dict[str, Any]:
    """Committed vs delivered events per subscription (agent, user), and the time
    from commit to arrival: per delivery, and per write to its last subscriber."""
    pushed = [a for a in acks if a.outcome != "stored"]  # fact assertions and broadcasts publish events
    committed = delivered = 0
    missing: list[dict[str, Any]] = []
    per_write: dict[str, list[float]] = {}
    latencies: list[float] = []
    complete: set[str] = {a.write if a.outcome != "broadcast" else a.node for a in pushed}
    for spec, events in zip(agents, received, strict=True):
        for user in spec.users:
            asker = (spec.org, user, spec.name, "")
            got = {ev.write: ev for ev in events if ev.user == user}
            for a in pushed:
                if not visible(a.scope, asker):
                    continue
                wid = a.write if a.outcome != "broadcast" else a.node
                committed += 1
                ev = got.get(wid)
                if ev is None:
                    complete.discard(wid)
                    if len(missing) < 10:
                        missing.append({"agent": spec.name, "user": user, "write": wid})
                    continue
                delivered += 1
                lag = max(0.0, ev.arrived - ev.committed)
                latencies.append(lag)
                per_write.setdefault(wid, []).append(lag)
    to_all = [max(v) for k, v in per_write.items() if k in complete]
    return {"committed": committed, "delivered": delivered, "missing": committed - delivered,
            "examples": missing, "latencies": latencies, "to_every_subscriber": to_all}
