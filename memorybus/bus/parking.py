"""Parked push subscriptions: waiting for their target, looked for again (no Ray here).

A mixin of :class:`~memorybus.bus.hub.Hub` (see its docstring and
:mod:`memorybus.bus.targets`). A parked subscription has no push loop, so its
acknowledged cursors do not move and the durable logs keep every event it may see;
``needs_replay`` is set, so once re-attached it replays from those cursors.
Looking for targets costs one ``Targets.find`` per parked subscription, at most
every ``parked_retry_seconds`` (a timer while any is parked, and on publish).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from memorybus.bus.records import Subscription

if TYPE_CHECKING:
    from memorybus.bus.ports import Targets

log = logging.getLogger("memorybus.bus.hub")


class Parking:
    """Parking and re-attaching; the hub supplies ``subs``, ``targets`` and ``_start``."""

    subs: dict[str, Subscription]
    targets: Targets
    parked_retry_seconds: float
    _next_look: float
    _looker: asyncio.Task[int] | None
    _retry: asyncio.Task[None] | None

    def _setup_parking(self, targets: Targets, retry_seconds: float) -> None:
        self.targets = targets
        self.parked_retry_seconds = retry_seconds
        self._next_look = 0.0  # when parked targets are looked for again (monotonic)
        self._looker = None
        self._retry = None

    def _start(self, sub: Subscription) -> None:  # pragma: no cover - the hub's
        raise NotImplementedError

    def _park(self, sub: Subscription, reason: str) -> None:
        """Stop delivering to ``sub`` until its target is found again (cursors kept)."""
        sub.target, sub.parked = None, reason
        sub.needs_replay, sub.more = True, False
        sub.queue.clear()
        if self._retry is None or self._retry.done():
            self._retry = asyncio.get_running_loop().create_task(self._retry_parked())

    async def _retry_parked(self) -> None:
        while any(s.parked for s in self.subs.values()):
            await asyncio.sleep(self.parked_retry_seconds)
            await self.attach_parked()

    def parked(self) -> list[Subscription]:
        return [s for s in self.subs.values() if s.parked and not s.closed]

    async def attach_parked(self, force: bool = False) -> int:
        """Look for the targets of parked subscriptions (at most every
        ``parked_retry_seconds`` unless ``force``); re-attach those found. Returns how many."""
        now = time.monotonic()
        if not force and now < self._next_look:
            return 0
        self._next_look = now + self.parked_retry_seconds
        attached = 0
        for sub in self.parked():
            handle = await self.targets.find(sub.ref) if sub.ref is not None else None
            if handle is not None and sub.parked and not sub.closed:
                sub.target, sub.parked = handle, ""
                log.info("subscription %r of %s re-attached to %s", sub.name, sub.context, sub.ref.describe())  # type: ignore[union-attr]
                self._start(sub)
                attached += 1
        return attached

    def _look_on_publish(self) -> None:
        """On publish: look for parked targets when due (cheap when none is parked)."""
        if time.monotonic() < self._next_look or (self._looker is not None and not self._looker.done()):
            return
        if any(s.parked for s in self.subs.values()):
            with contextlib.suppress(RuntimeError):  # no running loop (a synchronous caller)
                self._looker = asyncio.get_running_loop().create_task(self.attach_parked())

