"""Listing without a query: :meth:`MemoryBus.list_memories`, paginated.

An operation generator of :class:`~memorybus.client.MemoryBus` (see
:mod:`memorybus.client.operation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memorybus.actors.runtime import Op
from memorybus.errors import InvalidRequest
from memorybus.memory.model import MemoryKind, MemoryStatus
from memorybus.scopes import Context, Level, Scope
from memorybus.views import Listing, MemoryPage, merge_pages

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle


def list_memories(
    bus: BusHandle,
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
    filters = Listing(key_prefix=key_prefix, kinds=kinds, statuses=statuses, limit=limit, cursor=cursor,
                      within=within, since=since, until=until).filters()
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
    return merge_pages(groups, limit)
