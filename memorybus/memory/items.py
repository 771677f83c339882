"""What ``remember`` accepts, turned into validated :class:`~memorybus.memory.model.MemoryNode` s.

Pure (no Ray, no I/O): the client builds every new memory here before anything
is sent to a shard, so a bad item raises :class:`~memorybus.errors.InvalidMemory`
(or :class:`~memorybus.errors.ScopeViolation`) and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memorybus.errors import InvalidMemory, InvalidRequest, ScopeViolation
from memorybus.memory import ids
from memorybus.memory.model import (
    DEFAULT_MAX_CONTENT_CHARS,
    DEFAULT_MAX_STRUCTURED_BYTES,
    DEFAULT_MAX_TAGS,
    MemoryKind,
    MemoryNode,
    evolve,
)
from memorybus.scopes import Context

#: the fields a ``remember`` item may set
REMEMBER_FIELDS = frozenset(
    {
        "content",
        "scope",
        "kind",
        "key",
        "structured",
        "confidence",
        "importance",
        "tags",
        "source",
        "source_ids",
        "decay_rate",
        "valid_from",
        "valid_to",
        "created_at",
        "ttl",
        "id",
        "parents",
        "children",
        "related",
        "contradicts",
        "thread",
        "position",
        "speaker",
    }
)


def build_memory(
    item: Any,
    context: Context,
    now: float,
    *,
    max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
    max_tags: int = DEFAULT_MAX_TAGS,
    max_structured_bytes: int = DEFAULT_MAX_STRUCTURED_BYTES,
) -> MemoryNode:
    """One new memory from a ``remember`` item (a str, a dict of :data:`REMEMBER_FIELDS`,
    or a MemoryNode), stamped with ``now`` where its times are unset.

    ``scope`` is a level name (``"user"``) resolved against ``context``, by default
    the writer's agent level (:meth:`Context.default_scope`); ``ttl`` is
    seconds from ``now``; ``source`` defaults to ``agent:<name>`` of the context's
    agent. Raises InvalidMemory for a bad item, ScopeViolation for a scope the
    context cannot write.
    """
    if isinstance(item, MemoryNode):
        node = item
    else:
        if isinstance(item, str):
            item = {"content": item}
        if not isinstance(item, dict):
            raise InvalidMemory("item", f"must be a str, dict or MemoryNode, got {type(item).__name__}")
        unknown = set(item) - REMEMBER_FIELDS
        if unknown:
            raise InvalidMemory("item", f"unknown fields {sorted(unknown)}")
        fields = dict(item)
        if "content" not in fields:
            raise InvalidMemory("content", "is required")
        named = fields.pop("scope", None)
        kind = str(fields.get("kind") or "episodic")
        # no scope named: the writer's own, without the session (see Context.default_scope)
        scope = context.default_scope(kind) if named is None else context.resolve_scope(named)
        ttl = fields.pop("ttl", None)
        if ttl is not None:
            if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not ttl > 0:
                raise InvalidMemory("ttl", "must be a positive number of seconds")
            fields["expires_at"] = now + float(ttl)
        for name in ("tags", "source_ids", "parents", "children", "related", "contradicts"):
            if name in fields and isinstance(fields[name], list):
                fields[name] = tuple(fields[name])
        if fields.get("structured") is None:
            fields.pop("structured", None)
        node = MemoryNode(scope=scope, **fields)
    if node.embedding is not None:
        raise InvalidMemory("embedding", "is computed by the bus; do not pass one")
    if not node.source and context.agent:
        node = evolve(node, source=f"agent:{context.agent}")  # who wrote it, unless given
    node = node.stamped(now).validate(
        max_content_chars=max_content_chars, max_tags=max_tags, max_structured_bytes=max_structured_bytes
    )
    if node.version != 0:
        raise InvalidMemory("version", "a new memory must have version 0")
    if not node.scope.visible_to(context):
        raise ScopeViolation("write")
    if not ids.fits(node.id, node.scope):
        raise InvalidMemory("id", "is not an id of this memory's scope (ids carry their scope's routing "
                            "bucket: memorybus.new_id(scope) or derived_id(scope, name))")
    return node


def turn_items(turns: Sequence[Any], thread: str, start: int, common: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``remember_many`` items of ``remember_turns``: turn ``i`` gets ``thread`` and
    ``position = start + i`` (unless it names its own) and the ``common`` fields."""
    if not isinstance(thread, str) or not thread.strip():
        raise InvalidRequest("thread", "must be a non-empty string")
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise InvalidRequest("start", "must be an int >= 0")
    if isinstance(turns, str | bytes | dict) or not isinstance(turns, Iterable):
        raise InvalidRequest("turns", "must be a list of turns")
    bad = (set(common) - REMEMBER_FIELDS) | ({"content", "thread", "position"} & set(common))
    if bad:
        raise InvalidMemory("fields", f"not fields every turn can share: {sorted(bad)}")
    items = []
    for i, turn in enumerate(turns):
        if isinstance(turn, str):
            item: dict[str, Any] = {"content": turn}
        elif isinstance(turn, tuple) and len(turn) == 2:
            item = {"speaker": turn[0], "content": turn[1]}
        elif isinstance(turn, dict):
            item = dict(turn)
        else:
            raise InvalidMemory("turn", f"must be a str, a (speaker, text) pair or a dict, got {type(turn).__name__}")
        items.append({"kind": MemoryKind.EPISODIC, **common, "thread": thread, "position": start + i, **item})
    return items
