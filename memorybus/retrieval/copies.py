"""One result per memory: a broadcast copy and its original are collapsed.

Broadcasting a memory stores a copy in the wider scope (see
:func:`memorybus.memory.model.broadcast_copy_id`); a caller who sees both would otherwise
get the same words twice. :class:`Collapser` keeps the first (best ranked) of a
memory and its copies and notes on it the widest scope the memory is visible in.
"""

from __future__ import annotations

from collections.abc import Iterable

from memorybus.memory.model import MemoryNode, broadcast_origin
from memorybus.scopes import Scope


def _width(scope: Scope) -> int:
    """How many scope fields are set: fewer is wider."""
    return sum(1 for part in scope.as_tuple() if part)


def origin_of(node: MemoryNode, known: dict[str, MemoryNode]) -> str:
    """The original behind ``node``: follows broadcast copies back through ``known``."""
    memory_id = node.id
    seen = {memory_id}
    parent = broadcast_origin(node)
    while parent is not None and parent not in seen:
        memory_id = parent
        seen.add(parent)
        parent = broadcast_origin(known[parent]) if parent in known else None
    return memory_id


class Collapser:
    """Admits one node per original; tells which kept node a later copy belongs to."""

    def __init__(self, nodes: Iterable[MemoryNode] = ()) -> None:
        self.known = {n.id: n for n in nodes}
        self.kept: dict[str, str] = {}  # origin -> id of the kept node
        self.widest: dict[str, Scope] = {}  # kept id -> widest scope of its group
        self.copies: dict[str, list[str]] = {}  # kept id -> ids collapsed into it

    def admit(self, node: MemoryNode) -> bool:
        """True when ``node`` is the first of its original (keep it); False when a node
        of the same original was kept already (``node`` is folded into it)."""
        self.known.setdefault(node.id, node)
        origin = origin_of(node, self.known)
        kept_id = self.kept.get(origin)
        if kept_id is None:
            self.kept[origin] = node.id
            self.widest[node.id] = node.scope
            return True
        if kept_id != node.id:
            if _width(node.scope) < _width(self.widest[kept_id]):
                self.widest[kept_id] = node.scope
            self.copies.setdefault(kept_id, []).append(node.id)
        return False
