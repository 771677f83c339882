"""Durable subscription records: owner-scoped ids, names, and their msgpack-able forms.

A subscription's id is derived from its owner (the creating context's scope) and
its name, so names are unique per owner and one owner can never address
another's subscription, whatever name it uses.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from memorybus.bus.targets import TargetRef
from memorybus.errors import InvalidRequest
from memorybus.memory.events import Event, EventFilter
from memorybus.scopes import Context, Scope
from memorybus.validation import is_text

MAX_NAME_CHARS = 256


@dataclass
class Subscription:
    """One subscription's live state in its hub: its durable part (owner, filter, target,
    acknowledged cursors) and what the hub tracks while it runs."""

    id: str
    context: Context
    filter: EventFilter
    target: Any | None  # the live handle of a push target; None: pull, or parked
    method: str
    acked: dict[str, int]  # durable: processed by the subscriber
    pending: dict[str, int] = field(default_factory=dict)  # accounted for (queued or skipped)
    queue: deque[Event] = field(default_factory=deque)
    needs_replay: bool = True
    more: bool = False  # a paged replay has more to read once the queue is delivered
    errors: int = 0  # failed deliveries (push)
    last_error: str = ""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    delivered: int = 0
    replays: int = 0
    closed: bool = False
    name: str = ""
    ref: TargetRef | None = None  # durable: the push target's name (None: a pull subscription)
    parked: str = ""  # why a push subscription waits for its target ("" when attached)
    idle: bool = False  # its push loop waits for events (nothing queued, nothing in flight)
    sent: tuple[list[Event], Awaitable[Any]] | None = None  # a batch publish already sent, for the loop to await

    @property
    def push(self) -> bool:
        return self.ref is not None


def check_name(name: object) -> str:
    """A subscription name: a non-empty string of valid text, at most 256 characters."""
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS or not is_text(name):
        raise InvalidRequest("name", f"must be a non-empty string of at most {MAX_NAME_CHARS} characters")
    return name


def subscription_id(owner: Context, name: str) -> str:
    """The id of ``owner``'s subscription ``name`` (names are unique per owner, not globally)."""
    digest = hashlib.blake2b(f"{owner.scope.key}\x00{name}".encode(), digest_size=16).hexdigest()
    return f"s{digest}"


def encode_context(c: Context) -> list[Any]:
    return [c.org, c.user, c.agent, c.session, sorted(c.roles)]


def decode_context(v: list[Any]) -> Context:
    return Context(v[0], v[1], v[2], v[3], frozenset(v[4]))


def encode_filter(f: EventFilter) -> dict[str, Any]:
    return {
        "levels": sorted(x.value for x in f.levels),
        "scopes": sorted(list(s.as_tuple()) for s in f.scopes),
        "kinds": sorted(x.value for x in f.kinds),
        "events": sorted(x.value for x in f.events),
        "keys": list(f.keys),
        "tags": sorted(f.tags),
    }


def decode_filter(d: dict[str, Any]) -> EventFilter:
    return EventFilter.of(
        levels=d["levels"],
        scopes=[Scope(*s) for s in d["scopes"]],
        kinds=d["kinds"],
        events=d["events"],
        keys=d["keys"],
        tags=d["tags"],
    )
