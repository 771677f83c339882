"""Writing and reading memories by id: remember, get, update, forget (and upkeep).

Operation generators of :class:`~memorybus.client.MemoryBus` (see
:mod:`memorybus.client.operation`). What a returned call guarantees:
``remember``/``remember_many``/``update``/``forget`` return after the owning
shard committed durably to its store. ``remember_many`` validates the whole batch
before anything is written; each shard applies its part atomically. Calls by id
(``get``, ``update``, ``forget``) ask the one shard the id routes to and touch at
most one memory. The client sends memories, never vectors: the owning shard decides
what text of each is embedded and embeds it (see :mod:`memorybus.shard.texts`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memorybus.actors.runtime import Op, Settled
from memorybus.client.operation import check_context, check_memory_id
from memorybus.errors import InvalidMemory, InvalidRequest, MemoryNotFound, PartialWrite
from memorybus.memory.items import turn_items
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus
from memorybus.scopes import Context
from memorybus.shard.ops import new_op, tag_op

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle


# ----------------------------------------------------------------- remember
def remember(bus: BusHandle, content: str, context: Context, *, op_id: str | None = None,
             **fields: Any) -> Op[MemoryNode]:  # fmt: skip
    """Store one memory; returns it as stored (version 1).

    ``fields`` are MemoryNode fields (``scope`` as a level name such as
    ``"user"``, ``kind``, ``importance``, ``tags``, ``valid_from``, ``ttl``
    seconds, ...), including the optional conversation fields ``thread``,
    ``position`` and ``speaker``. ``source`` defaults to ``agent:<name>`` of
    the context's agent, so every hit says who wrote it.

    ``scope`` defaults to the writer's agent level, ``(org, user, agent)``: the
    agent still sees it in its next session, other agents do not (``kind="working"``
    defaults to the session). Returns once the owning shard committed durably. A
    repeat of a stored memory (see ``BusPolicy.repeat_window_seconds``) returns the
    stored one, reinforced, instead of a copy.

    ``id`` (optional, a remember field): keep this id instead of a fresh one. It must
    be an id of the memory's scope (``memorybus.new_id(scope)``, ``derived_id(scope,
    name)``, or one exported from that scope: see :mod:`memorybus.memory.ids`); it is unique
    across shards, so an id already taken is refused (``VersionConflict`` when the
    caller can see that memory, a bare ``ScopeViolation`` when it cannot).

    ``op_id``: this write's operation id (default: a fresh one). Calling again with
    the same id (a retry after an error such as OutcomeUnknown) returns the first
    call's outcome instead of writing again."""
    nodes = yield from remember_many(bus, [{"content": content, **fields}], context, op_id=op_id)
    return nodes[0]


def remember_many(bus: BusHandle, items: Sequence[Any], context: Context, *,
                  op_id: str | None = None) -> Op[list[MemoryNode]]:  # fmt: skip
    """Store many memories (str, dict of remember fields, or MemoryNode each);
    ``op_id`` as for :meth:`remember`."""
    op = new_op(op_id)
    nodes = yield from tag_op(op, _remember_nodes(bus, items, context, op))
    return nodes


def remember_turns(
    bus: BusHandle,
    turns: Sequence[Any],
    context: Context,
    *,
    thread: str,
    start: int = 0,
    op_id: str | None = None,
    **fields: Any,
) -> Op[list[MemoryNode]]:
    """Store the turns of one conversation thread, in order (one episodic memory each).

    A turn is its text, a ``(speaker, text)`` pair, or a dict of remember fields
    (``content`` and e.g. ``speaker``, ``valid_from``). Turn ``i`` gets
    ``thread`` and ``position = start + i`` unless it names its own;
    ``fields`` (e.g. ``scope="user"``, ``valid_from``) apply to every turn.
    Validated and stored like :meth:`remember_many` (``op_id`` as there).
    """
    nodes = yield from remember_many(bus, turn_items(turns, thread, start, fields), context, op_id=op_id)
    return nodes


