"""Dates people and agents write, read as times (English, rule based, UTC).

The spec (each form has a test in ``tests/unit/test_timeparse.py``):

:func:`parse_datetime` reads the first *full* date in a text, as epoch seconds:

- ISO 8601 and its common variants: ``2024-03-05``, ``2024/03/05``,
  ``2024-03-05T14:30``, ``2024-03-05 14:30:15``, ``2024-03-05T14:30:00Z``;
- day month year: ``5 March 2024``, ``5th of March, 2024``, ``5 Mar 2024``;
- month day year: ``March 5, 2024``, ``Mar 5th 2024``;
- a time of day before (``2:30 pm on 5 March 2024``) or after (``5 March 2024
  at 14:30``, ``March 5, 2024, 2:30pm``) a spelled-out date.

:func:`query_times` finds the times a query names, as :class:`TimeWindow` s
(``[start, end)``); relative forms count from ``reference`` (the recall's
"as of" time, else now):

- a day: any full date above; a date without a year (``May 8th``, ``8 May``,
  ``on the 8th of May``) is its last occurrence on or before the reference day;
- ``today``, ``tonight``, ``this morning`` / ``afternoon`` / ``evening``;
  ``yesterday``, ``last night``;
- weekdays: ``last Tuesday`` (the last Tuesday before the reference day),
  ``on Tuesday`` (the last Tuesday on or before it);
- weeks, months, years, weekends: ``this week``, ``last week``, ``last month``,
  ``last year``, ``this weekend``, ``last weekend`` (weeks start on Monday);
- ``N days|weeks|months|years ago`` with N a number, a number word up to
  twelve, ``a``/``an``, ``a few`` (3) or ``a couple of`` (2): one unit around
  that point;
- a month: ``in June`` (also ``during``, ``since``, ``by``, ``until``,
  ``early``/``mid``/``late June``): the last June that began on or before the
  reference; ``June 2023`` or ``June of 2023``: that month;
- a year: ``in 2023`` (also ``during``, ``since``, ``by``, ``until``,
  ``early``/``late``);
- ``before`` / ``after`` a full date makes that date the reference of the
  query's relative forms (``the week before 5 March 2024`` is the week that
  ends on 5 March 2024; ``two days after 5 March 2024`` is 7 March).

Everything is UTC and deterministic. Unknown or impossible dates (``31 February
2024``) are ignored, never guessed.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

DAY = 86_400.0
MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_MON = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_FULL_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december)"
_WEEKDAY = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a few": 3, "few": 3,
    "a couple of": 2, "a couple": 2, "couple of": 2,
}  # fmt: skip
_UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.0, "year": 365.0}


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """``[start, end)`` in epoch seconds, and the words of the query that named it."""

    start: float
    end: float
    text: str = ""

    def distance(self, when: float) -> float:
        """Seconds from ``when`` to the window (0 inside it)."""
        if when < self.start:
            return self.start - when
        if when >= self.end:
            return when - self.end
        return 0.0


def _ts(y: int, m: int = 1, d: int = 1, hh: int = 0, mm: int = 0, ss: int = 0) -> float:
    return datetime(y, m, d, hh, mm, ss, tzinfo=UTC).timestamp()


def _month(name: str) -> int:
    name = name.lower().rstrip(".")
    return MONTHS[name] if name in MONTHS else MONTHS[name[:3]]


def _clock(hh: str | None, mm: str | None, ampm: str | None) -> tuple[int, int]:
    h, mi = int(hh or 0), int(mm or 0)
    if ampm:
        ampm = ampm.lower().replace(".", "")
        if ampm == "pm" and h < 12:
            h += 12
        if ampm == "am" and h == 12:
            h = 0
    if not (0 <= h <= 23 and 0 <= mi <= 59):
        raise ValueError("bad time of day")
    return h, mi


_TIME = r"(\d{1,2})(?::(\d{2}))?\s*([ap]\.?m\.?)?"
_ISO = re.compile(r"\b(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?:[T\s]+(\d{1,2}):(\d{2})(?::(\d{2}))?)?")
_DMY = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON}\.?,?\s+(\d{{4}})\b", re.I)
_MDY = re.compile(rf"\b{_MON}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_TIME_BEFORE = re.compile(r"\b(\d{1,2}):(\d{2})\s*([ap]\.?m\.?)?\s*(?:on\s+)?$", re.I)
_TIME_AFTER = re.compile(rf"^\s*,?\s*(?:at\s+)?{_TIME}", re.I)


def _time_near(text: str, start: int, end: int) -> tuple[int, int]:
    """A time of day written just before or just after the date at ``text[start:end]``."""
    before = _TIME_BEFORE.search(text[max(0, start - 24) : start])
    if before:
        return _clock(before.group(1), before.group(2), before.group(3))
    after = _TIME_AFTER.match(text[end : end + 16])
    if after and (after.group(2) or after.group(3)):  # "at 14:30", "2pm"; a bare number is not a time
        return _clock(after.group(1), after.group(2), after.group(3))
    return 0, 0


def _full_dates(text: str) -> list[tuple[int, int, float]]:
    """Every full date in ``text``: ``(start, end, epoch seconds)``, in text order."""
    out: list[tuple[int, int, float]] = []
    taken: list[tuple[int, int]] = []
    for pattern in (_ISO, _DMY, _MDY):
        for m in pattern.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            try:
                if pattern is _ISO:
                    hh, mm = _clock(m.group(4), m.group(5), None) if m.group(4) else (0, 0)
                    ss = int(m.group(6) or 0)
                    when = _ts(int(m.group(1)), int(m.group(2)), int(m.group(3)), hh, mm, min(ss, 59))
                else:
                    if pattern is _DMY:
                        day, month, year = int(m.group(1)), _month(m.group(2)), int(m.group(3))
                    else:
                        month, day, year = _month(m.group(1)), int(m.group(2)), int(m.group(3))
                    hh, mm = _time_near(text, m.start(), m.end())
                    when = _ts(year, month, day, hh, mm)
            except (ValueError, OverflowError, KeyError):
                continue
            taken.append(m.span())
            out.append((m.start(), m.end(), when))
    out.sort()
    return out


def parse_datetime(text: str) -> float | None:
    """Epoch seconds (UTC) of the first full date in ``text`` (day, month and year), or None."""
    if not isinstance(text, str):
        return None
    found = _full_dates(text)
    return found[0][2] if found else None


# ----------------------------------------------------------------- queries
_Q_DAY_MONTH = re.compile(rf"\b(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MON}\b\.?", re.I)
_Q_MONTH_DAY = re.compile(rf"\b{_MON}\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?!\s*:)", re.I)
_Q_MONTH_YEAR = re.compile(rf"\b{_MON}\.?,?\s+(?:of\s+)?(\d{{4}})\b", re.I)
_Q_MONTH = re.compile(
    rf"\b(?:in|during|since|by|until|early|late|mid|mid-)\s*(?:early\s+|late\s+|mid-?\s*)?{_FULL_MONTH}\b", re.I
)
_Q_YEAR = re.compile(r"\b(?:in|during|since|by|until|early|late)\s+((?:19|20)\d{2})\b", re.I)
_Q_AGO = re.compile(
    r"\b(\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:a\s+)?few|(?:a\s+)?couple(?:\s+of)?)"
    r"\s+(day|week|month|year)s?\s+(ago|before|after)\b",
    re.I,
)
_Q_WEEKDAY = re.compile(rf"\b(last|on|this\s+past)\s+{_WEEKDAY}\b", re.I)
_Q_NAMED = re.compile(
    r"\b(today|tonight|this\s+(?:morning|afternoon|evening)|yesterday|last\s+night"
    r"|(?:this|last|past|previous)\s+(?:week|month|year|weekend)"
    r"|the\s+(?:day|week|weekend|month)\s+(?:before|after))\b",
    re.I,
)
_ANCHOR = re.compile(r"\b(before|after|prior\s+to|as\s+of)\s+", re.I)


def _last_on_or_before(month: int, day: int, ref: float) -> float:
    """The last ``day`` of ``month`` on or before the day of ``ref`` (a missing year)."""
    d = datetime.fromtimestamp(ref, UTC)
    for year in (d.year, d.year - 1, d.year - 2, d.year - 3, d.year - 4):
        try:
            when = _ts(year, month, day)
        except ValueError:
            continue  # 29 February of a common year
        if when <= ref:
            return when
    raise ValueError("no such date")


def _month_window(year: int, month: int, text: str) -> TimeWindow:
    end = _ts(year + (month == 12), month % 12 + 1)
    return TimeWindow(_ts(year, month), end, text)


def _day_start(ref: float) -> float:
    d = datetime.fromtimestamp(ref, UTC)
    return _ts(d.year, d.month, d.day)


def _count(word: str) -> int:
    word = " ".join(word.lower().split())
    return int(word) if word.isdigit() else _NUMBER_WORDS.get(word, 1)


def query_times(query: str, reference: float) -> list[TimeWindow]:
    """The time windows a query names, in the order they appear (may be empty).

    A window no date can hold (a year past 9999, a reference time out of range)
    is never an error: the query is then ranked without time windows."""
    if not isinstance(query, str) or not query:
        return []
    try:
        return _query_times(query, reference)
    except (ValueError, OverflowError, OSError):
        return []


def _query_times(query: str, reference: float) -> list[TimeWindow]:
    found: list[tuple[int, TimeWindow]] = []
    taken: list[tuple[int, int]] = []

    def claim(m: re.Match[str]) -> bool:
        s, e = m.span()
        if any(s < e2 and s2 < e for s2, e2 in taken):
            return False
        taken.append((s, e))
        return True

    # full dates; one right after "before"/"after"/"as of" anchors the relative forms instead
    ref = reference
    for s, e, when in _full_dates(query):
        taken.append((s, e))
        anchor = [a for a in _ANCHOR.finditer(query[:s]) if a.end() == s]
        if anchor and ref == reference:
            ref = _day_start(when)
            continue
        found.append((s, TimeWindow(_day_start(when), _day_start(when) + DAY, query[s:e])))
    day0 = _day_start(ref)

    for m in _Q_AGO.finditer(query):
        if not claim(m):
            continue
        n, unit, how = _count(m.group(1)), m.group(2).lower(), m.group(3).lower()
        sign = 1 if how == "after" else -1
        if unit == "day":
            start = day0 + sign * n * DAY
            found.append((m.start(), TimeWindow(start, start + DAY, m.group(0))))
        else:
            span = _UNIT_DAYS[unit] * DAY
            center = day0 + sign * n * span
            found.append((m.start(), TimeWindow(center - span / 2, center + span / 2, m.group(0))))
    for m in _Q_MONTH_YEAR.finditer(query):
        if claim(m):
            try:
                found.append((m.start(), _month_window(int(m.group(2)), _month(m.group(1)), m.group(0))))
            except (ValueError, KeyError):
                continue
    for pattern, day_group, month_group in ((_Q_DAY_MONTH, 1, 2), (_Q_MONTH_DAY, 2, 1)):
        for m in pattern.finditer(query):
            if not claim(m):
                continue
            try:
                start = _last_on_or_before(_month(m.group(month_group)), int(m.group(day_group)), ref)
            except (ValueError, KeyError):
                continue
            found.append((m.start(), TimeWindow(start, start + DAY, m.group(0))))
    for m in _Q_MONTH.finditer(query):
        if not claim(m):
            continue
        month = _month(m.group(1))
        d = datetime.fromtimestamp(ref, UTC)
        year = d.year if month <= d.month else d.year - 1
        found.append((m.start(), _month_window(year, month, m.group(0))))
    for m in _Q_YEAR.finditer(query):
        if claim(m):
            y = int(m.group(1))
            found.append((m.start(), TimeWindow(_ts(y), _ts(y + 1), m.group(0))))
    for m in _Q_WEEKDAY.finditer(query):
        if not claim(m):
            continue
        back = (datetime.fromtimestamp(day0, UTC).weekday() - WEEKDAYS[m.group(2).lower()]) % 7
        if back == 0 and m.group(1).lower() != "on":
            back = 7  # "last Tuesday" on a Tuesday is a week ago
        start = day0 - back * DAY
        found.append((m.start(), TimeWindow(start, start + DAY, m.group(0))))
    for m in _Q_NAMED.finditer(query):
        if claim(m):
            found.append((m.start(), _named(" ".join(m.group(1).lower().split()), day0)))
    found.sort(key=lambda x: x[0])
    return [w for _, w in found]


def _named(phrase: str, day0: float) -> TimeWindow:
    """A named period relative to the day starting at ``day0``."""
    d = datetime.fromtimestamp(day0, UTC)
    words = phrase.split()
    if phrase in ("today", "tonight") or (words[0] == "this" and words[1] in ("morning", "afternoon", "evening")):
        return TimeWindow(day0, day0 + DAY, phrase)
    if phrase in ("yesterday", "last night", "the day before"):
        return TimeWindow(day0 - DAY, day0, phrase)
    if phrase == "the day after":
        return TimeWindow(day0 + DAY, day0 + 2 * DAY, phrase)
    unit = words[1] if words[0] == "the" else words[-1]
    after = words[-1] == "after"
    this = words[0] == "this"
    if unit == "weekend":
        sat = day0 - ((d.weekday() - 5) % 7) * DAY  # the last Saturday on or before the day
        if after:
            sat = day0 + ((5 - d.weekday()) % 7 or 7) * DAY
        elif this:
            sat = sat if d.weekday() >= 5 else day0 + (5 - d.weekday()) * DAY
        elif sat + 2 * DAY > day0:  # the day is inside that weekend: the one before
            sat -= 7 * DAY
        return TimeWindow(sat, sat + 2 * DAY, phrase)
    if unit == "week":
        if words[0] == "the":
            return TimeWindow(day0 + DAY, day0 + 8 * DAY, phrase) if after else TimeWindow(day0 - 7 * DAY, day0, phrase)
        monday = day0 - d.weekday() * DAY
        return TimeWindow(monday, monday + 7 * DAY, phrase) if this else TimeWindow(monday - 7 * DAY, monday, phrase)
    if unit == "month":
        if words[0] == "the":
            if after:
                return TimeWindow(day0 + DAY, day0 + 31 * DAY, phrase)
            return TimeWindow(day0 - 30 * DAY, day0, phrase)
        if this:
            return _month_window(d.year, d.month, phrase)
        y, mo = (d.year, d.month - 1) if d.month > 1 else (d.year - 1, 12)
        return _month_window(y, mo, phrase)
    y = d.year if this else d.year - 1
    return TimeWindow(_ts(y), _ts(y + 1), phrase)


def time_match(windows: list[TimeWindow], when: float, slack_days: float) -> float:
    """1.0 inside a window, falling linearly to 0 at ``slack_days`` outside; the best window counts."""
    if not windows or when <= 0:
        return 0.0
    slack = max(1e-9, slack_days * DAY)
    return max(max(0.0, 1.0 - w.distance(when) / slack) for w in windows)


def shift(ts: float, days: float) -> float:
    try:
        return (datetime.fromtimestamp(ts, UTC) + timedelta(days=days)).timestamp()
    except (ValueError, OverflowError, OSError):
        return ts + days * DAY
