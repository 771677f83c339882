"""Subscriptions and event fan-out: the logic of one bus partition (no Ray here).

Shards publish every committed event to the hub of its org. The hub keeps, per
subscription, the last sequence number it has accounted for in every scope the
subscriber may see. It delivers an event only when it is the next one of its
scope; a gap (a lost or reordered publish, a queue overflow, a failed delivery)
switches the subscription to *replay*: the missing events are read from the
shards' durable logs. So a subscriber receives every event it may see, in
order per scope, and a slow subscriber never blocks a writer (its queue is
bounded; past the bound it catches up from the log).

Acknowledged cursors (the events a subscriber has processed) are durable in a
:class:`~memorybus.storage.kv.KeyValue`, so a subscriber that restarts resumes
where it left off and a restarted hub restores its subscriptions. Cursor writes
are coalesced: every ``cursor_flush_seconds`` one write stores the cursors of
all subscriptions that moved (one durable write per event per subscriber would
cost a hundred fsyncs per broadcast to a hundred subscribers). If the hub dies
in between, the last few acknowledged events are delivered again after the
restart: delivery is at least once, and :class:`~memorybus.client_bus.Inbox`
drops what the subscriber already processed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from memorybus.events import Event, EventFilter, deliverable
from memorybus.scopes import Context
from memorybus.storage.kv import KeyValue

log = logging.getLogger(__name__)

#: reads events after cursors from every shard: (context, cursors, filter) -> (events, cursors)
ReadEvents = Callable[[Context, dict[str, int], EventFilter], Awaitable[tuple[list[Event], dict[str, int]]]]
#: reads the latest sequence of every scope a context may see
LastSeqs = Callable[[Context], Awaitable[dict[str, int]]]
#: delivers a batch to a push subscriber; returns when the subscriber has processed it
Deliver = Callable[[Any, str, list[Event]], Awaitable[Any]]


@dataclass
class Subscription:
    id: str
    context: Context
    filter: EventFilter
    target: Any | None  # an actor handle (push) or None (pull)
    method: str
    acked: dict[str, int]  # durable: processed by the subscriber
    pending: dict[str, int] = field(default_factory=dict)  # accounted for (queued or skipped)
    queue: deque[Event] = field(default_factory=deque)
    needs_replay: bool = True
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    delivered: int = 0
    replays: int = 0
    closed: bool = False


def _encode_context(c: Context) -> list[Any]:
    return [c.org, c.user, c.agent, c.session, sorted(c.roles)]


def _decode_context(v: list[Any]) -> Context:
    return Context(v[0], v[1], v[2], v[3], frozenset(v[4]))


def _encode_filter(f: EventFilter) -> dict[str, Any]:
    return {
        "levels": sorted(x.value for x in f.levels),
        "scopes": sorted(list(s.as_tuple()) for s in f.scopes),
        "kinds": sorted(x.value for x in f.kinds),
        "events": sorted(x.value for x in f.events),
        "keys": list(f.keys),
        "tags": sorted(f.tags),
    }


def _decode_filter(d: dict[str, Any]) -> EventFilter:
    from memorybus.scopes import Scope

    return EventFilter.of(
        levels=d["levels"],
        scopes=[Scope(*s) for s in d["scopes"]],
        kinds=d["kinds"],
        events=d["events"],
        keys=d["keys"],
        tags=d["tags"],
    )


class Hub:
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
        encode_target: Callable[[Any], bytes | None] = lambda t: None,
        decode_target: Callable[[bytes], Any] = lambda b: None,
        cursor_flush_seconds: float = 0.05,
    ) -> None:
        self.kv = kv
        self._read_events = read_events
        self._last_seqs = last_seqs
        self._deliver = deliver
        self.queue_limit = queue_limit
        self.batch_size = batch_size
        self._encode_target = encode_target
        self._decode_target = decode_target
        self.subs: dict[str, Subscription] = {}
        self.published = 0
        self.cursor_flush_seconds = cursor_flush_seconds
        self._dirty: set[str] = set()
        self._flusher: asyncio.Task[None] | None = None
        self.cursor_writes = 0

    # ------------------------------------------------------------ persistence
    def _save(self, sub: Subscription) -> None:
        record = {
            "context": _encode_context(sub.context),
            "filter": _encode_filter(sub.filter),
            "method": sub.method,
            "target": self._encode_target(sub.target) if sub.target is not None else None,
            "push": sub.target is not None,
        }
        self.kv.put_many(
            {f"sub:{sub.id}": msgpack.packb(record, use_bin_type=True), f"cur:{sub.id}": msgpack.packb(sub.acked)}
        )
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
        except Exception as exc:  # the store is down: keep them dirty, try again
            log.warning("cursor flush failed: %s", exc)
            await asyncio.sleep(max(0.5, self.cursor_flush_seconds))
            self._flusher = asyncio.get_running_loop().create_task(self._flush_later())

    def flush(self) -> int:
        """Write every moved cursor now, in one durable write; returns how many."""
        dirty = [sid for sid in self._dirty if sid in self.subs]
        if dirty:
            self.kv.put_many({f"cur:{sid}": msgpack.packb(self.subs[sid].acked) for sid in dirty})
            self.cursor_writes += 1
        self._dirty.clear()
        return len(dirty)

    def restore(self) -> int:
        """Reload durable subscriptions (after a hub restart); they resume by replay."""
        for key, blob in self.kv.scan("sub:"):
            sub_id = key[4:]
            rec = msgpack.unpackb(blob, raw=False)
            cur = self.kv.get(f"cur:{sub_id}")
            target = None
            if rec["push"] and rec["target"] is not None:
                try:
                    target = self._decode_target(rec["target"])
                except Exception:  # the subscriber is gone; it re-attaches by subscribing
                    target = None
            sub = Subscription(
                sub_id,
                _decode_context(rec["context"]),
                _decode_filter(rec["filter"]),
                target,
                rec["method"],
                dict(msgpack.unpackb(cur, raw=False)) if cur else {},
            )
            self.subs[sub_id] = sub
            self._start(sub)
        return len(self.subs)

    # ---------------------------------------------------------------- control
    async def subscribe(
        self,
        sub_id: str,
        context: Context,
        flt: EventFilter,
        target: Any | None,
        method: str,
        start: str = "now",
    ) -> dict[str, int]:
        """Create or re-attach a subscription; returns its acknowledged cursors.

        A new subscription starts at the current end of the logs (``start="now"``)
        or at their beginning (``"beginning"``). Re-attaching (same id) keeps the
        acknowledged cursors and replays whatever the subscriber missed.
        """
        existing = self.subs.get(sub_id)
        if existing is not None and not existing.closed:
            existing.context, existing.filter = context, flt
            existing.target, existing.method = target, method
            existing.needs_replay = True
            existing.queue.clear()
            self._save(existing)
            existing.wake.set()
            if existing.task is None or existing.task.done():
                self._start(existing)
            return dict(existing.acked)
        saved = self.kv.get(f"cur:{sub_id}")
        if saved is not None:
            acked = dict(msgpack.unpackb(saved, raw=False))
        elif start == "beginning":
            acked = {}
        else:
            acked = await self._last_seqs(context)
        sub = Subscription(sub_id, context, flt, target, method, acked)
        self.subs[sub_id] = sub
        self._save(sub)
        self._start(sub)
        return dict(acked)

    async def unsubscribe(self, sub_id: str) -> bool:
        sub = self.subs.pop(sub_id, None)
        self._dirty.discard(sub_id)
        self.kv.delete(f"sub:{sub_id}")
        self.kv.delete(f"cur:{sub_id}")
        if sub is None:
            return False
        sub.closed = True
        sub.wake.set()
        if sub.task is not None:
            sub.task.cancel()
        return True

    def cursors(self, sub_id: str) -> dict[str, int]:
        sub = self.subs.get(sub_id)
        if sub is not None:
            return dict(sub.acked)
        saved = self.kv.get(f"cur:{sub_id}")
        return dict(msgpack.unpackb(saved, raw=False)) if saved else {}

    def stats(self) -> dict[str, Any]:
        return {
            "published": self.published,
            "delivered": sum(s.delivered for s in self.subs.values()),
            "cursor_writes": self.cursor_writes,
            "subscriptions": {
                s.id: {
                    "queued": len(s.queue),
                    "delivered": s.delivered,
                    "replays": s.replays,
                    "replaying": s.needs_replay,
                }
                for s in self.subs.values()
            },
        }

    # ---------------------------------------------------------------- publish
    def publish(self, events: list[Event]) -> None:
        """Accept committed events from a shard (never blocks, never raises)."""
        self.published += len(events)
        for sub in self.subs.values():
            if sub.closed or sub.needs_replay:
                continue
            touched = False
            for ev in events:
                if ev.node.scope.org != sub.context.org or not ev.node.scope.visible_to(sub.context):
                    continue
                last = sub.pending.get(ev.scope_key)
                if last is None or ev.seq > last + 1:
                    sub.needs_replay = True  # a gap: catch up from the log
                    break
                if ev.seq <= last:
                    continue  # already accounted for
                sub.pending[ev.scope_key] = ev.seq
                if deliverable(ev, sub.context, sub.filter):
                    sub.queue.append(ev)
                    touched = True
                    if len(sub.queue) > self.queue_limit:
                        sub.needs_replay = True  # too slow: drop the queue, replay later
                        break
            if sub.needs_replay:
                sub.queue.clear()
                sub.wake.set()
            elif touched:
                sub.wake.set()

    # --------------------------------------------------------------- delivery
    def _start(self, sub: Subscription) -> None:
        if sub.target is not None:
            sub.task = asyncio.get_running_loop().create_task(self._push_loop(sub))

    async def _replay(self, sub: Subscription) -> None:
        events, cursors = await self._read_events(sub.context, dict(sub.acked), sub.filter)
        sub.queue = deque(sorted(events, key=lambda e: (e.scope_key, e.seq)))
        sub.pending = dict(cursors)
        sub.needs_replay = False
        sub.replays += 1

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

    async def _push_loop(self, sub: Subscription) -> None:
        backoff = 0.05
        while not sub.closed:
            try:
                if sub.needs_replay:
                    await self._replay(sub)
                batch = self._take(sub)
                if not batch:
                    if not sub.needs_replay:
                        self._ack(sub, [])
                        sub.wake.clear()
                        await sub.wake.wait()
                    continue
                await self._deliver(sub.target, sub.method, batch)
                sub.delivered += len(batch)
                self._ack(sub, batch)
                backoff = 0.05
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # subscriber or shard unavailable: replay after a pause
                log.warning("subscription %s: %s; will replay", sub.id, exc)
                sub.needs_replay = True
                sub.queue.clear()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    async def pull(self, sub_id: str, ack: dict[str, int] | None, timeout: float) -> list[Event]:
        """For driver-side subscribers: acknowledge what was processed, then wait up to
        ``timeout`` seconds for the next batch."""
        sub = self.subs.get(sub_id)
        if sub is None or sub.target is not None:
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
