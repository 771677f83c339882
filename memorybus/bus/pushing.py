"""Push delivery: each push subscription's loop, and a publish's batches sent in one
pass (no Ray here). A mixin of :class:`~memorybus.bus.hub.Hub` (see its docstring).

A subscription's loop sends one batch at a time and acknowledges it once the
subscriber answered: order per scope and at-least-once delivery hold. When a publish
reaches the hub, every push subscription whose loop is idle gets its batch sent there
and then (:meth:`Pushing._send_now`), so all the calls of one publish leave in one
pass, as a plain Ray fan-out's do; the loop then only awaits its own answer. Before,
each call left when its subscription's loop got its turn on the event loop, one after
the other (docs/benchmarks.md: the fan-out's latency).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import TYPE_CHECKING

from memorybus.bus.records import Subscription
from memorybus.errors import ActorUnavailable
from memorybus.memory.events import Event

if TYPE_CHECKING:
    from memorybus.bus.ports import Deliver

log = logging.getLogger("memorybus.bus.hub")


class Pushing:
    """Push loops; the hub supplies ``_deliver``, ``_take``, ``_ack``, ``_replay`` and
    (from :class:`~memorybus.bus.parking.Parking`) ``_park``."""

    _deliver: Deliver

    def _take(self, sub: Subscription) -> list[Event]:  # pragma: no cover - the hub's
        raise NotImplementedError

    def _ack(self, sub: Subscription, batch: list[Event]) -> None:  # pragma: no cover - the hub's
        raise NotImplementedError

    async def _replay(self, sub: Subscription) -> None:  # pragma: no cover - the hub's
        raise NotImplementedError

    if TYPE_CHECKING:
        def _park(self, sub: Subscription, reason: str) -> None: ...

    def _send_now(self, sub: Subscription) -> None:
        """Send an idle push subscription its new batch from here, in one pass over the
        subscriptions, instead of from its push loop once the loop gets its turn: a
        publish's deliveries all leave before any of them is awaited (as a plain Ray
        fan-out's do). The loop awaits the answer and acknowledges it as its own."""
        if not sub.idle or sub.sent is not None or sub.needs_replay or sub.target is None or sub.parked:
            return
        batch = self._take(sub)
        if batch:
            sub.sent = (batch, self._deliver(sub.target, sub.method, batch))
            sub.idle = False

    def _start(self, sub: Subscription) -> None:
        if sub.ref is None:
            return  # a pull subscription: its caller reads
        if sub.target is None:
            self._park(sub, sub.parked or f"{sub.ref.describe()} is not running")
            return
        if sub.task is None or sub.task.done():
            sub.task = asyncio.get_running_loop().create_task(self._push_loop(sub))

    async def _push_loop(self, sub: Subscription) -> None:
        try:
            await self._pushing(sub)
        finally:
            sent, sub.sent, sub.idle = sub.sent, None, False
            if sent is not None and inspect.iscoroutine(sent[1]):
                sent[1].close()  # ended before awaiting it: the cursors say what it holds

    async def _pushing(self, sub: Subscription) -> None:
        backoff = 0.05
        while not sub.closed and not sub.parked:
            try:
                if sub.sent is not None:  # publish sent it already (see _send_now)
                    batch, answer = sub.sent
                    sub.sent = None
                else:
                    if sub.needs_replay:
                        await self._replay(sub)
                    batch = self._take(sub)
                    if not batch and sub.more:
                        self._ack(sub, [])
                        sub.needs_replay = True  # the page is delivered: read the next one
                        continue
                    if not batch:
                        if not sub.needs_replay:
                            self._ack(sub, [])
                            sub.wake.clear()
                            sub.idle = True
                            try:
                                await sub.wake.wait()
                            finally:
                                sub.idle = False
                        continue
                    answer = self._deliver(sub.target, sub.method, batch)
                try:
                    await answer
                except ActorUnavailable as exc:
                    if sub.ref is None or not sub.ref.durable:
                        raise  # an unnamed target cannot be found again: retry it as it is
                    sub.errors += 1
                    sub.last_error = str(exc)
                    self._park(sub, f"{sub.ref.describe()} is gone: {exc}")
                    log.warning("subscription %r parked: %s", sub.name, sub.parked)
                    return
                sub.delivered += len(batch)
                self._ack(sub, batch)
                backoff = 0.05
            except asyncio.CancelledError:
                raise
            # Deliberately broad: ``deliver`` runs the subscriber's own method (user code,
            # which may raise anything) and ``read_events`` crosses to the shards; whatever
            # fails, the loop must live on: the error is recorded in the subscription's
            # stats and the batch is replayed from the acknowledged cursors after a pause.
            except Exception as exc:  # broad on purpose, see above
                log.warning("subscription %s: %s; will replay", sub.id, exc)
                sub.errors += 1
                sub.last_error = repr(exc)
                sub.needs_replay = True
                sub.more = False  # from the acknowledged cursors again
                sub.queue.clear()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
