"""A simulated agent: a plain class the Ray layer turns into an actor.

It serves some users of one org (one :class:`~memorybus.Context` per user) and,
each step, writes what it observed, widens some findings, and answers questions
through the bus. It keeps a notebook of its own observations (the no-bus
baseline answers from it) and a cache of the fact values pushed to it by its
subscriptions (its reaction to events). It never sees the ground truth.

Every bus call has a deadline; a write that fails is retried with the same id
(so a retry is the same write), and it is reported acknowledged only when a
call returned.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from memorybus.client import MemoryBus
from memorybus.client.subscriptions import Inbox
from memorybus.errors import InvalidMemory, InvalidRequest, MemoryBusError, ScopeViolation
from memorybus.memory.events import Event, EventFilter
from memorybus.retrieval import RecallHit
from memorybus.scopes import Context
from memorybus.simulation.tasks import Ack, AgentSpec, Answer, Hit, Question, Received, StepResult, StepTask, Write
from memorybus.simulation.world import epoch

T = TypeVar("T")
#: errors that are the caller's fault: retrying cannot help
_PERMANENT = (InvalidRequest, InvalidMemory, ScopeViolation)
#: what a bus call raises when a part of the bus fails or restarts, or past its deadline
FAULTS = (MemoryBusError, TimeoutError)
#: what a subscription delivers: fact assertions (current or not) and broadcasts
EVENTS = ("asserted", "deprecated", "broadcast")
MAX_USERS = 4


class SimAgent:
    def __init__(self, bus: MemoryBus, spec: AgentSpec, run: str, seed: int, op_timeout: float = 30.0) -> None:
        if len(spec.users) > MAX_USERS:
            raise InvalidRequest("users", f"an agent serves at most {MAX_USERS} users")
        self.bus = bus
        self.spec = spec
        self.run = run
        self.op_timeout = op_timeout
        self.rng = random.Random(f"agent-{seed}-{spec.name}")
        roles = frozenset({"lead"}) if spec.lead else frozenset()
        self.contexts = {u: Context(spec.org, u, spec.name, roles=roles) for u in spec.users}
        self.notebook: dict[str, list[tuple[float, str]]] = {}
        self.pushed: dict[str, tuple[int, str]] = {}
        self.inboxes: list[Inbox] = []
        self.received: list[Received] = []
        self.latencies: list[tuple[str, float, bool]] = []

    # ------------------------------------------------------------ subscribing
    def subscription_name(self, user: str) -> str:
        return f"{self.run}-{self.spec.name}-{user}"

    def start(self, handle: Any) -> int:
        """Subscribe ``handle`` (this agent's actor) once per served user."""
        flt = EventFilter.of(events=EVENTS)
        for slot, (user, ctx) in enumerate(self.contexts.items()):
            name = self.subscription_name(user)
            sub = self.bus.subscribe(ctx, flt, target=handle, method=f"on_events_{slot}", name=name)
            self.inboxes.append(Inbox(sub.cursors))
        return len(self.inboxes)

    def on_events(self, slot: int, events: Sequence[Event]) -> None:
        """React to pushed events: remember when each arrived, keep the newest value
        of every fact in the push cache. Repeats (at-least-once delivery) are dropped."""
        now = time.time()
        user = self.spec.users[slot]
        for ev in self.inboxes[slot].accept(events):
            node = ev.node
            self.received.append(
                Received(user, node.id, node.scope.as_tuple(), ev.kind.value, str(ev.data.get("write", node.id)),
                         ev.at, now)
            )
            if ev.kind.value == "asserted" and node.key:
                seen = self.pushed.get(node.key)
                if seen is None or node.fact_seq >= seen[0]:
                    self.pushed[node.key] = (node.fact_seq, node.content)

    # ------------------------------------------------------------------ steps
    async def step(self, task: StepTask) -> StepResult:
        result = StepResult(self.spec.name, task.step, started=time.time())
        self.latencies = result.latencies
        for w in task.writes:
            await self._write(w, result)
        for q in task.questions:
            result.answers.append(await self._answer(q))
        result.finished = time.time()
        return result

    async def _timed(self, op: str, make: Callable[[], Awaitable[T]], attempts: int) -> T:
        """Call ``make()`` up to ``attempts`` times, each under the op deadline."""
        for i in range(attempts):
            t0 = time.perf_counter()
            try:
                out = await asyncio.wait_for(make(), self.op_timeout)
            except _PERMANENT:
                self.latencies.append((op, time.perf_counter() - t0, False))
                raise
            except FAULTS:  # a fault: the bus is restarting a part
                self.latencies.append((op, time.perf_counter() - t0, False))
                if i == attempts - 1:
                    raise
                await asyncio.sleep(min(2.0, 0.25 * 2**i))
                continue
            self.latencies.append((op, time.perf_counter() - t0, True))
            return out
        raise InvalidRequest("attempts", f"must be at least 1, got {attempts}")

    def _context(self, user: str, session: str = "") -> Context:
        ctx = self.contexts[user]
        return Context(ctx.org, ctx.user, ctx.agent, session, ctx.roles) if session else ctx

    async def _write(self, w: Write, result: StepResult) -> None:
        ctx = self._context(w.user, w.session)
        when = epoch(w.day)
        if w.op == "fact":
            self.notebook.setdefault(w.key, []).append((w.day, w.value))
        try:
            if w.op == "fact":
                fr = await self._timed("assert_fact", lambda: self.bus.assert_fact_async(
                    w.key, w.content, ctx, confidence=w.confidence,
                    strategy=None if w.strategy == "default" else w.strategy, scope=w.level, id=w.id,
                    valid_from=when, created_at=when, importance=w.importance, decay_rate=w.decay_rate), 4)
                node, outcome = fr.node, fr.outcome
            else:
                node = await self._timed("remember", lambda: self.bus.remember_async(
                    w.content, ctx, scope=w.level, id=w.id, kind=w.kind, importance=w.importance,
                    decay_rate=w.decay_rate, valid_from=when, created_at=when), 4)
                outcome = "stored"
        except FAULTS as exc:
            result.failed.append(f"{w.id} {type(exc).__name__}: {exc}"[:300])
            return
        result.acks.append(Ack(w.id, node.id, node.scope.as_tuple(), node.content, time.time(), outcome))
        if w.tag == "finding" and self.rng.random() < 0.7:
            to = self.rng.choice(("user", "org"))
            try:
                copy = await self._timed("broadcast", lambda: self.bus.broadcast_async(node.id, to, ctx), 4)
            except FAULTS as exc:
                result.failed.append(f"broadcast {w.id} {type(exc).__name__}: {exc}"[:300])
                return
            result.acks.append(Ack(f"{w.id}>{to}", copy.id, copy.scope.as_tuple(), copy.content, time.time(),
                                   "broadcast", broadcast_of=w.id))

    async def _answer(self, q: Question) -> Answer:
        ctx = self._context(q.user)
        ans = Answer(q.id, self.spec.name, time.time())
        if "recall" in q.methods:
            try:
                hits = await self._timed("recall_as_of" if q.as_of else "recall", lambda: self.bus.recall_async(
                    q.text, ctx, k=5, as_of=q.as_of), 2)
                ans.recall = [_hit(h) for h in hits if h.via == "match"]
            except FAULTS as exc:
                ans.errors.append(f"recall: {type(exc).__name__}")
        if "fact" in q.methods and q.key:
            try:
                node = await self._timed("current_fact", lambda: self.bus.current_fact_async(
                    q.key, ctx, scope=q.level), 2)
                ans.fact = Hit(node.id, node.content, node.scope.as_tuple(), node.key) if node else None
            except FAULTS as exc:
                ans.errors.append(f"current_fact: {type(exc).__name__}")
        if "context" in q.methods:
            try:
                block = await self._timed("context_for", lambda: self.bus.context_for_async(
                    q.text, ctx, token_budget=256, k=8), 2)
                ans.context = block.text
                ans.context_hits = [_hit(h) for h in block.memories]
                ans.context_hits += [Hit(n.id, n.content, n.scope.as_tuple(), n.key) for n in block.core]
            except FAULTS as exc:
                ans.errors.append(f"context_for: {type(exc).__name__}")
        if q.key:
            ans.notebook = self._from_notebook(q.key, q.as_of)
            if q.as_of is None and q.key in self.pushed:
                ans.pushed = self.pushed[q.key][1]
        return ans

    def _from_notebook(self, key: str, as_of: float | None) -> list[str]:
        """The no-bus answer: this agent's own observations of ``key``, newest first
        (at ``as_of``: those made by then), each value once."""
        seen = sorted(self.notebook.get(key, ()), reverse=True)
        values: list[str] = []
        for day, value in seen:
            if (as_of is None or epoch(day) <= as_of) and value not in values:
                values.append(value)
        return values

    def report(self) -> list[Received]:
        """Every event this agent received (once per subscription)."""
        return list(self.received)


def _hit(h: RecallHit) -> Hit:
    return Hit(h.node.id, h.node.content, h.node.scope.as_tuple(), h.node.key)


class AgentActor(SimAgent):
    """An agent as an async actor; ``on_events_<slot>`` receives the pushes of the
    subscription of its ``slot``-th user."""

    def on_events_0(self, events: list[Any]) -> None:
        self.on_events(0, events)

    def on_events_1(self, events: list[Any]) -> None:
        self.on_events(1, events)

    def on_events_2(self, events: list[Any]) -> None:
        self.on_events(2, events)

    def on_events_3(self, events: list[Any]) -> None:
        self.on_events(3, events)

    async def ping(self) -> int:
        return os.getpid()
