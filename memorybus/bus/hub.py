"""Subscriptions and event fan-out: the logic of one hub partition (no Ray here).

Shards publish every committed event to the hub of its org. The hub keeps, per
subscription, the last sequence number it has accounted for in every scope the
subscriber may see. It delivers an event only when it is the next one of its
scope; a gap (a lost or reordered publish, a queue overflow, a failed delivery)
switches the subscription to *replay*: the missing events are read from the
shards' durable logs. So a subscriber receives every event it may see, in
order per scope, and a slow subscriber never blocks a writer (its queue is
bounded; past the bound it catches up from the log).

Acknowledged cursors (the events a subscriber has processed) are durable in a
:class:`~memorybus.bus.ports.KeyValue`, so a subscriber that restarts resumes
where it left off and a restarted hub restores its subscriptions. Cursor writes
are coalesced: every ``cursor_flush_seconds`` one write stores the cursors of
all subscriptions that moved (one durable write per event per subscriber would
cost a hundred fsyncs per broadcast to a hundred subscribers). If the hub dies
in between, the last few acknowledged events are delivered again after the
restart: delivery is at least once, and :class:`~memorybus.client.subscriptions.Inbox`
drops what the subscriber already processed.

Push targets are stored by name (see :mod:`memorybus.bus.targets`): a push
subscription whose target cannot be found (after a restart of the cluster, or
when a named target's delivery finds it gone) is *parked*: its cursors stay where
they are, so the durable logs keep everything it may see, and the hub looks for
its target again every ``parked_retry_seconds`` and, at most as often, on publish.
Once found, it replays what it missed. Restoring never fails because of one
subscription (an unreadable record is logged and skipped).

Ownership: a subscription belongs to the context that created it (its scope:
org, user, agent, session). Its ``name`` is unique within that owner: the
subscription's id is derived from owner and name, so another context using the
same name has another subscription. Every call (subscribe, unsubscribe, cursors,
pull) names the caller, and touches only the caller's own subscription; a
listing (:meth:`Hub.stats`) shows only subscriptions the caller manages (see
:meth:`~memorybus.scopes.Context.manages`): never another org's names or cursors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, deque
from typing import Any

from memorybus.bus.parking import Parking
from memorybus.bus.ports import Deliver, KeyValue, LastSeqs, ReadEvents, Targets
from memorybus.bus.principals import Principals
from memorybus.bus.pushing import Pushing
from memorybus.bus.records import Subscription, check_name, subscription_id
from memorybus.bus.store import SubscriptionStore
from memorybus.bus.targets import LocalTargets
from memorybus.errors import StoreUnavailable
from memorybus.memory.events import Event, EventFilter
from memorybus.scopes import Context

log = logging.getLogger(__name__)

class Hub(Pushing, Parking, Principals):
    """One partition of the bus: subscriptions of the orgs routed to it."""

    def __init__(
        self,
        kv: KeyValue,
        read_events: ReadEvents,
        last_seqs: LastSeqs,
        deliver: Deliver,
        *,
        queue_limit: int = 10_000,
        batch_size: int = 256,
        targets: Targets | None = None,
        cursor_flush_seconds: float = 0.05,
        replay_page: int = 1000,
        parked_retry_seconds: float = 1.0,
    ) -> None:
        self.kv = kv
        self._read_events = read_events
        self._last_seqs = last_seqs
        self._deliver = deliver
        self.queue_limit = queue_limit
        self.batch_size = batch_size
        self.store = SubscriptionStore(kv)
        self._setup_parking(targets if targets is not None else LocalTargets(), parked_retry_seconds)
        self.subs: dict[str, Subscription] = {}
        self.published = 0
        self.published_by_org: Counter[str] = Counter()
        self.cursor_flush_seconds = cursor_flush_seconds
        self.replay_page = replay_page
        self._dirty: set[str] = set()
        self._flusher: asyncio.Task[None] | None = None
        self.cursor_writes = 0

    # ------------------------------------------------------------ persistence
    def _save(self, sub: Subscription) -> None:
        self.store.save(sub)
        self._dirty.discard(sub.id)

    def _save_cursor(self, sub: Subscription) -> None:
        """Mark the cursor for the next coalesced write."""
        self._dirty.add(sub.id)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.cursor_flush_seconds)
        try:
            self.flush()
        except StoreUnavailable as exc:  # the store is down: keep them dirty, try again
            log.warning("cursor flush failed: %s", exc)
            await asyncio.sleep(max(0.5, self.cursor_flush_seconds))
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    def flush(self) -> int:
        """Write every moved cursor now, in one durable write; returns how many."""
        dirty = [self.subs[sid] for sid in self._dirty if sid in self.subs]
        if dirty:
            self.store.save_cursors(dirty)
            self.cursor_writes += 1
        self._dirty.clear()
        return len(dirty)

    def restore(self) -> int:
        """Reload durable subscriptions (after a hub restart); pull subscriptions resume
        by replay, push subscriptions wait parked until :meth:`attach_parked` finds
        their targets."""
        for sub in self.store.load(skip=self.subs):
            self.subs[sub.id] = sub
            self._start(sub)
        return len(self.subs)

    # ---------------------------------------------------------------- control
    def find(self, context: Context, name: str) -> Subscription | None:
        """``context``'s own subscription ``name``, or None (another owner's never)."""
        sub = self.subs.get(subscription_id(context, name))
        return sub if sub is not None and sub.context.scope == context.scope else None

    async def subscribe(
        self,
        name: str,
        context: Context,
        flt: EventFilter,
        target: Any | None,
        method: str,
        start: str = "now",
    ) -> dict[str, int]:
        """Create or re-attach ``context``'s subscription ``name``; returns its
        acknowledged cursors.

        A new subscription starts at the current end of the logs (``start="now"``)
        or at their beginning (``"beginning"``). Re-attaching (same owner, same name)
        keeps the acknowledged cursors and replays whatever the subscriber missed.
        The same name used by another context is another subscription.
        StoreUnavailable when the record cannot be written durably (with
        ``Config.redis_wait_replicas``: no replica confirmed it): a new subscription is
        then not created here (a retry with the same name resumes any record the store kept).
        """
        name = check_name(name)
        sub_id = subscription_id(context, name)
        ref = None if target is None else self.targets.ref(target)
        if isinstance(target, tuple):  # a named target given by name: find it now
            target = await self.targets.find(ref) if ref is not None else None
        existing = self.find(context, name)
        if existing is not None and not existing.closed:
            existing.context, existing.filter = context, flt
            existing.target, existing.method, existing.ref = target, method, ref
            existing.parked = ""
            existing.needs_replay = True
            existing.more = False
            existing.queue.clear()
            self._save(existing)
            existing.wake.set()
            if existing.target is None and existing.task is not None:  # no target now: stop its loop
                existing.task.cancel()
                existing.task = None
            if existing.task is None or existing.task.done():
                self._start(existing)
            return dict(existing.acked)
        saved = self.store.cursors(sub_id)
        if saved is not None:
            acked = saved
        elif start == "beginning":
            acked = {}
        else:
            acked = await self._last_seqs(context)
        sub = Subscription(sub_id, context, flt, target, method, acked, name=name, ref=ref)
        self._save(sub)  # durable first: a write the store does not acknowledge leaves no subscription
        self.subs[sub_id] = sub
        self._start(sub)
        return dict(acked)

    async def unsubscribe(self, name: str, context: Context) -> bool:
        """Delete ``context``'s subscription ``name`` and its cursors; False if it has none."""
        sub_id = subscription_id(context, check_name(name))
        sub = self.find(context, name)
        if sub is None and self.subs.get(sub_id) is not None:
            return False  # not the caller's
        self._drop(sub_id)
        return sub is not None

    def _drop(self, sub_id: str) -> None:
        """Forget a subscription: its record and cursors, its push loop stopped."""
        sub = self.subs.pop(sub_id, None)
        self._dirty.discard(sub_id)
        self.store.delete(sub_id)
        if sub is not None:
            sub.closed = True
            sub.wake.set()
            if sub.task is not None:
                sub.task.cancel()

    def cursors(self, name: str, context: Context) -> dict[str, int]:
        """The acknowledged cursors of ``context``'s subscription ``name`` ({} if none)."""
        sub = self.find(context, check_name(name))
        if sub is not None:
            return dict(sub.acked)
        sub_id = subscription_id(context, name)
        if sub_id in self.subs:
            return {}
        return self.store.cursors(sub_id) or {}

    # ---------------------------------------------------------------- publish
    def publish(self, events: list[Event]) -> None:
        """Accept committed events from a shard (never blocks, never raises).

        The events are grouped by scope once; each subscription then checks its
        visibility once per scope (not per event) and its filter per event only when
        it has one. Order per scope is kept; across scopes none is promised."""
        self.published += len(events)
        groups: dict[str, list[Event]] = {}
        for ev in events:
            self.published_by_org[ev.node.scope.org] += 1
            groups.setdefault(ev.scope_key, []).append(ev)
        orgs = {evs[0].node.scope.org for evs in groups.values()}
        self._look_on_publish()
        everything = EventFilter()
        for sub in self.subs.values():
            if sub.closed or sub.needs_replay or sub.more or sub.context.org not in orgs:
                continue  # it reads these from the log, or sees none of them
            if self._accept(sub, groups, sub.filter == everything):
                self._send_now(sub)
                sub.wake.set()

    def _accept(self, sub: Subscription, groups: dict[str, list[Event]], unfiltered: bool) -> bool:
        """Queue what ``sub`` may see of ``groups`` (events by scope key, in order);
        True if its push loop must wake (new events, or a gap: replay)."""
        touched = False
        for scope_key, evs in groups.items():
            scope = evs[0].node.scope
            if scope.org != sub.context.org or not scope.visible_to(sub.context):
                continue
            last = sub.pending.get(scope_key)
            for ev in evs:
                if last is None or ev.seq > last + 1:
                    sub.needs_replay = True  # a gap: catch up from the log
                    break
                if ev.seq <= last:
                    continue  # already accounted for
                last = sub.pending[scope_key] = ev.seq
                if unfiltered or sub.filter.matches(ev):
                    sub.queue.append(ev)
                    touched = True
                    if len(sub.queue) > self.queue_limit:
                        sub.needs_replay = True  # too slow: drop the queue, replay later
                        break
            if sub.needs_replay:
                sub.queue.clear()
                return True
        return touched

    # --------------------------------------------------------------- delivery
    async def _replay(self, sub: Subscription) -> None:
        """Read the next page of the logs after the acknowledged cursors into the queue
        (one page at a time: a long backlog is never held at once)."""
        start = dict(sub.acked)
        if sub.more:  # the next page: after what the last one accounted for
            for scope_key, seq in sub.pending.items():
                start[scope_key] = max(start.get(scope_key, 0), seq)
        events, cursors, more = await self._read_events(sub.context, start, sub.filter, self.replay_page)
        sub.queue = deque(sorted(events, key=lambda e: (e.scope_key, e.seq)))
        sub.pending = dict(cursors)
        sub.needs_replay = False
        sub.more = more
        if events:
            sub.replays += 1  # a replay that re-read something

    def _take(self, sub: Subscription) -> list[Event]:
        batch: list[Event] = []
        while sub.queue and len(batch) < self.batch_size:
            batch.append(sub.queue.popleft())
        return batch

    def _ack(self, sub: Subscription, batch: list[Event]) -> None:
        moved = False
        for ev in batch:
            if ev.seq > sub.acked.get(ev.scope_key, 0):
                sub.acked[ev.scope_key] = ev.seq
                moved = True
        # scopes with only filtered-out events advance too
        if not sub.queue and not sub.needs_replay:
            for scope_key, seq in sub.pending.items():
                if seq > sub.acked.get(scope_key, 0):
                    sub.acked[scope_key] = seq
                    moved = True
        if moved:
            self._save_cursor(sub)

    async def pull(self, name: str, context: Context, ack: dict[str, int] | None, timeout: float) -> list[Event]:
        """For driver-side subscribers: acknowledge what was processed, then wait up to
        ``timeout`` seconds for the next batch of ``context``'s subscription ``name``."""
        sub = self.find(context, check_name(name))
        if sub is None or sub.push:
            return []
        if ack:
            moved = False
            for scope_key, seq in ack.items():
                if seq > sub.acked.get(scope_key, 0):
                    sub.acked[scope_key] = seq
                    moved = True
            if moved:
                self._save_cursor(sub)
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            if not sub.queue and sub.more:
                sub.needs_replay = True  # the page is handed out: read the next one
            if sub.needs_replay:
                await self._replay(sub)
            batch = self._take(sub)
            if batch:
                sub.delivered += len(batch)
                return batch
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return []
            sub.wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(sub.wake.wait(), remaining)
