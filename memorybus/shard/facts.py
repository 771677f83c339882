"""Keyed facts on the shard: assertions resolved against the current value and
committed with compare-and-set on the fact's slot, the current value, the history."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from memorybus.bus.conflicts import AUTHORITY_TAG, Decision, Strategy, resolve
from memorybus.bus.evidence import Claim, KeyEvidence, Weighing, observe
from memorybus.bus.reliability import Reliabilities
from memorybus.errors import InvalidMemory, InvalidRequest, ScopeViolation, VersionConflict
from memorybus.memory.events import Event, EventKind
from memorybus.memory.model import MemoryNode, MemoryStatus, evolve
from memorybus.scopes import Context, Scope
from memorybus.shard.job import Job
from memorybus.shard.records import content_hash
from memorybus.shard.results import FactResult
from memorybus.shard.writes import check_source
from memorybus.storage.base import SlotWrite, WriteBatch

if TYPE_CHECKING:
    from memorybus.shard.ops import OpCall

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Assertion:
    """One prepared assertion of a round: by ``context``, resolved with ``strategy``,
    at ``now``, for the round's call number ``part``."""

    context: Context
    node: MemoryNode
    strategy: Strategy
    now: float
    part: int


@dataclass(slots=True)
class Round:
    """A round's write, staged: the batch and its events; per call its answer, its own
    events (indexes) and what it wrote (for its audit entries); the in-memory apply."""

    batch: WriteBatch
    events: list[Event]
    answers: list[list[FactResult]]
    own: list[list[int]]
    wrote: list[WriteBatch]
    applied: Callable[[], None]


