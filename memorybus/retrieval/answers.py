"""Answer forms: what kind of answer a question asks for, and which kinds a memory holds.

A question that asks *when* (or *how long*, *what year*) is answered by a memory that
states a time; one that asks *how many* (or *how much*, *how old*) by a memory that
states a number. This is the answer-type check of classic question answering, read
from the text alone (English, rule based, no model): :func:`asked_forms` reads the
question, :func:`held_forms` a memory (once, when it is indexed), and the ranking
prefers, among relevant memories, those holding a form the question asks for.

The forms are bit flags (:data:`TIME`, :data:`NUMBER`); 0 means none.
"""

from __future__ import annotations

import re

TIME = 1
NUMBER = 2

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
# what a question asks for
_ASKS_TIME = re.compile(r"\bwhen\b|\bhow\s+long\b|\bhow\s+often\b|\bwhat\s+(?:time|year|month|day|date)\b", re.I)
_ASKS_NUMBER = re.compile(r"\bhow\s+(?:many|much|old|often|far)\b", re.IGNORECASE)


def held_forms(text: str) -> int:
    """The answer forms ``text`` states (bit flags of :data:`TIME` and :data:`NUMBER`)."""
    if not text:
        return 0
    low = text.lower()  # the patterns are lower case: cheaper than matching without case
    return (TIME if _STATES_TIME.search(low) else 0) | (NUMBER if _STATES_NUMBER.search(low) else 0)


def asked_forms(question: str) -> int:
    """The answer forms a question asks for: :data:`TIME` for *when*, *how long*, *how
    often*, *what year*...; :data:`NUMBER` for *how many*, *how much*, *how old*...;
    0 for a question that names no form (*what*, *who*, *why*) or a text that asks nothing."""
    if not question:
        return 0
    return (TIME if _ASKS_TIME.search(question) else 0) | (NUMBER if _ASKS_NUMBER.search(question) else 0)
