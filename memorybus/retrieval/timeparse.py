"""Dates in memories and time expressions in queries (English, rule based, UTC).

- :func:`parse_datetime` reads one date stamp ("1:56 pm on 8 May, 2023",
  "2023/05/20 (Sat) 07:47", "2023-05-08T10:00", "May 8, 2023") as epoch seconds.
- :func:`query_times` finds the time expressions of a query ("in June",
  "in 2022", "on October 13, 2023", "last week", "two months ago",
  "last weekend before April 10, 2023") as :class:`TimeWindow` s; relative
  expressions count from ``reference`` (the recall's "as of" time or now).
"""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memorybus.validation import utc_date

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
_MON = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "few": 3, "couple": 2,
}  # fmt: skip
DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """``[start, end)`` in epoch seconds; ``month`` set (and the span open) for a month of any year."""

    start: float
    end: float
    month: int | None = None
    text: str = ""

    def distance(self, when: float) -> float:
        """Seconds from ``when`` to the window (0 inside it)."""
        if self.month is not None:
            d = utc_date(when)
            if d is None:  # a stored time no date can hold: far from every month
                return math.inf
            return (
                0.0
                if d.month == self.month
                else 30 * DAY * min((d.month - self.month) % 12, (self.month - d.month) % 12)
            )
        if when < self.start:
            return self.start - when
        if when >= self.end:
            return when - self.end
        return 0.0


def _ts(y: int, m: int = 1, d: int = 1, hh: int = 0, mm: int = 0) -> float:
    return datetime(y, m, d, hh, mm, tzinfo=UTC).timestamp()


def _month_end(y: int, m: int) -> float:
    return _ts(y + (m == 12), m % 12 + 1)


def _clock(hh: str | None, mm: str | None, ampm: str | None) -> tuple[int, int]:
    h, mi = int(hh or 0), int(mm or 0)
    if ampm:
        ampm = ampm.lower().replace(".", "")
        if ampm == "pm" and h < 12:
            h += 12
        if ampm == "am" and h == 12:
            h = 0
    return min(h, 23), min(mi, 59)


_ISO = re.compile(r"(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?:\s*\(\w+\))?(?:[T\s]+(\d{1,2}):(\d{2}))?")
_DMY = re.compile(
    rf"(?:(\d{{1,2}}):(\d{{2}})\s*([ap]\.?m\.?)?\s*(?:on\s+)?)?(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON}\.?,?\s+(\d{{4}})",
    re.I,
)
_MDY = re.compile(
    rf"(?:(\d{{1,2}}):(\d{{2}})\s*([ap]\.?m\.?)?\s*(?:on\s+)?)?{_MON}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})",
    re.I,
)


def parse_datetime(text: str) -> float | None:
    """Epoch seconds (UTC) of the first full date in ``text`` (day, month, year), or None."""
    if not isinstance(text, str):
        return None
    try:
        m = _ISO.search(text)
        if m:
            hh, mm = _clock(m.group(4), m.group(5), None)
            return _ts(int(m.group(1)), int(m.group(2)), int(m.group(3)), hh, mm)
        m = _DMY.search(text)
        if m:
            hh, mm = _clock(m.group(1), m.group(2), m.group(3))
            return _ts(int(m.group(6)), MONTHS[m.group(5).lower()[:3] if m.group(5).lower()[:3] != "sep" else "sep"],
                       int(m.group(4)), hh, mm)  # fmt: skip
        m = _MDY.search(text)
        if m:
            hh, mm = _clock(m.group(1), m.group(2), m.group(3))
            return _ts(int(m.group(6)), MONTHS[m.group(4).lower()[:3]], int(m.group(5)), hh, mm)
    except (ValueError, OverflowError, KeyError):
        return None
    return None


# ----------------------------------------------------------------- queries
_Q_DATE_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON}\b\.?,?\s*(\d{{4}})?", re.I)
_Q_DATE_MDY = re.compile(rf"\b{_MON}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s*(\d{{4}}))?", re.I)
_Q_MONTH_YEAR = re.compile(rf"\b{_MON}\b\.?,?\s*(?:of\s+)?(\d{{4}})\b", re.I)
_Q_MONTH = re.compile(
    r"\b(?:in|during|of|since|by|until|early|late|mid|around)\s+(?:early\s+|late\s+|mid-?\s*)?"
    r"(january|february|march|april|may|june|july|august|september|october|november|december)\b",
    re.I,
)
_Q_YEAR = re.compile(r"\b(?:in|during|of|since|by|until|around|early|late)\s+((?:19|20)\d{2})\b", re.I)
_Q_AGO = re.compile(r"\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple(?: of)?)\s+"
                    r"(day|week|month|year)s?\s+ago\b", re.I)  # fmt: skip
_Q_LAST = re.compile(r"\b(yesterday|today|tonight|this morning|last night|last weekend|this weekend|"
                     r"(?:last|past|this|previous) (?:week|month|year|weekend))\b", re.I)  # fmt: skip
_Q_BEFORE = re.compile(r"\b(?:before|prior to|as of|on)\s+(.{6,32})$", re.I)