def _remember_nodes(bus: BusHandle, items: Sequence[Any], context: Context, op: str) -> Op[list[MemoryNode]]:
    check_context(context)
    if isinstance(items, str | bytes | dict) or not isinstance(items, Iterable):
        raise InvalidRequest("items", "must be a list of memories")
    items = list(items)
    if len(items) > bus.config.max_batch:
        raise InvalidRequest("items", f"{len(items)} exceeds max_batch {bus.config.max_batch}")
    now = time.time()
    nodes = [bus._build(item, context, now) for item in items]
    ids = [n.id for n in nodes]
    if len(set(ids)) != len(ids):
        raise InvalidRequest("items", "duplicate ids")
    if not nodes:
        return []
    handles = bus._shard_handles()
    router = bus._router
    chunk = bus.config.ingest_chunk
    # one call per (chunk, shard); each chunk is one operation, recorded by each shard for its part
    calls: list[tuple[int, int, list[int]]] = []  # (chunk start, shard, item indexes)
    for start in range(0, len(nodes), chunk):
        by_shard: dict[int, list[int]] = {}
        for i in range(start, min(start + chunk, len(nodes))):
            by_shard.setdefault(router.shard_for(nodes[i].scope.key), []).append(i)
        calls += [(start, s, idx) for s, idx in by_shard.items()]
    chosen = [
        i
        for i, item in enumerate(items)
        if isinstance(item, MemoryNode) or (isinstance(item, dict) and item.get("id") is not None)
    ]
    if len(calls) > 1 and chosen:
        # every part is checked before any shard writes: a caller-chosen id taken by
        # another memory fails the whole call with nothing written
        per_shard: dict[int, list[MemoryNode]] = {}
        for i in chosen:
            per_shard.setdefault(router.shard_for(nodes[i].scope.key), []).append(nodes[i])
        yield [handles[s].check_puts.remote(context, part) for s, part in per_shard.items()]
    stored: list[MemoryNode | None] = [None] * len(nodes)
    errors: dict[int, BaseException] = {}
    window: list[tuple[list[tuple[int, int, list[int]]], Settled]] = []
    before: dict[int, str] = {}  # shard -> this call's part sent to it last: its parts commit in order
    for n, (start, s, idx) in enumerate(calls):
        # the shard decides what text of each memory is embedded, and embeds it
        part = f"{op}/{start // chunk}"
        ref = handles[s].put_many.remote(context, [nodes[i] for i in idx], part, before.get(s))
        before[s] = part
        if not window or window[-1][0][0][0] != start:
            window.append(([], Settled([])))
        window[-1][0].append((start, s, idx))
        window[-1][1].refs.append(ref)
        last = n == len(calls) - 1
        while window and (len(window) > 4 or last):
            sent, refs = window.pop(0)
            for (_, _, asked), answer in zip(sent, (yield refs), strict=True):
                for i, node in zip(asked, answer if isinstance(answer, list) else [answer] * len(asked), strict=True):
                    if isinstance(node, BaseException):
                        errors[i] = node
                    else:
                        stored[i] = node
    if not errors:
        return [n for n in stored if n is not None]
    if all(n is None for n in stored):
        raise errors[min(errors)]  # nothing was stored (an OutcomeUnknown says it may have been)
    raise PartialWrite(op, stored, errors)


# ----------------------------------------------------- get / update / forget
def _holder(bus: BusHandle, context: Context, memory_id: str) -> Op[int]:
    """The one shard that may hold ``memory_id``: the shard its bucket routes to (see
    :mod:`memorybus.memory.ids`). An id without a bucket (a store written before ids carried
    one) is looked for on every shard, and only a single holder is acted on: the one
    ``context`` may see when several hold it."""
    check_context(context)
    check_memory_id(memory_id)
    routed = bus._router.shard_for_id(memory_id)
    if routed is not None:
        return routed
    results = yield Settled([h.get.remote(context, memory_id) for h in bus._shard_handles()])
    holders = [i for i, r in enumerate(results) if not isinstance(r, MemoryNotFound)]
    if len(holders) > 1:
        holders = [i for i in holders if not isinstance(results[i], BaseException)]
        if len(holders) != 1:
            raise InvalidRequest("memory_id", "is held by several shards (an id without its scope's bucket)")
    if not holders:
        raise MemoryNotFound(memory_id)
    return holders[0]


