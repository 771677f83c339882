"""Change events: what every committed write tells subscribers.

An :class:`Event` is appended to its scope's durable log in the same atomic
commit as the change it describes, with a sequence number that increases by
one per scope. :class:`EventFilter` selects what a subscription wants; whether
a subscriber may see an event at all is the visibility rule of its context.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from memorybus.errors import InvalidRequest
from memorybus.memory.codec import decode, encode, node_from_dict, node_to_dict
from memorybus.memory.model import MemoryKind, MemoryNode, evolve
from memorybus.scopes import Context, Level, Scope
from memorybus.validation import is_text

EVENT = "event"


class EventKind(str, Enum):
    REMEMBERED = "remembered"
    UPDATED = "updated"
    FORGOTTEN = "forgotten"
    BROADCAST = "broadcast"
    ASSERTED = "asserted"  # a keyed fact was written and is now current
    DEPRECATED = "deprecated"  # a keyed fact lost a resolution (superseded or rejected)
    ARCHIVED = "archived"
    EXPIRED = "expired"
    CONSOLIDATED = "consolidated"


@dataclass(slots=True)
class Event:
    """One committed change. ``node`` is the memory after the change (no embedding)."""

    kind: EventKind
    node: MemoryNode
    at: float
    by: str = ""
    seq: int = 0
    data: dict[str, Any] = field(default_factory=dict)
    #: the log record, once encoded (:meth:`seal`); what crosses to other processes
    wire: bytes | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def scope(self) -> Scope:
        return self.node.scope

    @property
    def scope_key(self) -> str:
        return self.node.scope.key

    @property
    def memory_id(self) -> str:
        return self.node.id

    def encode(self) -> bytes:
        """The log record (the sequence number is the log's, not stored inside)."""
        return encode(
            EVENT,
            {
                "kind": self.kind.value,
                "node": node_to_dict(self.node, with_embedding=False),
                "at": self.at,
                "by": self.by,
                "data": self.data,
            },
        )

    def seal(self) -> bytes:
        """Encode the log record once and keep it: the commit stores it, and every later
        copy of this event (to the hub, to each subscriber) carries these bytes instead
        of pickling the memory again. Seal only an event that will not change (its
        ``seq`` may: it travels beside the record)."""
        if self.wire is None:
            self.wire = self.encode()
        return self.wire

    def __reduce__(self) -> tuple[Any, tuple[bytes, int]]:
        # pickled (by Ray, between processes) as its log record: one msgpack encoding per
        # event however many subscribers receive it; a live delivery is byte for byte
        # what a replay from the log delivers
        return (_from_wire, (self.wire if self.wire is not None else self.encode(), self.seq))

    @classmethod
    def decode(cls, blob: bytes, seq: int) -> Event:
        d = decode(blob, EVENT)
        ev = cls(EventKind(d["kind"]), node_from_dict(d["node"]), d["at"], d["by"], seq, d["data"])
        ev.wire = bytes(blob)
        return ev


def _from_wire(blob: bytes, seq: int) -> Event:
    """An event from its pickled form (see :meth:`Event.__reduce__`)."""
    return Event.decode(blob, seq)


#: the ``data`` entries an event about erased or forgotten content keeps (ids and outcomes, no text)
_ID_DATA = frozenset({"outcome", "fact_seq", "write", "replaced", "superseded_by", "kept", "into", "contradicted_by",
                      "erased", "sources"})


def bare(node: MemoryNode, *, keep_tags: bool = False) -> MemoryNode:
    """``node`` with nothing a person wrote: ids, scope, kind, status, version, key and
    times stay; content, structured data, source, thread, speaker and (unless
    ``keep_tags``) tags go. What an erased memory's events keep; what ``forget``'s
    ``FORGOTTEN`` event carries (with its tags, which subscriptions filter on)."""
    return evolve(node, content="", structured={}, embedding=None, tags=node.tags if keep_tags else (), source="",
                  thread=None, position=None, speaker=None)


def bare_event(event: Event) -> Event:
    """``event`` with :func:`bare` node and only the id-valued entries of its data."""
    data = {k: v for k, v in event.data.items() if k in _ID_DATA}
    return Event(event.kind, bare(event.node), event.at, event.by, event.seq, data)


@dataclass(frozen=True, slots=True)
class EventFilter:
    """What a subscription selects. Empty fields select everything.

    - ``levels``: scope widths (``"org"``, ``"user"``, ``"agent"``, ``"session"``)
    - ``scopes``: exact scopes
    - ``kinds``: memory kinds; ``events``: event kinds
    - ``keys``: fact keys; a trailing ``*`` matches a prefix (``"user:u1/*"``)
    - ``tags``: any of these tags
    """

    levels: frozenset[Level] = frozenset()
    scopes: frozenset[Scope] = frozenset()
    kinds: frozenset[MemoryKind] = frozenset()
    events: frozenset[EventKind] = frozenset()
    keys: tuple[str, ...] = ()
    tags: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        *,
        levels: Iterable[Level | str] | Level | str = (),
        scopes: Iterable[Scope] | Scope = (),
        kinds: Iterable[MemoryKind | str] | MemoryKind | str = (),
        events: Iterable[EventKind | str] | EventKind | str = (),
        keys: Iterable[str] | str = (),
        tags: Iterable[str] | str = (),
    ) -> EventFilter:
        """A filter from plain values. A single string (or a single Scope) given for a
        field is that one value, never a sequence of characters."""
        try:
            key_list = _texts("keys", keys)
            tag_list = _texts("tags", tags)
            return cls(
                levels=frozenset(Level(x) for x in _one_or_many(levels)),
                scopes=frozenset(_scopes(scopes)),
                kinds=frozenset(MemoryKind(x) for x in _one_or_many(kinds)),
                events=frozenset(EventKind(x) for x in _one_or_many(events)),
                keys=tuple(key_list),
                tags=frozenset(tag_list),
            )
        except (ValueError, TypeError) as exc:
            if isinstance(exc, InvalidRequest):
                raise
            raise InvalidRequest("filter", str(exc)) from None

    def matches(self, event: Event) -> bool:
        node = event.node
        if self.levels and node.scope.level not in self.levels:
            return False
        if self.scopes and node.scope not in self.scopes:
            return False
        if self.kinds and node.kind not in self.kinds:
            return False
        if self.events and event.kind not in self.events:
            return False
        if self.keys and not any(_key_match(p, node.key) for p in self.keys):
            return False
        return not (self.tags and not self.tags & set(node.tags))


def _one_or_many(value: Any) -> list[Any]:
    if isinstance(value, str | Enum):
        return [value]
    return list(value)


def _texts(name: str, value: Any) -> list[str]:
    items = _one_or_many(value)
    for x in items:
        if not is_text(x) or not x:
            raise InvalidRequest(f"filter.{name}", "must be non-empty strings of valid Unicode text")
    return items


def _scopes(value: Any) -> list[Scope]:
    items = [value] if isinstance(value, Scope) else list(value)
    if not all(isinstance(x, Scope) for x in items):
        raise InvalidRequest("filter.scopes", "must be Scope objects")
    return items


def _key_match(pattern: str, key: str | None) -> bool:
    if key is None:
        return False
    if pattern.endswith("*"):
        return key.startswith(pattern[:-1])
    return key == pattern


def deliverable(event: Event, context: Context, flt: EventFilter) -> bool:
    """A subscriber only receives events about memories it could recall."""
    return event.node.scope.visible_to(context) and flt.matches(event)