class Facts(Job):
    """Keyed facts. Every assertion is also weighed as evidence (:mod:`memorybus.bus.evidence`),
    whatever the strategy: the record is stored with the fact's slot in the assertion's
    transaction, and the per-org source reliabilities (:mod:`memorybus.bus.reliability`) are
    derived from the records, rebuilt from the store on first use after a restart."""

    _building = threading.Lock()

    def reliabilities(self) -> Reliabilities:
        """The per-org table, built from the stored evidence on first use (and after an
        erasure or an import changed the evidence: see ``ShardCore.reliabilities``)."""
        with self._building:
            book = self.core.reliabilities
            if book is None:
                book = Reliabilities(self.core.policy.fact_half_life_days)
                for scope_key, _, blob in self.core.store.all_evidence():
                    ev = KeyEvidence.decode(blob)
                    book.apply(Scope.from_key(scope_key).org, {}, ev.grades(ev.latest(), book.half_life_days))
                self.core.reliabilities = book
            return book

    def source_reliability(self, context: Context) -> dict[str, dict[str, Any]]:
        """The learned reliability of the sources of ``context``'s org, as this shard
        graded them on its facts (the client adds the shards' grades up); decayed to
        the org's newest evidence. Never another org's."""
        context = self.core.check_context(context)
        book = self.reliabilities()
        return book.snapshot(context.org, book.latest(context.org))

    # ------------------------------------------------------------- keyed facts
    def assert_fact(
        self,
        context: Context,
        node: MemoryNode,
        vector: np.ndarray | None = None,
        strategy: Strategy | str | None = None,
        *,
        op: str | None = None,
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
        A re-execution (same ``op``) answers with the first outcome.
        """
        vectors = None if vector is None else np.asarray(vector, dtype=np.float32)[None, :]
        return self.assert_facts(context, [node], vectors, strategy, op=op)[0]

    def assert_facts(
        self,
        context: Context,
        nodes: Sequence[MemoryNode],
        vectors: np.ndarray | None = None,
        strategy: Strategy | str | None = None,
        *,
        op: str | None = None,
    ) -> list[FactResult]:
        """:meth:`assert_fact` for many assertions, resolved in order and committed in
        one transaction (group commit): all are applied or none."""
        context = self.core.check_context(context)
        chosen = Strategy.parse(strategy or self.core.policy.strategy)
        now = self.core.clock.now()
        if vectors is not None and len(vectors) != len(nodes):
            raise InvalidRequest("vectors", "do not match the nodes")
        prepared = [self.prepare(context, node, None if vectors is None else vectors[i], now)
                    for i, node in enumerate(nodes)]  # fmt: skip
        if len({n.id for n in prepared}) != len(prepared):
            raise InvalidRequest("nodes", "duplicate ids in one batch")
        call = self.core.op_call("assert", context, op)  # a re-execution is answered by the commit
        items = [Assertion(context, new, chosen, now, 0) for new in prepared]

        def attempt() -> list[FactResult]:
            r = self._assert_round(items, 1)
            return self.core.commit(call, r.batch, r.events, r.answers[0], r.applied)

        return self.with_retries(attempt)

    def commit_calls(self, calls: Sequence[OpCall], items: Sequence[Assertion]) -> list[list[FactResult]]:
        """The assertions ``items`` of several calls (``item.part``: its call's index in
        ``calls``), resolved in order as one :meth:`assert_facts` would, committed in one
        transaction with each call's own operation record; each call's results. Raises
        :class:`~memorybus.shard.ops.Recorded` when a call had committed before."""
        from memorybus.shard.ops import Part

        def attempt() -> list[list[FactResult]]:
            r = self._assert_round(items, len(calls))
            parts = [Part(call, r.answers[i], r.own[i], r.wrote[i]) for i, call in enumerate(calls)]
            return self.core.commits.commit_group(parts, r.batch, r.events, r.applied)

        return self.with_retries(attempt)

    def prepare(self, context: Context, node: MemoryNode, vector: np.ndarray | None, now: float) -> MemoryNode:
        """An assertion as it will be stored (a checked context), or InvalidMemory,
        ScopeViolation, ...: nothing about it is left to fail but its commit."""
        if not isinstance(node, MemoryNode) or not node.key:
            raise InvalidMemory("key", "a fact needs a key")
        new = self.core.prepare_new(node, vector, context, now)
        check_source(new.source)
        if self.core.is_authority(context):
            new = evolve(new, tags=tuple(dict.fromkeys((*new.tags, AUTHORITY_TAG))))
        return new

    def with_retries(self, attempt: Callable[[], T]) -> T:
        """``attempt()`` again while another writer moved a slot it read (bounded: the
        last conflict is the caller's)."""
        for _ in range(self.core.policy.max_cas_retries - 1):
            with contextlib.suppress(VersionConflict):  # another writer moved a slot: read again
                return attempt()
        return attempt()

    def _assert_round(self, items: Sequence[Assertion], calls: int) -> Round:
        """One optimistic attempt: read the slots, resolve ``items`` in order (each by
        its own strategy, as its caller), stage the write of ``calls`` calls."""
        slots: dict[tuple[str, str], list[Any]] = {}  # -> [head_id, seq0, current, count, evidence, before]
        puts: dict[str, MemoryNode] = {}
        updates: dict[str, tuple[MemoryNode, int]] = {}
        events: list[Event] = []
        results: list[tuple[int, FactResult]] = []
        own: list[list[int]] = [[] for _ in range(calls)]  # each call's events
        wrote: list[tuple[list[str], list[str]]] = [([], []) for _ in range(calls)]  # each call's puts, updates

        def stage(changed: MemoryNode, part: int) -> None:
            """Record a changed existing node (a put of this batch, or a CAS update)."""
            if changed.id in puts:
                puts[changed.id] = changed
            elif changed.id in updates:
                updates[changed.id] = (changed, updates[changed.id][1])
            else:
                updates[changed.id] = (changed, changed.version - 1)
            (wrote[part][0] if changed.id in puts else wrote[part][1]).append(changed.id)

        for item in items:
            new, strategy, now, part = item.node, item.strategy, item.now, item.part

            def event(kind: EventKind, node: MemoryNode, **data: Any) -> None:
                own[part].append(len(events))  # noqa: B023 - used in this iteration only
                events.append(self.core.event(kind, node, item.context, now, **data))  # noqa: B023

            slot_key = (new.scope.key, new.key or "")  # every prepared fact has a key
            if slot_key not in slots:
                head_id, seq0, blob = self.core.store.fact_slot(*slot_key)
                head = self.core.store.get(head_id) if head_id else None
                if head is not None and (head.scope.key, head.key) != slot_key:
                    head = None  # a head of another scope or key is never this fact's value
                before = KeyEvidence.decode(blob)
                slots[slot_key] = [head_id, seq0, head, 0, before, before]
            state = slots[slot_key]
            current: MemoryNode | None = state[2]
            state[3] += 1
            fact_seq = state[1] + state[3]
            evidence = _synced(state[4], current)
            claim = Claim(new.source, content_hash(new), new.confidence, new.valid_from)
            if (
                current is not None
                and current.status is MemoryStatus.ACTIVE
                and content_hash(current) == content_hash(new)
            ):
                bump = 0 if current.id in puts or current.id in updates else 1
                reinforced = evolve(
                    current,
                    confidence=max(current.confidence, new.confidence),
                    source_ids=(*current.source_ids[-49:], new.id),
                    version=current.version + bump,
                )
                stage(reinforced, part)
                state[2] = reinforced
                state[4] = self._observe(new, evidence, claim, True).record
                event(EventKind.ASSERTED, reinforced, outcome="reinforced", fact_seq=fact_seq, write=new.id)
                results.append((part, FactResult(reinforced, True, None, "reinforced", fact_seq, new.id)))
                continue
            if strategy is Strategy.EVIDENCE:
                # claims are weighed in time order: a late-arriving report can still win; where it
                # makes a third value the best supported, the head stays (see memorybus.bus.evidence)
                weighed = self._observe(new, evidence, claim, None)
                decision = Decision(current is None or weighed.new_wins, weighed.reason)
            else:
                decision = resolve(current, new, strategy, half_life_days=self.core.policy.fact_half_life_days)
                weighed = self._observe(new, evidence, claim, current is None or decision.new_wins)
            state[4] = weighed.record
            fact = evolve(new, fact_seq=fact_seq)
            bump = 0 if current is not None and (current.id in puts or current.id in updates) else 1
            if current is None:
                outcome = "created"
                event(EventKind.ASSERTED, fact, outcome=outcome, fact_seq=fact_seq, write=fact.id)
            elif decision.new_wins:
                outcome = "superseded"
                fact = evolve(fact, contradicts=(*fact.contradicts, current.id))
                loser = evolve(current, status=MemoryStatus.DEPRECATED,
                                valid_to=max(fact.valid_from, current.valid_from),
                                contradicts=(*current.contradicts, fact.id), version=current.version + bump)
                stage(loser, part)
                event(EventKind.ASSERTED, fact, outcome=outcome, fact_seq=fact_seq, write=fact.id,
                      replaced=current.id, reason=decision.reason)
                event(EventKind.DEPRECATED, loser, superseded_by=fact.id, reason=decision.reason)
            else:
                outcome = "rejected"
                fact = evolve(fact, status=MemoryStatus.DEPRECATED, valid_to=fact.valid_from,
                               contradicts=(*fact.contradicts, current.id))
                linked = evolve(current, contradicts=(*current.contradicts, fact.id), version=current.version + bump)
                stage(linked, part)
                state[2] = linked
                event(EventKind.DEPRECATED, fact, outcome=outcome, fact_seq=fact_seq, write=fact.id,
                      kept=current.id, reason=decision.reason)
            puts[fact.id] = fact
            wrote[part][0].append(fact.id)
            if outcome != "rejected":
                state[0], state[2] = fact.id, fact
            results.append((part, FactResult(fact, outcome != "rejected", current.id if current else None, outcome,
                                             fact_seq, fact.id)))
        slot_writes = [SlotWrite(sk, k, st[1], st[0], st[3], st[4].encode()) for (sk, k), st in slots.items()]
        changed = list(puts.values()) + [u for u, _ in updates.values()]
        final = {n.id: n for n in changed}
        answers: list[list[FactResult]] = [[] for _ in range(calls)]
        for part, r in results:
            answers[part].append(evolve(r, node=final.get(r.node.id, r.node).without_embedding()))
        batch = WriteBatch(puts=list(puts.values()), updates=list(updates.values()), slots=slot_writes)
        audited = [WriteBatch(puts=[final[i] for i in dict.fromkeys(p)],
                              updates=[(final[i], 0) for i in dict.fromkeys(u)]) for p, u in wrote]  # fmt: skip
        apply = self.core.apply_changed(changed)
        learned = [(Scope.from_key(sk).org, st[5], st[4]) for (sk, _), st in slots.items()]

        def applied() -> None:
            apply()
            book, half_life = self.reliabilities(), self.core.policy.fact_half_life_days
            for org, old, new in learned:
                book.apply(org, old.grades(old.latest(), half_life), new.grades(new.latest(), half_life))

        return Round(batch, events, answers, own, audited, applied)

    def _observe(self, new: MemoryNode, evidence: KeyEvidence, claim: Claim, decided: bool | None) -> Any:
        calibrate = self.reliabilities().calibrator(new.scope.org, claim.at)
        return observe(evidence, claim, calibrate, Weighing(self.core.policy.fact_half_life_days), decided=decided)

    def current_fact(self, context: Context, key: str, scope: Scope) -> MemoryNode | None:
        context = self.core.check_context(context)
        if not scope.visible_to(context):
            raise ScopeViolation("read")
        head_id, _ = self.core.store.slot(scope.key, key)
        node = self.core.nodes.get(head_id) if head_id else None
        if node is None or node.scope != scope or node.key != key:
            node = None  # never a memory of another scope or key, whatever the slot says
        self.core.noted(context, "current_fact", [node] if node else [])
        return evolve(node) if node else None

    def history(self, context: Context, key: str, scope: Scope) -> list[Event]:
        """Every assertion of a keyed fact, in commit order, with its outcome. An erased
        value's events show kind, ids and outcome only (no content); an erased user's or
        agent's facts have no history left (see :mod:`memorybus.shard.erase`)."""
        context = self.core.check_context(context)
        if not scope.visible_to(context):
            raise ScopeViolation("read")
        # the store indexes a fact's events by key: no scan of the scope's log
        events = [Event.decode(blob, seq) for seq, blob in self.core.store.fact_events(scope.key, key)]
        self.core.noted(context, "history", [e.node for e in events])
        return events


def _synced(ev: KeyEvidence, current: MemoryNode | None) -> KeyEvidence:
    """The record, its head made the fact's current value (a slot written before
    evidence was kept, or a head another strategy chose, is followed, not fought)."""
    if current is None or current.status is not MemoryStatus.ACTIVE:
        return replace(ev, head="", since=0.0) if ev.head else ev
    value = content_hash(current)
    if ev.head == value:
        return ev
    return replace(ev, head=value, since=current.valid_from)