def _on_holder(bus: BusHandle, method: str, context: Context, memory_id: str, *args: Any) -> Op[Any]:
    """Call ``method`` on the one shard that holds ``memory_id`` (:func:`_holder`)."""
    shard = yield from _holder(bus, context, memory_id)
    (result,) = yield [getattr(bus._shard_handles()[shard], method).remote(context, memory_id, *args)]
    return result


def get(bus: BusHandle, memory_id: str, context: Context) -> Op[MemoryNode]:
    """The memory with this id, if ``context`` may see it."""
    node = yield from _on_holder(bus, "get", context, memory_id)
    return node


def update(bus: BusHandle, memory_id: str, context: Context, *, expected_version: int, op_id: str | None = None,
           **changes: Any) -> Op[MemoryNode]:  # fmt: skip
    """Compare-and-set: change fields if the stored version is ``expected_version``.

    Raises VersionConflict (with the actual version) otherwise: one winner per
    version, even between two callers making the same change. ``op_id`` as for
    :meth:`remember`: a retry with the same id answers the first outcome.
    """
    op = new_op(op_id)
    if isinstance(expected_version, bool) or not isinstance(expected_version, int):
        raise InvalidRequest("expected_version", "must be an int")
    if not changes:
        raise InvalidRequest("changes", "nothing to update")
    changes = dict(changes)
    for name in ("kind", "status"):
        if name in changes:
            enum = MemoryKind if name == "kind" else MemoryStatus
            try:
                changes[name] = enum(changes[name])
            except ValueError:
                raise InvalidMemory(name, f"unknown {name} {changes[name]!r}") from None
    if "content" in changes:  # checked here, embedded by the shard
        probe = MemoryNode(content=changes["content"], scope=context.scope)
        probe.validate(max_content_chars=bus.config.max_content_chars)
    shards = _on_holder(bus, "update", context, memory_id, expected_version, changes, op)
    node = yield from tag_op(op, shards)
    return node


def forget(bus: BusHandle, memory_id: str, context: Context, *, expected_version: int | None = None,
           op_id: str | None = None) -> Op[bool]:  # fmt: skip
    """Delete a memory from store and index. Raises MemoryNotFound if absent.
    ``op_id`` as for :meth:`remember`: a retry of a forget that succeeded answers True.
    Soft: earlier events (``history``) and operation records still hold its content until
    it is erased (:meth:`MemoryBus.erase`); its own ``FORGOTTEN`` event holds none."""
    op = new_op(op_id)
    done = yield from tag_op(op, _forget(bus, memory_id, context, expected_version, op))
    return done


def _forget(bus: BusHandle, memory_id: str, context: Context, expected_version: int | None, op: str) -> Op[bool]:
    if expected_version is not None and (isinstance(expected_version, bool) or not isinstance(expected_version, int)):
        raise InvalidRequest("expected_version", "must be an int or None")
    deleted = yield from _on_holder(bus, "delete", context, memory_id, expected_version, op)
    if not deleted:
        raise MemoryNotFound(memory_id)
    return True


# ------------------------------------------------------------------ upkeep
def flush(bus: BusHandle) -> Op[None]:
    """Write pending access statistics of every shard to its store."""
    yield [h.flush.remote(bus._credential or "") for h in bus._shard_handles()]


def count(bus: BusHandle) -> Op[int]:
    """How many memories the bus holds (every shard, whatever the scope)."""
    counts = yield [h.count.remote(bus._credential or "") for h in bus._shard_handles()]
    return sum(counts)
