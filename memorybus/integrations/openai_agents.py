"""An OpenAI Agents SDK ``Session`` on the bus: ``pip install memorybus[openai-agents]``.

``BusSession(session_id, bus, context)`` keeps a conversation's items (the SDK's
``TResponseInputItem`` dicts) as episodic memories of the bus, so the history of an
agent run is durable, shared by every process that opens the same session id with a
context that sees its scope, and recallable by the bus's other agents. It satisfies the
SDK's ``agents.memory.Session`` protocol structurally (this module does not import the
SDK; nothing here needs the network or an API key).

Guarantees:

- **Where.** Items live in ``context.resolve_scope(level)`` (default: the context's agent
  level, else user, else org); only that scope is read. Each item is one memory keyed
  ``oaisession/<session_id>/<position>`` with ``thread`` = the session id, ``speaker`` =
  the item's role (or type), ``decay_rate=0`` (never archived by decay), its text as
  content and the item itself in ``structured["openai_agents"]``.
- **Order.** ``position`` is the write time in milliseconds times 1000 plus the item's
  index in its ``add_items`` call (the bus keeps positions below 2**53), so one call's
  items stay in order and later calls come after earlier ones (calls less than a
  millisecond apart, or calls of over 1000 items, may interleave with the next one).
  Equal items are all kept (their positions differ).
- **add_items** returns once every item is durable (one bus write for the call).
- **pop_item** removes the latest item with compare-and-set and returns it; when another
  writer removed it first, it tries the next latest (two concurrent pops never return
  the same item). **clear_session** removes every item written before the call.
- Memories under the session's keys that this class did not write are skipped, never
  raised, and counted in :attr:`BusSession.skipped`.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import memorybus as mb

KEY_ROOT = "oaisession"
MARK = "memorybus.openai_agents/1"
_PAGE = 500
_MAX_POPS = 8


def _text_of(item: dict[str, Any]) -> str:
    """The words of an item, for the bus's recall: its text content, else its JSON."""
    content = item.get("content")
    if isinstance(content, str) and content.strip():
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        text = "\n".join(p for p in parts if isinstance(p, str) and p.strip())
        if text:
            return text
    return json.dumps(item, ensure_ascii=False, sort_keys=True, default=str)


class BusSession:
    """The SDK's ``Session`` protocol over a :class:`memorybus.MemoryBus`."""

    session_settings: Any = None

    def __init__(self, session_id: str, bus: mb.MemoryBus, context: mb.Context, *,
                 level: mb.Level | str | None = None) -> None:  # fmt: skip
        if not isinstance(session_id, str) or not session_id or "/" in session_id:
            raise mb.InvalidRequest("session_id", "must be a non-empty string without '/'")
        if not isinstance(context, mb.Context):
            raise mb.InvalidRequest("context", "must be a memorybus.Context")
        if level is None:
            level = mb.Level.AGENT if context.agent else mb.Level.USER if context.user else mb.Level.ORG
        self.session_id = session_id
        self.bus = bus
        self.context = context
        self.scope = context.resolve_scope(mb.Level(level))
        self.prefix = f"{KEY_ROOT}/{session_id}/"
        #: memories under the session's keys that reads skipped (not written by this class)
        self.skipped: Counter[str] = Counter()

    # ------------------------------------------------------------------ reading
    def _item(self, node: mb.MemoryNode) -> tuple[int, dict[str, Any]] | None:
        meta = node.structured.get("openai_agents") if isinstance(node.structured, dict) else None
        ok = (isinstance(meta, dict) and meta.get("store") == MARK and meta.get("session") == self.session_id
              and isinstance(meta.get("item"), dict) and isinstance(meta.get("position"), int)
              and node.key == f"{self.prefix}{meta['position']:016d}" and node.scope == self.scope)  # fmt: skip
        if not ok or not isinstance(meta, dict):
            self.skipped["foreign"] += 1
            return None
        return int(meta["position"]), dict(meta["item"])

    async def _nodes(self) -> list[tuple[int, dict[str, Any], mb.MemoryNode]]:
        """Every item of the session, oldest first."""
        found: list[tuple[int, dict[str, Any], mb.MemoryNode]] = []
        cursor: str | None = None
        while True:
            page = await self.bus.list_memories_async(self.context, scope=self.scope, key_prefix=self.prefix,
                                                      limit=_PAGE, cursor=cursor)  # fmt: skip
            for node in page.memories:
                parsed = self._item(node)
                if parsed is not None:
                    found.append((*parsed, node))
            if page.cursor is None:
                break
            cursor = page.cursor
        found.sort(key=lambda entry: entry[0])
        return found

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The history, oldest first; with ``limit``, the latest ``limit`` items."""
        items = [item for _, item, _ in await self._nodes()]
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else []

    # ------------------------------------------------------------------ writing
    async def add_items(self, items: list[dict[str, Any]]) -> None:
        """Append ``items`` (durable when this returns); nothing is written when one of
        them is not a dict (InvalidRequest) or the bus refuses one."""
        items = list(items)
        if not all(isinstance(item, dict) for item in items):
            raise mb.InvalidRequest("items", "must be a list of dicts (TResponseInputItem)")
        if not items:
            return
        base = time.time_ns() // 1_000_000 * 1000
        memories = []
        for i, item in enumerate(items):
            position = base + i
            speaker = item.get("role") or item.get("type")
            memories.append({
                "content": _text_of(item), "kind": "episodic", "scope": self.scope, "decay_rate": 0.0,
                "key": f"{self.prefix}{position:016d}", "thread": self.session_id, "position": position,
                "speaker": speaker if isinstance(speaker, str) and speaker else None,
                "structured": {"openai_agents": {"store": MARK, "session": self.session_id,
                                                 "position": position, "item": item}},
            })  # fmt: skip
        await self.bus.remember_many_async(memories, self.context)

    async def pop_item(self) -> dict[str, Any] | None:
        """Remove and return the latest item, or None when the session is empty."""
        for _ in range(_MAX_POPS):
            nodes = await self._nodes()
            if not nodes:
                return None
            for _, item, node in reversed(nodes):
                try:
                    await self.bus.forget_async(node.id, self.context, expected_version=node.version)
                except (mb.MemoryNotFound, mb.VersionConflict):
                    continue  # removed or changed by another writer: the next latest
                return item
        return None

    async def clear_session(self) -> None:
        """Remove every item of the session written before this call."""
        for _, _, node in await self._nodes():
            try:
                await self.bus.forget_async(node.id, self.context)
            except mb.MemoryNotFound:
                continue
