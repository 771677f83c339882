"""Prompt context assembly: core memory, then recalled memories grouped and dated.

:class:`ContextBuilder` turns pinned (core) memories and recall hits into one
text block that fits a token budget, counted with the embedding model's
tokenizer (the caller supplies the counts). Priority decides what is kept:
core memories first (most important first), then recalled memories in score
order; layout decides how it reads: recalled memories are grouped by session
(or by day when they have none), groups in time order, members in turn order,
each group headed by its date.

Guarantee: the text of a returned :class:`ContextBlock` never exceeds the
budget as counted on the whole text; everything left out is reported in
``dropped`` with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from memorybus.errors import InvalidRequest
from memorybus.memory.model import MemoryNode
from memorybus.retrieval.copies import Collapser
from memorybus.retrieval.hits import RecallHit
from memorybus.retrieval.structure import index_text, order_key
from memorybus.validation import utc_date

CORE_HEADER = "## Core memory"
RECALLED_HEADER = "## Recalled memories"


@dataclass(frozen=True, slots=True)
class Dropped:
    """A memory left out of the block: its id, section (``core``/``recalled``), why, and its tokens."""

    id: str
    section: str
    reason: str
    tokens: int


@dataclass(slots=True)
class ContextBlock:
    text: str
    tokens: int
    budget: int
    core: list[MemoryNode] = field(default_factory=list)
    memories: list[RecallHit] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)

    def __str__(self) -> str:
        return self.text


def _day(ts: float) -> str:
    d = utc_date(ts) if ts > 0 else None
    if d is None:  # no time, or one no date can hold
        return "undated"
    return f"{d.day} {d:%B %Y}"


def _thread_label(node: MemoryNode) -> str | None:
    """The conversation a memory belongs to: its declared thread, else its scope's session."""
    return node.thread or node.scope.session or None


def _group_of(node: MemoryNode) -> str:
    thread = _thread_label(node)
    return f"s:{node.scope.key}#{thread}" if thread else f"d:{_day(node.valid_from)}"


def _header(node: MemoryNode) -> str:
    thread = _thread_label(node)
    label = f" ({thread})" if thread else ""
    return f"### {_day(node.valid_from)}{label}"


def _line(node: MemoryNode) -> str:
    return "- " + " ".join(index_text(node).split())


class ContextBuilder:
    """Plans a :class:`ContextBlock` for ``core`` and ``hits`` within ``budget`` tokens."""

    def __init__(self, core: Sequence[MemoryNode], hits: Sequence[RecallHit], budget: int) -> None:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise InvalidRequest("token_budget", "must be a positive int")
        self.budget = budget
        ranked = sorted(core, key=lambda n: (-n.importance, -n.confidence, n.created_at, n.id))
        # each memory once: a repeated id, or a broadcast copy of one already placed
        one = Collapser([*ranked, *(h.node for h in hits)])
        self.core = [n for n in ranked if one.admit(n)]
        self.hits = [h for h in hits if one.admit(h.node)]

    def texts_to_count(self) -> list[str]:
        """Every piece whose token count :meth:`build` needs."""
        texts = [CORE_HEADER, RECALLED_HEADER]
        texts += [_line(n) for n in self.core]
        texts += [_line(h.node) for h in self.hits]
        texts += [_header(h.node) for h in self.hits]
        return list(dict.fromkeys(texts))

    def build(self, counts: dict[str, int]) -> ContextBlock:
        """Greedy by priority; pieces are joined by newlines (one token each is reserved)."""
        used = 0
        core: list[MemoryNode] = []
        dropped: list[Dropped] = []

        def cost(text: str) -> int:
            return counts[text] + 1

        for node in self.core:
            need = cost(_line(node)) + (0 if core else cost(CORE_HEADER))
            if used + need <= self.budget:
                core.append(node)
                used += need
            else:
                dropped.append(Dropped(node.id, "core", "budget", counts[_line(node)]))
        kept: list[RecallHit] = []
        groups: set[str] = set()
        full = False
        for hit in self.hits:
            group = _group_of(hit.node)
            need = cost(_line(hit.node))
            if group not in groups:
                need += cost(_header(hit.node))
            if not kept:
                need += cost(RECALLED_HEADER)
            # better hits first: once one does not fit, no worse one takes its place
            full = full or used + need > self.budget
            if not full:
                kept.append(hit)
                groups.add(group)
                used += need
            else:
                dropped.append(Dropped(hit.node.id, "recalled", "budget", counts[_line(hit.node)]))
        return self._block(core, kept, dropped, used)

    def _block(
        self, core: list[MemoryNode], kept: list[RecallHit], dropped: list[Dropped], tokens: int
    ) -> ContextBlock:
        lines: list[str] = []
        if core:
            lines.append(CORE_HEADER)
            lines += [_line(n) for n in core]
        if kept:
            lines.append(RECALLED_HEADER)
            grouped: dict[str, list[RecallHit]] = {}
            for hit in kept:
                grouped.setdefault(_group_of(hit.node), []).append(hit)
            ordered = sorted(grouped.values(), key=lambda g: min(order_key(h.node) for h in g))
            for group in ordered:
                group.sort(key=lambda h: order_key(h.node))
                lines.append(_header(group[0].node))
                lines += [_line(h.node) for h in group]
        return ContextBlock("\n".join(lines), tokens, self.budget, core, kept, dropped)

    def shrink(self, block: ContextBlock, counts: dict[str, int]) -> ContextBlock:
        """The block without its lowest-priority piece (last recalled, else last core)."""
        core, kept, dropped = list(block.core), list(block.memories), list(block.dropped)
        if kept:
            hit = kept.pop()
            dropped.append(Dropped(hit.node.id, "recalled", "budget", counts.get(_line(hit.node), 0)))
        elif core:
            node = core.pop()
            dropped.append(Dropped(node.id, "core", "budget", counts.get(_line(node), 0)))
        return self._block(core, kept, dropped, block.tokens)


def build_context(
    core: Sequence[MemoryNode],
    hits: Sequence[RecallHit],
    budget: int,
    count: Callable[[list[str]], list[int]],
) -> ContextBlock:
    """Plan, render and verify a block with a synchronous token counter."""
    builder = ContextBuilder(core, hits, budget)
    texts = builder.texts_to_count()
    counts = dict(zip(texts, count(texts), strict=True))
    block = builder.build(counts)
    while True:
        block.tokens = count([block.text])[0] if block.text else 0
        if block.tokens <= budget:
            return block
        block = builder.shrink(block, counts)
