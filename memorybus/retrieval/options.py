"""What a recall may return and what it adds around its hits."""

from __future__ import annotations

from dataclasses import dataclass

from memorybus.errors import InvalidRequest
from memorybus.memory.model import MemoryNode
from memorybus.validation import check_time


@dataclass(frozen=True, slots=True)
class RecallOptions:
    """What a recall may return and what it adds around its hits.

    - ``start``/``end``: only memories whose event time (``valid_from``) is in
      ``[start, end)`` (epoch seconds; either may be None).
    - ``as_of``: the memory as it was at that time: memories valid then
      (``valid_from <= as_of`` and ``valid_to`` unset or later); superseded
      (deprecated) facts count when they were valid.
    - ``reference_time``: "now" for relative time expressions in the query
      ("last week"); default ``as_of``, else the shard clock.
    - ``neighbors``: add up to this many thread neighbours on each side of each
      top hit, at most ``neighbor_budget`` in all; ``relations``: add up to this
      many memories linked to each top hit (``related``, ``parents``,
      ``children``, ``source_ids``, ``contradicts``), at most
      ``relation_budget`` in all. Expansions come after the ``k`` matches with
      ``via`` set and are not counted in ``k``.
    - ``touch``: record the access (salience); False for read-only recall.
    - ``min_relevance``: drop matches whose relevance (0..1) is below it;
      None: the configured ``RankingWeights.min_relevance``.
    - ``key_prefix``: only memories whose ``key`` starts with this string (keyed
      facts and records stored under a key namespace, e.g. a LangGraph store's).
    """

    start: float | None = None
    end: float | None = None
    as_of: float | None = None
    reference_time: float | None = None
    neighbors: int = 0
    neighbor_budget: int = 10
    relations: int = 0
    relation_budget: int = 10
    touch: bool = True
    min_relevance: float | None = None
    key_prefix: str | None = None

    def validate(self) -> RecallOptions:
        if self.key_prefix is not None and (not isinstance(self.key_prefix, str) or not self.key_prefix):
            raise InvalidRequest("key_prefix", "must be a non-empty string or None")
        for name in ("start", "end", "as_of", "reference_time"):
            check_time(name, getattr(self, name), InvalidRequest, optional=True)
        m = self.min_relevance
        if m is not None and (isinstance(m, bool) or not isinstance(m, int | float) or not 0.0 <= m <= 1.0):
            raise InvalidRequest("min_relevance", "must be a number in [0, 1] or None")
        if self.start is not None and self.end is not None and self.end < self.start:
            raise InvalidRequest("end", "is before start")
        for name in ("neighbors", "neighbor_budget", "relations", "relation_budget"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1000:
                raise InvalidRequest(name, "must be an int between 0 and 1000")
        return self

    @property
    def filters_time(self) -> bool:
        return self.start is not None or self.end is not None or self.as_of is not None

    def admits(self, node: MemoryNode) -> bool:
        """The time filters (event-time range and "as of")."""
        if self.start is not None and node.valid_from < self.start:
            return False
        if self.end is not None and node.valid_from >= self.end:
            return False
        if self.as_of is not None:
            if node.valid_from > self.as_of:
                return False
            if node.valid_to is not None and node.valid_to <= self.as_of:
                return False
        return True