def _day_window(y: int, m: int, d: int, text: str) -> TimeWindow:
    start = _ts(y, m, d)
    return TimeWindow(start, start + DAY, None, text)


def query_times(query: str, reference: float) -> list[TimeWindow]:
    """The time windows a query names, most specific first (may be empty).

    A window no date can hold (a year past 9999, a reference time out of range)
    is never an error: the query is then ranked without time windows."""
    try:
        return _query_times(query, reference)
    except (ValueError, OverflowError, OSError):
        return []


def _query_times(query: str, reference: float) -> list[TimeWindow]:
    out: list[TimeWindow] = []
    spans: list[tuple[int, int]] = []

    def free(m: re.Match[str]) -> bool:
        s, e = m.span()
        if any(s < e2 and s2 < e for s2, e2 in spans):
            return False
        spans.append((s, e))
        return True

    ref_year = datetime.fromtimestamp(reference, UTC).year
    for m in _Q_DATE_DMY.finditer(query):
        if free(m):
            y = int(m.group(3)) if m.group(3) else ref_year
            try:
                out.append(_day_window(y, MONTHS[m.group(2).lower()[:3]], int(m.group(1)), m.group(0)))
            except ValueError:
                continue
    for m in _Q_DATE_MDY.finditer(query):
        if int(m.group(2)) > 31 or not free(m):
            continue
        y = int(m.group(3)) if m.group(3) else ref_year
        try:
            out.append(_day_window(y, MONTHS[m.group(1).lower()[:3]], int(m.group(2)), m.group(0)))
        except ValueError:
            continue
    for m in _Q_MONTH_YEAR.finditer(query):
        if free(m):
            y, mo = int(m.group(2)), MONTHS[m.group(1).lower()[:3]]
            out.append(TimeWindow(_ts(y, mo), _month_end(y, mo), None, m.group(0)))
    for m in _Q_MONTH.finditer(query):
        if free(m):
            out.append(TimeWindow(0.0, 0.0, MONTHS[m.group(1).lower()[:3]], m.group(0)))
    for m in _Q_YEAR.finditer(query):
        if free(m):
            y = int(m.group(1))
            out.append(TimeWindow(_ts(y), _ts(y + 1), None, m.group(0)))
    # relative expressions count from an explicit "before <date>" when the query has one
    ref = reference
    tail = _Q_BEFORE.search(query)
    if tail:
        when = parse_datetime(tail.group(1))
        if when is not None:
            ref = when
    for m in _Q_AGO.finditer(query):
        if free(m):
            word = m.group(1).lower().replace(" of", "")
            n = int(word) if word.isdigit() else _NUMBERS.get(word, 1)
            unit = {"day": 1, "week": 7, "month": 30, "year": 365}[m.group(2).lower()]
            center = ref - n * unit * DAY
            half = max(1.0, 0.5 * unit) * DAY
            out.append(TimeWindow(center - half, center + half, None, m.group(0)))
    for m in _Q_LAST.finditer(query):
        if free(m):
            out.append(_relative(m.group(1).lower(), ref))
    return out


def _relative(phrase: str, ref: float) -> TimeWindow:
    d = datetime.fromtimestamp(ref, UTC)
    day0 = _ts(d.year, d.month, d.day)
    if phrase in ("today", "tonight", "this morning"):
        return TimeWindow(day0, day0 + DAY, None, phrase)
    if phrase in ("yesterday", "last night"):
        return TimeWindow(day0 - DAY, day0, None, phrase)
    unit = phrase.rsplit(maxsplit=1)[-1]
    this = phrase.startswith("this")
    if unit == "weekend":
        sat = day0 - ((d.weekday() - 5) % 7) * DAY
        if not this and sat >= day0 - DAY:
            sat -= 7 * DAY
        return TimeWindow(sat, sat + 2 * DAY, None, phrase)
    if unit == "week":
        start = day0 - d.weekday() * DAY
        return (
            TimeWindow(start, start + 7 * DAY, None, phrase)
            if this
            else TimeWindow(start - 7 * DAY, start, None, phrase)
        )
    if unit == "month":
        if this:
            return TimeWindow(_ts(d.year, d.month), _month_end(d.year, d.month), None, phrase)
        y, mo = (d.year, d.month - 1) if d.month > 1 else (d.year - 1, 12)
        return TimeWindow(_ts(y, mo), _month_end(y, mo), None, phrase)
    y = d.year if this else d.year - 1
    return TimeWindow(_ts(y), _ts(y + 1), None, phrase)


def time_match(windows: list[TimeWindow], when: float, slack_days: float) -> float:
    """1.0 inside a window, falling linearly to 0 at ``slack_days`` outside; best window wins."""
    if not windows or when <= 0:
        return 0.0
    slack = max(1e-9, slack_days * DAY)
    best = 0.0
    for w in windows:
        dist = w.distance(when)
        best = max(best, 0.0, 1.0 - dist / slack)
    return best


def days_between(a: float, b: float) -> float:
    return abs(a - b) / DAY


def shift(ts: float, days: float) -> float:
    try:
        return (datetime.fromtimestamp(ts, UTC) + timedelta(days=days)).timestamp()
    except (ValueError, OverflowError, OSError):
        return ts + days * DAY
