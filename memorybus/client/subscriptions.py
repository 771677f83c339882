"""The subscription half of the client: subscribe, listen, acknowledge.

Operation generators of :class:`~memorybus.client.MemoryBus` (see
:mod:`memorybus.client.operation`), and the subscriber-side objects. A
subscription belongs to the context that created it; its ``name`` is unique
within that owner (another context's subscription of the same name is another
subscription), and every call here names the caller: the hub actor touches only
the caller's own subscription, and ``bus_stats`` lists only subscriptions the
caller manages.

Callback subscriptions run a listener thread in this process. An exception
raised by the callback never ends the subscription silently: it is recorded in
``sub.errors``, the same batch is retried (``BusPolicy.callback_retries`` times,
backoff from ``callback_backoff_seconds``, doubling up to 5 s), and if it still
fails the listener stops with ``sub.failed`` set, the error logged, and
:meth:`Subscription.check` raising :class:`~memorybus.errors.DeliveryFailed`.
Nothing of the failed batch is acknowledged: subscribing again with the same
name delivers it again.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from memorybus.actors import runtime
from memorybus.actors.runtime import Op
from memorybus.bus.records import check_name
from memorybus.bus.targets import named
from memorybus.client.operation import check_context, operation
from memorybus.errors import BusClosed, DeliveryFailed, InvalidRequest, MemoryBusError
from memorybus.memory.events import Event, EventFilter
from memorybus.scopes import Context, Scope

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle

log = logging.getLogger(__name__)


def readable(cursors: dict[str, int]) -> dict[Scope, int]:
    """Cursors keyed by :class:`~memorybus.scopes.Scope` (the hub keys them by scope key)."""
    return {Scope.from_key(k): int(v) for k, v in cursors.items()}


class Inbox:
    """Subscriber-side bookkeeping: drops events already processed, keeps order.

    Create it from the subscription's durable cursors (``bus.subscription_cursors``,
    keyed by :class:`~memorybus.scopes.Scope`; scope-key strings are accepted too)
    when the subscriber starts, pass every delivered batch through :meth:`accept`.
    ``cursors`` is keyed by each event's ``scope_key``.
    """

    def __init__(self, cursors: dict[Scope, int] | dict[str, int] | None = None) -> None:
        self.cursors: dict[str, int] = {
            (k.key if isinstance(k, Scope) else k): v for k, v in (cursors or {}).items()
        }

    def accept(self, events: Iterable[Event]) -> list[Event]:
        fresh = []
        for ev in sorted(events, key=lambda e: (e.scope_key, e.seq)):
            if ev.seq > self.cursors.get(ev.scope_key, 0):
                self.cursors[ev.scope_key] = ev.seq
                fresh.append(ev)
        return fresh


#: how many of a listener's errors ``Subscription.errors`` keeps (the newest)
MAX_ERRORS = 100
#: every callback subscription's listener running in this process (see :func:`stop_listeners`)
_LIVE: weakref.WeakSet[Subscription] = weakref.WeakSet()


class Subscription:
    """A live subscription (``name`` of ``context``). Push subscriptions are served by
    the hub actor; callback subscriptions run a listener thread in this process.

    ``errors``: the exceptions the listener met (callback failures, an unreachable
    hub actor; the newest ``MAX_ERRORS``); ``failed``: the callback error that stopped
    the listener after its retries, or None; ``alive``: whether the listener is
    running. The listener stops when its handle closes, when the bus is shut down
    from this process, and when this process leaves Ray: it never starts Ray again
    (a call through a stale actor handle would, in Ray 2.60).
    """

    def __init__(self, bus: Any, name: str, context: Context, partition: int, cursors: dict[str, int]) -> None:
        self.bus = bus
        self.id = name
        self.name = name
        self._context = context
        self.partition = partition
        self._acked = dict(cursors)  # by scope key, as the hub keeps them
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[BaseException] = []
        self.failed: BaseException | None = None

    @property
    def cursors(self) -> dict[Scope, int]:
        """The acknowledged position, per :class:`~memorybus.scopes.Scope` (as
        ``bus.subscription_cursors`` gives it)."""
        return readable(self._acked)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def check(self) -> None:
        """Raise :class:`DeliveryFailed` if the callback failed past its retries."""
        if self.failed is not None:
            raise DeliveryFailed(self.name, repr(self.failed)) from self.failed

    def _call(
        self, callback: Callable[[list[Event]], Any], batch: list[Event], loop: asyncio.AbstractEventLoop | None
    ) -> None:
        result = callback(batch)
        if inspect.isawaitable(result):
            if loop is not None and loop.is_running():
                asyncio.run_coroutine_threadsafe(_await(result), loop).result()
            else:
                asyncio.run(_await(result))

    def _deliver(
        self, callback: Callable[[list[Event]], Any], batch: list[Event], loop: asyncio.AbstractEventLoop | None
    ) -> bool:
        """Run the callback on ``batch``, retrying per policy; False if it kept failing."""
        policy = self.bus.config.bus
        backoff = policy.callback_backoff_seconds
        last: Exception | None = None
        for attempt in range(policy.callback_retries + 1):
            try:
                self._call(callback, batch, loop)
                return True
            # Deliberately broad: the callback is the caller's own code and may raise
            # anything. Each failure is recorded (``errors``, then ``failed``) and retried
            # per policy; it must not end the listener's thread unrecorded.
            except Exception as exc:  # broad on purpose, see above
                last = exc
                self.errors.append(exc)
                log.warning("subscription %r: callback failed (attempt %d): %r", self.name, attempt + 1, exc)
            if attempt == policy.callback_retries:
                break
            if self._stop.wait(backoff):
                return False  # stopping: the batch stays unacknowledged
            backoff = min(backoff * 2, 5.0)
        self.failed = last
        log.error(
            "subscription %r stopped: the callback failed %d times; subscribe again to resume: %r",
            self.name,
            policy.callback_retries + 1,
            last,
        )
        return False

    def _listen(self, callback: Callable[[list[Event]], Any], loop: asyncio.AbstractEventLoop | None) -> None:
        hub = self.bus._hub(self.partition)
        inbox = Inbox(self._acked)
        ack: dict[str, int] | None = None
        while not self._stop.is_set():
            if self.bus.closed:  # closed, or this process left Ray: a call now would start Ray again
                self._note(BusClosed(self.bus.config.namespace, "the handle closed: the listener stopped"))
                return
            try:
                ref = hub.pull.remote(self.name, self._context, ack, 0.5)
                batch = runtime.run_sync(runtime.iter_refs([ref]), 30)[0]
            except MemoryBusError as exc:  # the hub actor restarts: keep listening
                self._note(exc)
                time.sleep(0.2)
                continue
            except SystemExit:  # how Ray ends a pending get when this process leaves Ray meanwhile
                if runtime.is_connected():
                    raise
                self._note(BusClosed(self.bus.config.namespace, "this process left Ray: the listener stopped"))
                return
            before = dict(inbox.cursors)
            fresh = inbox.accept(batch)
            if fresh and not self._deliver(callback, fresh, loop):
                inbox.cursors = before  # nothing of the failed batch is acknowledged
                return
            ack = dict(inbox.cursors)
            self._acked = ack

    def _note(self, exc: BaseException) -> None:
        self.errors.append(exc)
        del self.errors[:-MAX_ERRORS]

    def _start(self, callback: Callable[[list[Event]], Any]) -> None:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self._thread = threading.Thread(target=self._listen, args=(callback, loop), daemon=True)
        _LIVE.add(self)
        self._thread.start()

    def stop(self, unsubscribe: bool = False) -> None:
        """Stop listening (the subscription stays, and resumes with the same name)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if unsubscribe:
            _unsubscribe.__get__(self.bus)(self.name, self._context)


