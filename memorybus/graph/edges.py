"""The temporal graph's records: an edge (a relation valid in time, with its
supporting memories), how an expansion reached an entity, a memory's mention of an
entity, and the edges of one functional (subject, predicate, scope)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple


@dataclass(slots=True, eq=False)
class Edge:
    """One relation in the graph; ``subject``/``object`` are entity keys.

    ``valid_to`` is effective validity: the earlier of ``until`` (what the
    sources asserted) and the start of a later object of a functional
    predicate. ``sources`` maps each supporting memory id to its confidence.
    """

    id: int
    subject: str
    predicate: str
    object: str
    scope_key: str
    valid_from: float
    valid_to: float | None
    until: float | None
    sources: dict[str, float] = field(default_factory=dict)

    @property
    def source_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self.sources))

    @property
    def confidence(self) -> float:
        return max(self.sources.values(), default=0.0)

    def valid_at(self, t: float) -> bool:
        return self.valid_from <= t and (self.valid_to is None or t < self.valid_to)


class Reach(NamedTuple):
    """How an expansion reached an entity: hop distance and the memory ids along its path."""

    hops: int
    sources: tuple[str, ...]


class Mention(NamedTuple):
    scope_key: str
    valid_from: float
    valid_to: float | None


@dataclass(slots=True)
class Group:
    """The edges of one (subject, functional predicate, scope): one object at a time."""

    ids: set[int] = field(default_factory=set)
    max_start: float = -math.inf
    at_max: set[int] = field(default_factory=set)  # edges starting at max_start
    live: set[int] = field(default_factory=set)  # earlier edges still valid after max_start
