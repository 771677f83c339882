"""Answer forms: what kind of answer a question asks for, and which kinds a memory holds.

A question that asks *when* (or *how long*, *what year*) is answered by a memory that
states a time; one that asks *how many* (or *how much*, *how old*) by a memory that
states a number; one that asks *which X*, *what X* or *where* by a memory that names a
specific thing (a quoted title, or a proper name: a capitalised word inside a sentence
that few memories hold). This is the answer-type check of classic question answering, read from
the text alone (English, rule based, no model): :func:`asked_forms` reads the question,
:func:`held_forms` and :func:`name_terms` a memory (once, when it is indexed), and the
ranking prefers, among relevant memories, those holding a form the question asks for.

The forms are bit flags (:data:`TIME`, :data:`NUMBER`, :data:`NAMED`); 0 means none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from memorybus.retrieval.text import tokens

TIME = 1
NUMBER = 2
NAMED = 4
#: stands among a memory's name terms for a quoted title (no keyword term is empty)
QUOTED_TITLE = ""

_COUNT = (
    r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|few|couple(?:\s+of)?|several"
    r"|many)"
)
_UNIT = r"(?:second|minute|hour|day|night|week|weekend|month|year|decade|summer|winter|spring|fall|autumn)s?"
_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"

# a time a text states: a date, a weekday or month with a preposition, a relative day, a span of time
_STATES_TIME = re.compile(
    "|".join(
        [
            r"\b(?:yesterday|today|tonight|tomorrow|recently|lately|ago)\b",
            rf"\b(?:last|next|this|past|coming|previous|following|every|each)\s+(?:{_UNIT}|{_WEEKDAY}|{_MONTH})\b",
            rf"\b{_COUNT}\s+{_UNIT}\b",
            rf"\b(?:on|since|until|by|in|during|from|before|after)\s+(?:the\s+)?(?:{_WEEKDAY}|{_MONTH})\b",
            rf"\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b",
            rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b",
            r"\b(?:19|20)\d{2}\b",
            r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b",
            r"\bthe\s+\d{1,2}(?:st|nd|rd|th)\b",
            r"\b(?:since|when)\s+i\s+was\b",
        ]
    )
)
# a number a text states: digits, a number word, an ordinal, a count
_STATES_NUMBER = re.compile(
    r"\b\d+(?:[.,]\d+)?\b|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty"
    r"|hundred|thousand|dozen|first|second|third|fourth|fifth|once|twice|couple|several)\b"
)
# a quoted title: "The Wheel of Time", “dark mode”
_QUOTED = re.compile(r"\"[^\"\n]{2,80}\"|\u201c[^\u201d\n]{2,80}\u201d")
# a capitalised word that does not open the text or a sentence: a proper name, or a capitalised
# interjection or label (the ranking keeps only the words few memories hold)
_CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-zA-Z]+")
# what a question asks for
_ASKS_TIME = re.compile(r"\bwhen\b|\bhow\s+long\b|\bhow\s+often\b|\bwhat\s+(?:time|year|month|day|date)\b", re.I)
_ASKS_NUMBER = re.compile(r"\bhow\s+(?:many|much|old|often|far)\b", re.IGNORECASE)
_ASKS_NAMED = re.compile(
    r"^\s*(?:which|what)\s+(?!(?:did|does|do|is|are|was|were|has|have|had|would|could|might|can|will|should"
    r"|time|year|month|week|day|date)\b)\w|\bwhere\b",
    re.IGNORECASE,
)


def held_forms(text: str) -> int:
    """The answer forms ``text`` states (bit flags of :data:`TIME` and :data:`NUMBER`)."""
    if not text:
        return 0
    low = text.lower()  # the patterns are lower case: cheaper than matching without case
    forms = (TIME if _STATES_TIME.search(low) else 0) | (NUMBER if _STATES_NUMBER.search(low) else 0)
    return forms | (NAMED if _QUOTED.search(text) else 0)


def name_terms(text: str, terms: Callable[[str], Sequence[str]] | None = None) -> tuple[str, ...]:
    """The keyword terms of the capitalised words inside ``text``'s sentences (not the
    first word of the text or of a sentence): candidate proper names. Whether one names
    something specific depends on how many memories hold it, which the ranking checks.
    ``terms``: the keyword terms of one word (default :func:`~memorybus.retrieval.text.tokens`;
    an index passes a memo of it, names recur)."""
    words = _CAPITALISED.findall(text) if text else []
    if not words:
        return ()
    if terms is None:
        return tuple(dict.fromkeys(tokens(" ".join(words))))
    return tuple(dict.fromkeys(t for word in words for t in terms(word)))


def asked_forms(question: str) -> int:
    """The answer forms a question asks for: :data:`TIME` for *when*, *how long*, *how
    often*, *what year*...; :data:`NUMBER` for *how many*, *how much*, *how old*...;
    :data:`NAMED` for *which X* and *what X* (a thing: not *what did*, *what is*, *what
    year*) and for *where* (a place); 0 for a question that names no form (*who*, *why*,
    *what did*) or a text that asks nothing."""
    if not question:
        return 0
    forms = (TIME if _ASKS_TIME.search(question) else 0) | (NUMBER if _ASKS_NUMBER.search(question) else 0)
    return forms | (NAMED if _ASKS_NAMED.search(question) else 0)
