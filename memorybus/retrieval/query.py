"""What the ranking reads from a query's text: keyword terms and the times it names."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memorybus.retrieval.text import tokens
from memorybus.retrieval.timeparse import TimeWindow, query_times


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed query: its keyword ``terms`` (stemmed, stop words dropped) and the
    time ``windows`` it names (relative forms counted from the reference time)."""

    text: str
    terms: tuple[str, ...]
    windows: tuple[TimeWindow, ...]
    term_set: frozenset[str]

    @classmethod
    def parse(cls, text: str, reference: float) -> Query:
        terms = tuple(tokens(text))
        return cls(text, terms, tuple(query_times(text, reference)), frozenset(terms))

    def names(self, speaker_terms: Iterable[str]) -> bool:
        """Whether the query names a speaker or source with these name tokens
        (``planner`` for ``agent:planner``; any one token of a full name)."""
        return any(t in self.term_set for t in speaker_terms)
