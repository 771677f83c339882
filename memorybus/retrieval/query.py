"""What the ranking reads from a query's text: keyword terms, the times and the names it names."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memorybus.retrieval.answers import asked_forms
from memorybus.retrieval.text import tokens
from memorybus.retrieval.timeparse import TimeWindow, query_times
from memorybus.words import ASKING_WORDS

#: what stands in for a name in the query embedded without its names
NAME_STAND_IN = "someone"

# a capitalised word (a name, an acronym) with its possessive; the lookbehinds find a word
# that opens the text or a sentence, which is a name only when possessive ("Alice's team")
_NAME = re.compile(r"(?<![\w'\u2019-])[A-Z][A-Za-z0-9]*(?:[-'\u2019][A-Z][A-Za-z0-9]*)*(?P<pos>['\u2019]s\b)?")
_OPENS = re.compile(r"(?:^|[.!?:;]\s+|\n)\W*$")
# capitalised words that name a time, not someone or something (the time signal reads them)
_CALENDAR_WORDS = """
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday
"""
_CALENDAR = frozenset(_CALENDAR_WORDS.split())


def _name_words(text: str) -> list[re.Match[str]]:
    """The capitalised words of ``text`` that name something: inside a sentence, or
    possessive where they open one; words with no keyword term (stop words) and the names
    of months and weekdays (times) are not names."""
    out = []
    for m in _NAME.finditer(text):
        if _OPENS.search(text, 0, m.start()) and not m.group("pos"):
            continue
        if m.group(0).lower() in _CALENDAR:
            continue
        if tokens(m.group(0)):
            out.append(m)
    return out


def _names(text: str) -> list[list[re.Match[str]]]:
    """The names ``text`` names, each as its words (:func:`_name_words`): adjacent name words
    are one name ("Project Falcon"), unless the first is possessive."""
    out: list[list[re.Match[str]]] = []
    for m in _name_words(text):
        last = out[-1][-1] if out else None
        if last is not None and not last.group("pos") and not text[last.end() : m.start()].strip():
            out[-1].append(m)
        else:
            out.append([m])
    return out


@functools.lru_cache(maxsize=1)
def _asking_terms() -> frozenset[str]:
    return frozenset(t for w in ASKING_WORDS for t in tokens(w))


def name_terms(text: str) -> tuple[frozenset[str], ...]:
    """The keyword terms of each name ``text`` names (see :func:`without_names`)."""
    groups = (frozenset(t for m in name for t in tokens(m.group(0))) for name in _names(text))
    return tuple(dict.fromkeys(g for g in groups if g))


def without_names(text: str) -> str | None:
    """``text`` with each name it names replaced by :data:`NAME_STAND_IN` ("What is Alice's
    blood type?" -> "What is someone's blood type?"), or None when it names none, or when it
    asks nothing besides its names: a query that is only names, or names and words that ask
    without saying what (:data:`~memorybus.words.ASKING_WORDS`: "tell me about Alice"), asks
    about them.

    A name is a capitalised word inside a sentence, or a possessive one opening it (the
    words that open a sentence are capitalised anyway), not a month or a weekday; adjacent
    ones are one name. Recall embeds this text beside the query so that a memory which
    matches only on a shared name can be told from one that matches what is asked
    (:mod:`memorybus.retrieval.ranking`)."""
    names = _names(text)
    if not names:
        return None
    # a capitalised word opening the query may be a name too ("Vim or Helix?"): a query of
    # names, asking words and that word asks about the names
    opening = {t for m in _NAME.finditer(text) if _OPENS.search(text, 0, m.start()) for t in tokens(m.group(0))}
    if all(t in _asking_terms() or t in opening or any(t in g for g in name_terms(text)) for t in tokens(text)):
        return None
    parts: list[str] = []
    at = 0
    for name in names:
        parts += [text[at : name[0].start()], NAME_STAND_IN + (name[-1].group("pos") or "")]
        at = name[-1].end()
    parts.append(text[at:])
    return "".join(parts)


def query_texts(text: str) -> list[str]:
    """What recall embeds for a query: the query; when it names something and asks about it
    (:func:`without_names`), also the query without its names and its names alone ("Alice's
    blood type" -> "someone's blood type", "Alice"). These are the rows of the query vector
    a shard is sent (:meth:`~memorybus.retrieval.reader.RecallReader.search`)."""
    unnamed = without_names(text)
    if unnamed is None:
        return [text]
    words = (m.group(0)[: m.start("pos") - m.start()] if m.group("pos") else m.group(0) for m in _name_words(text))
    return [text, unnamed, " ".join(words)]


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed query: its keyword ``terms`` (stemmed, stop words dropped) and the
    time ``windows`` it names (relative forms counted from the reference time).

    ``term_set`` holds every token of the query (for the names it may mention);
    ``terms``, the keywords, leave out the words of the times it names unless
    ``time_words`` (see :meth:`parse`); ``forms``, the answer forms it asks for (a
    time, a number: :func:`~memorybus.retrieval.answers.asked_forms`); ``names``, the
    keyword terms of each name it names (:func:`name_terms`)."""

    text: str
    terms: tuple[str, ...]
    windows: tuple[TimeWindow, ...]
    term_set: frozenset[str]
    forms: int = 0
    names: tuple[frozenset[str], ...] = ()

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
        return cls(text, terms, windows, frozenset(words), asked_forms(text), name_terms(text))

    @property
    def asked(self) -> tuple[str, ...]:
        """The keyword terms that are neither names nor words that only ask
        (:data:`~memorybus.words.ASKING_WORDS`): what the query asks about its names."""
        skip = _asking_terms().union(*self.names)
        return tuple(t for t in dict.fromkeys(self.terms) if t not in skip)
