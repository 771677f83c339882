"""What the hub needs from the rest of the system, as types it defines (no Ray, no storage).

The hub is handed its durable key-value store and three callables; the actor
that wraps it (:mod:`memorybus.actors.hub`) supplies them: a store from
:mod:`memorybus.storage.kv`, shard reads over Ray, and delivery to subscriber
actors. So the pub/sub logic depends on nothing below it, and the unit tests
drive it with plain functions.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from memorybus.bus.targets import TargetRef
from memorybus.memory.events import Event, EventFilter
from memorybus.scopes import Context


class KeyValue(Protocol):
    """The hub's durable state (subscription records, acknowledged cursors); values are bytes.
    Every method raises :class:`~memorybus.errors.StoreUnavailable` when the store fails."""

    def get(self, key: str) -> bytes | None: ...

    def put_many(self, items: dict[str, bytes]) -> None:
        """All of ``items`` in one durable write (all or none)."""
        ...

    def delete(self, key: str) -> None: ...

    def scan(self, prefix: str) -> list[tuple[str, bytes]]:
        """Every ``(key, value)`` whose key starts with ``prefix``, in key order."""
        ...

    def close(self) -> None: ...


#: reads one page of events after cursors from every shard:
#: (context, cursors, filter, limit) -> (events, cursors, more may follow)
ReadEvents = Callable[
    [Context, dict[str, int], EventFilter, int], Awaitable[tuple[list[Event], dict[str, int], bool]]
]
#: reads the latest sequence of every scope a context may see
LastSeqs = Callable[[Context], Awaitable[dict[str, int]]]
#: delivers a batch to a push subscriber: the call may send it at once (the hub actor's
#: does: a publish's calls all leave in one pass); awaiting what it returns waits until
#: the subscriber has processed the batch, and raises what the delivery raised
Deliver = Callable[[Any, str, list[Event]], Awaitable[Any]]


class Targets(Protocol):
    """Names push targets durably and finds them again (see :mod:`memorybus.bus.targets`)."""

    def ref(self, target: Any) -> TargetRef:
        """The durable name of ``target`` (a live handle, or ``(name, namespace)``)."""
        ...

    async def find(self, ref: TargetRef) -> Any | None:
        """A live handle for ``ref`` now, or None when it is not there (never raises)."""
        ...
