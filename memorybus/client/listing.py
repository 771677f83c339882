"""Listing without a query: :meth:`MemoryBus.list_memories`, paginated.

An operation generator of :class:`~memorybus.client.MemoryBus` (see
:mod:`memorybus.client.operation`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memorybus.actors.runtime import Op
from memorybus.client.operation import enums
from memorybus.errors import InvalidRequest
from memorybus.model import MemoryKind, MemoryNode, MemoryStatus
from memorybus.scopes import Context, Level, Scope

if TYPE_CHECKING:
    from memorybus.client import MemoryBus


@dataclass(slots=True)
class MemoryPage:
    """One page of :meth:`MemoryBus.list_memories`: the memories, and the cursor to
    pass for the next page (``None`` when this page is the last)."""

    memories: list[MemoryNode] = field(default_factory=list)
    cursor: str | None = None


def _encode_cursor(node: MemoryNode) -> str:
    return f"{node.created_at!r}/{node.id}"


def _decode_cursor(cursor: str) -> tuple[float, str]:
    stamp, sep, memory_id = cursor.partition("/") if isinstance(cursor, str) else ("", "", "")
    try:
        value = float(stamp)
    except ValueError:
        value = math.nan
    if not sep or not memory_id or not math.isfinite(value):
        raise InvalidRequest("cursor", "is not a cursor returned by list_memories")
    return value, memory_id


def list_memories(
    bus: MemoryBus,
    context: Context | None,
    *,
    scope: Scope | Level | str | None = None,
    key_prefix: str | None = None,
    kinds: Sequence[MemoryKind | str] | None = None,
    statuses: Sequence[MemoryStatus | str] | None = None,
    limit: int = 100,
    cursor: str | None = None,
    within: Scope | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Op[MemoryPage]:
    """The memories ``context`` may see, without a query, oldest first.

    Ordered by ``(created_at, id)``; one page of at most ``limit``; pass the
    page's ``cursor`` to get the next (a memory written meanwhile with an older
    ``created_at`` than the cursor is not returned). Filters: ``scope`` (exactly
    that scope: a ``Scope`` or a level of the context such as ``"user"``),
    ``within`` (a ``Scope`` and every scope inside it), ``key_prefix`` (keys
    starting with it), ``kinds``, ``statuses`` (default active and consolidated),
    ``since <= created_at < until`` (epoch seconds). Expired memories are left
    out. Read-only: listing does not count as an access.

    ``context=None`` is the operator's view (``memorybus ls``): every memory,
    whatever its scope; not for agents.
    """
    if context is not None and not isinstance(context, Context):
        raise InvalidRequest("context", f"must be a Context or None, got {type(context).__name__}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
        raise InvalidRequest("limit", "must be an int between 1 and 10000")
    if key_prefix is not None and (not isinstance(key_prefix, str) or not key_prefix):
        raise InvalidRequest("key_prefix", "must be a non-empty string or None")
    if within is not None and not isinstance(within, Scope):
        raise InvalidRequest("within", "must be a Scope or None")
    for name, value in (("since", since), ("until", until)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise InvalidRequest(name, "must be epoch seconds or None")
    filters: dict[str, Any] = {
        "key_prefix": key_prefix,
        "kinds": None if kinds is None else enums(MemoryKind, kinds, "kinds"),
        "statuses": None if statuses is None else enums(MemoryStatus, statuses, "statuses"),
        "limit": limit,
        "after": None if cursor is None else _decode_cursor(cursor),
        "within": within,
        "since": since,
        "until": until,
    }
    if scope is not None:
        if context is None and not isinstance(scope, Scope):
            raise InvalidRequest("scope", "without a context, give a Scope")
        target = scope if context is None else context.resolve_scope(scope)
        if not isinstance(target, Scope):
            raise InvalidRequest("scope", "must be a Scope or a level name")
        filters["scope_key"] = target.key
        owners = [bus._router.shard_for(target.key)]
    elif context is None:
        owners = list(range(bus.config.num_shards))
    else:
        owners = bus._owners(context)
    handles = bus._shard_handles()
    groups = yield [handles[i].list_memories.remote(context, filters, (bus._credential or "")) for i in owners]
    merged = sorted((n for g in groups for n in g), key=lambda n: (n.created_at, n.id))
    page = merged[:limit]
    more = len(merged) > limit or any(len(g) == limit for g in groups)
    return MemoryPage(page, _encode_cursor(page[-1]) if page and more else None)
