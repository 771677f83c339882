"""Text helpers of recall: keyword tokens, a light stemmer, names, and leading time stamps.

Everything here is pure and deterministic (no model, no I/O).
"""

from __future__ import annotations

import functools
import re

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NAME = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)?\b")

#: Function words that carry no topic (English). Kept small on purpose: "where",
#: "when" and the like are dropped, topic words never are.
STOPWORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "aren't",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "can't",
        "could",
        "couldn't",
        "did",
        "didn't",
        "do",
        "does",
        "doesn't",
        "doing",
        "don't",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "hadn't",
        "has",
        "hasn't",
        "have",
        "haven't",
        "having",
        "he",
        "he'd",
        "he'll",
        "he's",
        "her",
        "here",
        "here's",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "how's",
        "i",
        "i'd",
        "i'll",
        "i'm",
        "i've",
        "if",
        "in",
        "into",
        "is",
        "isn't",
        "it",
        "it's",
        "its",
        "itself",
        "let's",
        "me",
        "more",
        "most",
        "mustn't",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "shan't",
        "she",
        "she'd",
        "she'll",
        "she's",
        "should",
        "shouldn't",
        "so",
        "some",
        "such",
        "than",
        "that",
        "that's",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "there's",
        "these",
        "they",
        "they'd",
        "they'll",
        "they're",
        "they've",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "wasn't",
        "we",
        "we'd",
        "we'll",
        "we're",
        "we've",
        "were",
        "weren't",
        "what",
        "what's",
        "when",
        "when's",
        "where",
        "where's",
        "which",
        "while",
        "who",
        "who's",
        "whom",
        "why",
        "why's",
        "will",
        "with",
        "won't",
        "would",
        "wouldn't",
        "you",
        "you'd",
        "you'll",
        "you're",
        "you've",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "just",
        "also",
        "really",
        "yeah",
        "yes",
        "oh",
        "ok",
        "okay",
        "hey",
        "hi",
        "wow",
        "so",
        "said",
        "says",
        "say",
        "did",
        "does",
        "do",
        "been",
        "get",
        "got",
        "like",
    ]
)

_MONTHS = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ]
)

_SUFFIXES = (
    ("ational", "ate"),
    ("ization", "ize"),
    ("fulness", "ful"),
    ("iveness", "ive"),
    ("ousness", "ous"),
    ("nesses", ""),
    ("ments", "ment"),
    ("ities", "ity"),
    ("ingly", ""),
    ("edly", ""),
    ("ies", "y"),
    ("ied", "y"),
    ("ing", ""),
    ("ed", ""),
    ("es", ""),
    ("s", ""),
)


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light suffix stripper: ``painting``/``painted``/``paints`` -> ``paint``.

    Deliberately conservative (keeps at least three letters, undoubles a final
    consonant pair); enough to join inflections in keyword recall. Cached: a
    conversation repeats its words, and every write and query tokenises.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("'s"):
        word = word[:-2]
    for suffix, repl in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) + len(repl) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            if suffix == "es" and not word.endswith(("sses", "xes", "zes", "ches", "shes")):
                continue
            base = word[: len(word) - len(suffix)] + repl
            if suffix in ("ing", "ed") and len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "lsz":
                base = base[:-1]
            return _trim_e(base)
    return _trim_e(word)


def _trim_e(word: str) -> str:
    # "hike"/"hiking"/"hiked" -> "hik": a final silent e is dropped everywhere
    return word[:-1] if len(word) > 3 and word.endswith("e") and not word.endswith("ee") else word


def tokens(text: str) -> list[str]:
    """Keyword tokens of ``text``: lower case, stop words dropped, stemmed."""
    out = []
    for raw in _WORD.findall(text.lower()):
        w = raw[:-2] if raw.endswith("'s") else raw
        if w in STOPWORDS or len(w) < 2:
            continue
        out.append(stem(w))
    return out


def names(text: str) -> set[str]:
    """Capitalised words (candidate names/entities), lower-cased; sentence starts that are
    stop words ("What", "When") are not names."""
    return {m.lower() for m in _NAME.findall(text) if m.lower() not in STOPWORDS and m.lower() not in _MONTHS}


# A leading "(1:56 pm on 8 May, 2023)" / "[2023-05-08]" stamp that dates the text.
_PREFIX = re.compile(r"^\s*[\(\[]([^()\[\]]{4,48})[\)\]]\s*")


def split_time_prefix(text: str) -> tuple[float | None, str]:
    """``(timestamp, rest)`` if ``text`` starts with a bracketed date, else ``(None, text)``.

    The date is parsed with :func:`memorybus.retrieval.timeparse.parse_datetime`;
    a bracket that is not a date is left in place.
    """
    from memorybus.retrieval.timeparse import parse_datetime

    m = _PREFIX.match(text)
    if not m:
        return None, text
    when = parse_datetime(m.group(1))
    if when is None:
        return None, text
    return when, text[m.end() :]