def stop_listeners(which: Callable[[Subscription], bool], wait: float = 5.0) -> None:
    """Stop the listeners of this process's callback subscriptions that ``which``
    selects, and wait (up to ``wait`` seconds in all) for them to finish the pull or
    the callback they are in; the subscriptions stay (subscribing again with the same
    name resumes). The calling thread's own listener (a callback that closes its bus)
    is told to stop, not waited for."""
    chosen = [sub for sub in list(_LIVE) if which(sub)]
    for sub in chosen:
        sub._stop.set()
    deadline = time.monotonic() + wait
    for sub in chosen:
        thread = sub._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))


async def _await(x: Any) -> Any:
    return await x


def subscribe(
    bus: BusHandle,
    context: Context,
    filter: EventFilter | None = None,
    *,
    target: Any = None,
    method: str = "on_events",
    callback: Callable[[list[Event]], Any] | None = None,
    name: str | None = None,
    start: str = "now",
) -> Op[Subscription]:
    """Receive every committed change ``context`` could recall and ``filter`` selects.

    Either ``target`` (a Ray actor handle with a ``method``:
    ``target.<method>.remote(events)`` is called with each batch, in order per
    scope; returning acknowledges it) or ``callback`` (a callable, run in this
    process, sync or async, from a listener thread). Both are checked here: a
    target without that method is refused. ``name`` identifies a durable
    subscription of ``context``: subscribing again with the same context and name
    resumes after the last acknowledged event and misses nothing; another context
    using the same name has its own subscription.

    A **named** actor target (``W.options(name=..., namespace=...)``, or given as
    ``target=("name", "namespace")``) is stored by name: after any restart, of the
    bus or of Ray itself, the hub finds it again once it runs. Until then the
    subscription is *parked*: nothing is lost (its events wait in the durable log),
    ``bus_stats`` lists it under ``parked``, and ``unsubscribe`` removes it. An
    unnamed actor's handle is valid in its Ray cluster only: after a restart of Ray
    such a subscription stays parked until its owner subscribes again with the same
    name (and a new handle).
    """
    check_context(context)
    if (target is None) == (callback is None):
        raise InvalidRequest("target", "give exactly one of target or callback")
    if callback is not None and not callable(callback):
        raise InvalidRequest("callback", "must be callable")
    if target is not None:
        if not isinstance(method, str) or not method.isidentifier():
            raise InvalidRequest("method", "must be a method name")
        if isinstance(target, tuple):
            named(target)  # a (name, namespace) pair of non-empty strings, else InvalidRequest
        elif not callable(getattr(getattr(target, method, None), "remote", None)):
            raise InvalidRequest("target", f"must be a Ray actor handle with a method {method!r}, "
                                 "or (name, namespace) of a named actor")  # fmt: skip
    if filter is not None and not isinstance(filter, EventFilter):
        raise InvalidRequest("filter", "must be an EventFilter")
    if start not in ("now", "beginning"):
        raise InvalidRequest("start", "must be 'now' or 'beginning'")
    name = check_name(f"sub-{uuid.uuid4().hex}" if name is None else name)
    partition, hub = bus._hub_for(context.org)
    (cursors,) = yield [hub.subscribe.remote(name, context, filter or EventFilter(), target, method, start)]
    sub = Subscription(bus, name, context, partition, cursors)
    if callback is not None:
        sub._start(callback)
    return sub


