"""Keyed facts and broadcast: the client's shared-knowledge operations.

Operation generators of :class:`~memorybus.client.MemoryBus` (see
:mod:`memorybus.client.operation`). A keyed fact is resolved by the shard that
owns its scope (see :mod:`memorybus.bus.conflicts`); a broadcast goes through the
pub/sub hub of the caller's org.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from memorybus.actors.runtime import Op
from memorybus.bus.conflicts import Strategy
from memorybus.bus.reliability import merge
from memorybus.client.operation import check_context
from memorybus.errors import InvalidMemory, InvalidRequest
from memorybus.memory.events import Event
from memorybus.memory.model import MemoryKind, MemoryNode
from memorybus.scopes import Context, Level, Scope
from memorybus.shard import FactResult
from memorybus.shard.ops import new_op, tag_op
from memorybus.validation import check_text

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key.strip() or len(key) > 512:
        raise InvalidMemory("key", "must be a non-empty string of at most 512 characters")
    return check_text("key", key, InvalidMemory)


# ------------------------------------------------------------ keyed facts
def assert_fact(
    bus: BusHandle,
    key: str,
    content: str,
    context: Context,
    *,
    confidence: float = 1.0,
    strategy: Strategy | str | None = None,
    op_id: str | None = None,
    **fields: Any,
) -> Op[FactResult]:
    """Assert a value of the keyed fact ``key`` in ``scope`` (default: the context's).

    Resolution (``strategy``, default from config) decides whether it becomes
    current; either way it is recorded in the fact's history. ``confidence``
    (0..1) defaults to **1.0**, the highest: under the confidence-weighted strategy
    an assertion that does not state its confidence outweighs any earlier one that
    stated less, so pass ``confidence`` when a source is unsure. ``fields`` are
    remember fields (``scope``, ``valid_from``, ``importance``, ``tags``, ...).
    ``op_id``: a retry with the same id answers the first outcome (``created``
    stays ``created``), recording nothing twice.
    """
    op = new_op(op_id)
    one = _assert_one(bus, key, content, context, strategy, {"confidence": confidence, **fields}, op)
    result = yield from tag_op(op, one)
    return result


def _assert_one(bus: BusHandle, key: str, content: str, context: Context, strategy: Strategy | str | None,
                fields: dict[str, Any], op: str) -> Op[FactResult]:  # fmt: skip
    check_context(context)
    _check_key(key)
    if strategy is not None:
        strategy = Strategy.parse(strategy).value
    fields = dict(fields)
    fields.setdefault("kind", MemoryKind.SEMANTIC)
    node = bus._build({"content": content, "key": key, **fields}, context, time.time())
    shard = bus._shard_handles()[bus._router.shard_for(node.scope.key)]
    (result,) = yield [shard.assert_fact.remote(context, node, strategy, op)]  # the shard embeds it
    return result


def assert_facts(
    bus: BusHandle,
    items: list[dict[str, Any]],
    context: Context,
    *,
    strategy: Strategy | str | None = None,
    op_id: str | None = None,
) -> Op[list[FactResult]]:
    """Many assertions (dicts with ``key``, ``content`` and remember fields) in one call:
    resolved in order and group-committed per shard, all or none per shard.
    ``op_id`` as for :meth:`assert_fact`."""
    op = new_op(op_id)
    results = yield from tag_op(op, _assert_many(bus, items, context, strategy, op))
    return results


def _assert_many(bus: BusHandle, items: list[dict[str, Any]], context: Context, strategy: Strategy | str | None,
                 op: str) -> Op[list[FactResult]]:  # fmt: skip
    check_context(context)
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise InvalidRequest("items", "must be a list of dicts with key and content")
    if len(items) > bus.config.max_batch:
        raise InvalidRequest("items", f"{len(items)} exceeds max_batch {bus.config.max_batch}")
    if strategy is not None:
        strategy = Strategy.parse(strategy).value
    now = time.time()
    nodes = []
    for item in items:
        fields = dict(item)
        _check_key(fields.get("key"))
        fields.setdefault("kind", MemoryKind.SEMANTIC)
        nodes.append(bus._build(fields, context, now))
    if not nodes:
        return []
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(nodes):
        groups.setdefault(bus._router.shard_for(n.scope.key), []).append(i)
    handles = bus._shard_handles()
    order = list(groups)
    # each shard embeds its part
    refs = [handles[s].assert_facts.remote(context, [nodes[i] for i in groups[s]], strategy, op) for s in order]
    parts = yield refs
    out: list[FactResult | None] = [None] * len(nodes)
    for s, part in zip(order, parts, strict=True):
        for i, r in zip(groups[s], part, strict=True):
            out[i] = r
    return [r for r in out if r is not None]


def remember_fact(bus: BusHandle, subject: str, predicate: str, obj: str, context: Context, *,
                  confidence: float = 1.0, **fields: Any) -> Op[FactResult]:  # fmt: skip
    """Assert a knowledge-graph triple ``(subject, predicate, obj)`` as a keyed fact.

    For a functional predicate (``works_at``, ``lives_in``, ``is``, ...) the key
    is ``subject/predicate``, so a new object supersedes the old one: the old
    memory is deprecated and its graph edge's ``valid_to`` closed, not deleted.
    """
    from memorybus.graph import DEFAULT_FUNCTIONAL, canonical_predicate, entity_key

    for name, value in (("subject", subject), ("predicate", predicate), ("object", obj)):
        if not isinstance(value, str) or not value.strip():
            raise InvalidMemory(name, "must be a non-empty string")
    pred = canonical_predicate(predicate)
    key = f"kg:{entity_key(subject)}/{pred}"
    if pred not in DEFAULT_FUNCTIONAL:
        key += f"/{entity_key(obj)}"
    structured = dict(fields.pop("structured", None) or {})
    structured["triples"] = [[subject, pred, obj]]
    content = f"{subject} {pred.replace('_', ' ')} {obj}"
    result = yield from assert_fact(bus, key, content, context, confidence=confidence, structured=structured,
                                    **fields)  # fmt: skip
    return result


def _fact_scope(context: Context, scope: Scope | Level | str | None) -> Scope:
    """The scope a fact is read from: the one ``assert_fact`` writes to by default."""
    check_context(context)
    return context.default_scope("semantic") if scope is None else context.resolve_scope(scope)


def current_fact(bus: BusHandle, key: str, context: Context, *, scope: Any = None) -> Op[MemoryNode | None]:
    """The current value of a keyed fact, or None."""
    target = _fact_scope(context, scope)
    shard = bus._shard_handles()[bus._router.shard_for(target.key)]
    (node,) = yield [shard.current_fact.remote(context, _check_key(key), target)]
    return node


def history(bus: BusHandle, key: str, context: Context, *, scope: Any = None) -> Op[list[Event]]:
    """Every assertion of a keyed fact in commit order: ``event.data["outcome"]`` is
    ``created``, ``superseded``, ``rejected`` or ``reinforced``; ``event.node`` the value
    (an erased value: ids, kind and outcome, no content; see :meth:`MemoryBus.erase`)."""
    target = _fact_scope(context, scope)
    shard = bus._shard_handles()[bus._router.shard_for(target.key)]
    (events,) = yield [shard.history.remote(context, _check_key(key), target)]
    return events


def source_reliability(bus: BusHandle, context: Context) -> Op[dict[str, dict[str, Any]]]:
    """What the bus has learned about the sources of ``context``'s org: per source,
    ``reliability`` (the mean of a Beta posterior from a neutral 0.5: how often its
    assertions agreed with what the bus resolved without its vote), and the decayed
    ``agree`` and ``disagree`` grades behind it, summed over every shard. An agent
    reads its own org's; the operator names the org with ``Context(org)``. Weighing
    an assertion, the bus calibrates the stated confidence by these grades
    (see :mod:`memorybus.bus.reliability`)."""
    check_context(context)
    parts = yield [s.source_reliability.remote(context) for s in bus._shard_handles()]
    return merge(list(parts))


# -------------------------------------------------------------- broadcast
def broadcast(bus: BusHandle, memory_id: str, to: Level | str, context: Context, *,
              op_id: str | None = None) -> Op[MemoryNode]:  # fmt: skip
    """Share a memory with a wider scope (``"user"`` or ``"org"``): a copy with
    ``confidence x 0.9``, ``parents=[original]``. Only the owner (or an authority)
    may widen; broadcasting twice yields one copy. ``op_id`` as for ``remember``."""
    op = new_op(op_id)
    check_context(context)
    if not isinstance(memory_id, str) or not memory_id:
        raise InvalidRequest("memory_id", "must be a non-empty string")
    try:
        level = Level(to)
    except ValueError:
        raise InvalidRequest("to", f"unknown scope level {to!r}") from None
    _, hub = bus._hub_for(context.org)
    copy = yield from tag_op(op, _one(hub.broadcast.remote(context, memory_id, level.value, op)))
    return copy


def _one(ref: Any) -> Op[Any]:
    (result,) = yield [ref]
    return result
