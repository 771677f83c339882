"""Listing without a query: :meth:`MemoryBus.list_memories`, paginated.

Mixed into :class:`memorybus.client.MemoryBus`; same conventions as the rest of the
client (a sync and an ``*_async`` form over one operation generator).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memorybus.actors import runtime
from memorybus.actors.runtime import Op
from memorybus.errors import InvalidRequest
from memorybus.model import MemoryKind, MemoryNode, MemoryStatus
from memorybus.scopes import Context, Level, Scope

if TYPE_CHECKING:
    from memorybus.config import Config
    from memorybus.scopes import Router


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


def _enum_list(enum: Any, values: Sequence[Any] | None, name: str) -> list[Any] | None:
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    try:
        return [enum(v) for v in values]
    except (ValueError, TypeError):
        raise InvalidRequest(name, f"unknown value in {values!r}") from None


class ListingClientMixin:
    """``list_memories`` for :class:`MemoryBus`."""

    config: Config
    router: Router

    # provided by MemoryBus
    def _shard_handles(self) -> list[Any]:
        raise NotImplementedError

    def _owners(self, context: Context) -> list[int]:
        raise NotImplementedError

    def _list_op(
        self,
        context: Context | None,
        scope: Scope | Level | str | None,
        key_prefix: str | None,
        kinds: Sequence[MemoryKind | str] | None,
        statuses: Sequence[MemoryStatus | str] | None,
        limit: int,
        cursor: str | None,
        within: Scope | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> Op[MemoryPage]:
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
            "kinds": _enum_list(MemoryKind, kinds, "kinds"),
            "statuses": _enum_list(MemoryStatus, statuses, "statuses"),
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
            assert isinstance(target, Scope)
            filters["scope_key"] = target.key
            owners = [self.router.shard_for(target.key)]
        elif context is None:
            owners = list(range(self.config.num_shards))
        else:
            owners = self._owners(context)
        handles = self._shard_handles()
        groups = yield [handles[i].list_memories.remote(context, filters) for i in owners]
        merged = sorted((n for g in groups for n in g), key=lambda n: (n.created_at, n.id))
        page = merged[:limit]
        more = len(merged) > limit or any(len(g) == limit for g in groups)
        return MemoryPage(page, _encode_cursor(page[-1]) if page and more else None)

    def list_memories(
        self,
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
    ) -> MemoryPage:
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
        op = self._list_op(context, scope, key_prefix, kinds, statuses, limit, cursor, within, since, until)
        return runtime.run_sync(op, self.config.read_timeout)

    async def list_memories_async(
        self,
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
    ) -> MemoryPage:
        op = self._list_op(context, scope, key_prefix, kinds, statuses, limit, cursor, within, since, until)
        return await runtime.run_async(op, self.config.read_timeout)
