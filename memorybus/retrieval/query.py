"""What the ranking reads from a query's text: keyword terms and the times it names."""

from __future__ import annotations

from dataclasses import dataclass

from memorybus.retrieval.answers import asked_forms
from memorybus.retrieval.text import tokens
from memorybus.retrieval.timeparse import TimeWindow, query_times


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed query: its keyword ``terms`` (stemmed, stop words dropped) and the
    time ``windows`` it names (relative forms counted from the reference time).

    ``term_set`` holds every token of the query (for the names it may mention);
    ``terms``, the keywords, leave out the words of the times it names unless
    ``time_words`` (see :meth:`parse`); ``forms``, the answer forms it asks for (a
    time, a number: :func:`~memorybus.retrieval.answers.asked_forms`)."""

    text: str
    terms: tuple[str, ...]
    windows: tuple[TimeWindow, ...]
    term_set: frozenset[str]
    forms: int = 0

    @classmethod
    def parse(cls, text: str, reference: float, *, time_words: bool = True) -> Query:
        """Parse ``text``; ``time_words=False`` keeps the words of the times it names ("a
        week ago", "in June") out of the keywords, for a ranking that matches those times
        against event times instead. A query that is nothing but a time keeps its words."""
        words = tuple(tokens(text))
        windows = tuple(query_times(text, reference))
        terms = words
        if windows and not time_words:
            timed = {t for w in windows for t in tokens(w.text)}
            terms = tuple(t for t in words if t not in timed) or words
        return cls(text, terms, windows, frozenset(words), asked_forms(text))
