"""Checks every entry point shares: text that can be stored, times that can be represented.

Pure functions over plain values (no Ray, no I/O); they raise the
:class:`~memorybus.errors.MemoryBusError` subclass the caller names, so a bad value
is refused where it enters and changes nothing.

- Text: every string memorybus stores, indexes, routes or logs is encoded as UTF-8.
  A lone surrogate (``"\\ud800"``) has no UTF-8 form; it is refused.
- Time: every time is epoch seconds in ``[0, MAX_TIME]``. ``MAX_TIME`` is the start of
  year 9999 (UTC): dates up to it can be formatted, and a year or a month added to one
  still is, so readers (time windows of a query, dated prompt blocks) never overflow.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Literal, overload

from memorybus.errors import MemoryBusError

#: the latest time memorybus accepts anywhere: 9999-01-01T00:00:00Z
MAX_TIME = 253_370_764_800.0
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_text(value: object) -> bool:
    """Whether ``value`` is a str with a UTF-8 form (no lone surrogates)."""
    return isinstance(value, str) and (value.isascii() or _SURROGATE.search(value) is None)


def check_text(name: str, value: object, error: type[MemoryBusError]) -> str:
    """``value`` if it is storable text, else ``error(name, reason)``."""
    if not isinstance(value, str):
        raise error(name, f"must be a string, got {type(value).__name__}")
    if not is_text(value):
        raise error(name, "contains a lone surrogate (not valid Unicode text)")
    return value


@overload
def check_time(name: str, value: object, error: type[MemoryBusError], *, optional: Literal[False] = False) -> float: ...


@overload
def check_time(name: str, value: object, error: type[MemoryBusError], *, optional: bool) -> float | None: ...


def check_time(name: str, value: object, error: type[MemoryBusError], *, optional: bool = False) -> float | None:
    """``value`` as float if it is epoch seconds in ``[0, MAX_TIME]``, else ``error(name, reason)``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise error(name, f"must be epoch seconds, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise error(name, f"{value!r} is not a finite time")
    if not 0 <= value <= MAX_TIME:
        raise error(name, f"{value!r} is outside 0..{MAX_TIME:.0f} (year 9999)")
    return float(value)


def utc_date(ts: float) -> datetime | None:
    """The UTC date of ``ts``, or None for a time no date can hold (a reader never raises
    on a stored time, even one written before the bounds existed)."""
    try:
        return datetime.fromtimestamp(ts, UTC)
    except (ValueError, OverflowError, OSError):
        return None


def is_int(value: object, lo: int | None = None, hi: int | None = None) -> bool:
    """Whether ``value`` is an int (a bool is not) within ``lo..hi`` (each bound inclusive, when given)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return (lo is None or value >= lo) and (hi is None or value <= hi)
