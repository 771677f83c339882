"""Pure helpers of the LangGraph store: how a namespace and key become a memory key, how
a memory is recognised as an item the store wrote (:func:`parse_item`), and the filter
and namespace-matching rules of LangGraph's ``BaseStore``. No I/O, no LangGraph import
(unit-tested on their own).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from memorybus.errors import InvalidRequest

#: the first segment of every key the store writes; items are found by this prefix
KEY_ROOT = "lgstore"
#: the mark every item the store writes carries in ``structured["langgraph"]["store"]``
MARK = "memorybus.langgraph/1"
_MAX_TIME = 1e11  # epoch seconds (year ~5138): later is not a time


@dataclass(frozen=True, slots=True)
class ParsedItem:
    """What an item's memory says of it: namespace, key, value, update time, TTL
    (minutes) and the scope key it was written for."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    updated_at: float
    ttl: float | None
    scope: str
    #: path vectors (:mod:`lgvectors`) when the store embeds with its own embedder
    vectors: bytes | None = None
    dims: int | None = None


def _time(x: Any) -> TypeGuard[float]:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and 0 <= x <= _MAX_TIME


def well_formed(blob: Any, dims: Any) -> bool:
    """Whether ``(blob, dims)`` is what ``lgvectors.pack`` writes: float32 rows of ``dims``."""
    if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
        return False
    return isinstance(blob, bytes) and len(blob) > 0 and len(blob) % (4 * dims) == 0


def parse_item(memory_key: str | None, structured: Mapping[str, Any]) -> ParsedItem | str:
    """The item a memory holds, or why it holds none (a reason: never an exception).

    A memory is an item only if its ``structured["langgraph"]`` is a map carrying
    :data:`MARK`, a namespace of non-empty string labels, a string key, a dict value,
    a time, a TTL (None or a positive number), the scope key it was written for, path
    vectors that are either absent or well formed, and if its memory key is exactly
    :func:`item_key` of that namespace and key.
    """
    meta = structured.get("langgraph") if isinstance(structured, Mapping) else None
    if not isinstance(meta, Mapping):
        return "no item metadata"
    if meta.get("store") != MARK:
        return "not written by the store"
    ns, key, value = meta.get("namespace"), meta.get("key"), meta.get("value")
    if not isinstance(ns, list | tuple) or not ns or not all(isinstance(x, str) and x for x in ns):
        return "bad namespace"
    if not isinstance(key, str) or not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return "bad key or value"
    updated, ttl, scope = meta.get("updated_at"), meta.get("ttl"), meta.get("scope")
    if not _time(updated) or not (ttl is None or (_time(ttl) and ttl > 0)) or not isinstance(scope, str):
        return "bad time, ttl or scope"
    vectors, dims = meta.get("vectors"), meta.get("dims")
    if vectors is not None and not well_formed(vectors, dims):
        return "bad path vectors"
    if memory_key != item_key(ns, key):
        return "memory key does not match its namespace and key"
    return ParsedItem(tuple(ns), key, dict(value), float(updated), None if ttl is None else float(ttl), scope,
                      vectors, dims if vectors is not None else None)  # fmt: skip
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def _escape(label: str) -> str:
    """Labels and keys may hold any character: escape the two the encoding uses."""
    return label.replace("%", "%25").replace("/", "%2F")


def prefix_key(namespace: Sequence[str]) -> str:
    """The key prefix shared by every item in ``namespace`` and below it, and by no
    other item: each label ends with a ``/``, so ``("foo",)`` gives ``lgstore/foo/``,
    which ``("foobar",)`` (``lgstore/foobar/``) does not start with."""
    return KEY_ROOT + "/" + "".join(_escape(label) + "/" for label in namespace)


def item_key(namespace: Sequence[str], key: str) -> str:
    """The memory key of item ``key`` in ``namespace`` (an empty label marks the end of
    the namespace, and labels are never empty, so a key is never a namespace)."""
    return prefix_key(namespace) + "/" + _escape(key)


def matches(path: Sequence[str], namespace: Sequence[str], kind: str) -> bool:
    """LangGraph's namespace condition: ``path`` against the start (``prefix``) or the
    end (``suffix``) of ``namespace``, label by label; ``*`` matches exactly one label."""
    if len(namespace) < len(path):
        return False
    if kind == "prefix":
        pairs = zip(path, namespace, strict=False)
    elif kind == "suffix":
        pairs = zip(reversed(path), reversed(namespace), strict=False)
    else:
        raise InvalidRequest("match_type", f"must be 'prefix' or 'suffix', got {kind!r}")
    return all(p in ("*", label) for p, label in pairs)


def _lookup(value: Mapping[str, Any], field: str) -> Any:
    """The value at ``field``: a top-level key, else a dotted path into nested dicts."""
    if field in value:
        return value[field]
    node: Any = value
    for part in field.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x)


def _compare(actual: Any, operator: str, expected: Any) -> bool:
    if operator == "$eq":
        return _same(actual, expected)
    if operator == "$ne":
        return not _same(actual, expected)
    a, b = _number(actual), _number(expected)
    if a is None or b is None:
        if isinstance(actual, str) and isinstance(expected, str):
            a_s, b_s = actual, expected
            return {"$gt": a_s > b_s, "$gte": a_s >= b_s, "$lt": a_s < b_s, "$lte": a_s <= b_s}[operator]
        return False
    if math.isnan(a) or math.isnan(b):
        return False
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[operator]


def check_filter(flt: Mapping[str, Any] | None) -> None:
    """Raise InvalidRequest for a filter LangGraph's stores would not accept."""
    if flt is None:
        return
    if not isinstance(flt, Mapping):
        raise InvalidRequest("filter", "must be a dict of field -> value or {operator: value}")
    for field, cond in flt.items():
        if not isinstance(field, str) or not field:
            raise InvalidRequest("filter", "field names must be non-empty strings")
        if isinstance(cond, Mapping) and any(isinstance(k, str) and k.startswith("$") for k in cond):
            bad = [k for k in cond if k not in _OPERATORS]
            if bad:
                raise InvalidRequest("filter", f"unsupported operator(s) {bad}; use {', '.join(_OPERATORS)}")


def _holds(actual: Any, cond: Any) -> bool:
    if isinstance(cond, Mapping):
        if any(isinstance(k, str) and k.startswith("$") for k in cond):
            return all(_compare(actual, op, expected) for op, expected in cond.items())
        # a nested condition: every field it names must hold in the nested value
        return isinstance(actual, Mapping) and all(_holds(actual.get(k), v) for k, v in cond.items())
    return _same(actual, cond)


def passes(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Whether an item's ``value`` satisfies ``flt``: every condition must hold. A
    condition is a value (equal), ``{"$op": value, ...}`` (all operators hold) or a
    nested dict of conditions on a nested value; a field may be a dotted path."""
    return not flt or all(_holds(_lookup(value, field), cond) for field, cond in flt.items())