def unsubscribe(bus: BusHandle, name: str, context: Context) -> Op[bool]:
    """Delete ``context``'s subscription ``name`` (and its cursors); False if it has none."""
    check_context(context)
    _, hub = bus._hub_for(context.org)
    (done,) = yield [hub.unsubscribe.remote(check_name(name), context)]
    return bool(done)


_unsubscribe = operation(unsubscribe, 60)  # Subscription.stop(unsubscribe=True): the bus method's call


def subscription_cursors(bus: BusHandle, name: str, context: Context) -> Op[dict[Scope, int]]:
    """The acknowledged position of ``context``'s subscription ``name``: the sequence
    number of the last processed event per :class:`~memorybus.scopes.Scope` (pass it
    to :class:`Inbox`); empty if it has none."""
    check_context(context)
    _, hub = bus._hub_for(context.org)
    (cursors,) = yield [hub.cursors.remote(check_name(name), context)]
    return readable(cursors)


def bus_stats(bus: BusHandle, context: Context) -> Op[dict[str, Any]]:
    """Delivery figures of the subscriptions ``context`` manages (an org context: its
    org's; a user context: that user's): ``published`` (events of its org),
    ``delivered``, ``parked`` (the names of subscriptions waiting for their target
    actor), and per subscription ``queued``, ``delivered``, ``replays`` (replays
    that re-read missed events from the durable log), ``replaying``, ``errors``,
    ``last_error``, ``parked`` (why it waits, "" when attached) and ``target``."""
    check_context(context)
    _, hub = bus._hub_for(context.org)
    (stats,) = yield [hub.stats.remote(context)]
    return dict(stats)
