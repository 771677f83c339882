"""What a recall returns, and merging the results of several shards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from memorybus.memory.model import MemoryNode, MemoryStatus
from memorybus.retrieval.copies import Collapser
from memorybus.scopes import Scope

DEFAULT_STATUSES = (MemoryStatus.ACTIVE, MemoryStatus.CONSOLIDATED)


@dataclass(slots=True)
class RecallHit:
    """One recalled memory: the node (without its embedding), its score and its relevance.

    ``relevance`` (0..1) is how well the memory matches the query: its
    calibrated cosine and keyword match, read in its thread's context. It is
    what ``min_relevance`` gates. ``score`` (0..1) orders the hits: a relevant
    memory (relevance at or over the configured ``RankingWeights.min_relevance``)
    scores between that floor and 1 by relevance, structure (thread, speaker,
    time, graph) and salience, recency, importance and confidence; anything
    below the floor scores its relevance, so it never outranks a relevant one.

    ``via`` says why it is here: ``"match"`` (it answers the query),
    ``"neighbor"`` (a thread neighbour of ``expanded_from``) or ``"relation"``
    (linked to ``expanded_from`` by a relation). ``signals`` holds the evidence
    (see :mod:`memorybus.retrieval.signals`): ``cosine``, ``bm25``, ``dense``,
    ``keyword``, ``content``, ``context`` and, when they count, ``thread``,
    ``speaker``, ``time``, ``graph``.

    A memory and its broadcast copies come back as one hit: ``copies`` are the ids
    folded into it and ``widest_scope`` the widest scope it is visible in (``None``
    when nothing was folded: the node's own scope).
    """

    node: MemoryNode
    score: float
    relevance: float
    via: str = "match"
    expanded_from: str | None = None
    signals: dict[str, float] = field(default_factory=dict)
    copies: tuple[str, ...] = ()
    widest_scope: Scope | None = None

    @property
    def content(self) -> str:
        return self.node.content

    @property
    def id(self) -> str:
        return self.node.id

    @property
    def thread(self) -> str | None:
        return self.node.thread

    @property
    def position(self) -> int | None:
        return self.node.position

    @property
    def speaker(self) -> str | None:
        return self.node.speaker

    @property
    def source(self) -> str:
        return self.node.source


def merge_hits(groups: Sequence[Sequence[RecallHit]], k: int) -> list[RecallHit]:
    """Merge per-shard results: best score first, ties by id; each memory once.

    Scores are on one 0..1 scale in every shard, so they compare as they are.
    Only ``via == "match"`` hits count toward ``k``; expansions (neighbours,
    relations) follow the matches, in their shards' order, each memory once. A
    broadcast copy and its original are one memory: the better ranked one is kept,
    with ``copies`` and ``widest_scope`` noted (so fewer than ``k`` may return).
    """
    seen: set[str] = set()
    out: list[RecallHit] = []
    flat = [h for g in groups for h in g]
    one = Collapser(h.node for h in flat)
    matches = [h for h in flat if h.via == "match"]
    for hit in sorted(matches, key=lambda h: (-h.score, h.node.id)):
        if hit.node.id not in seen:
            seen.add(hit.node.id)
            if one.admit(hit.node):
                out.append(hit)
                if len(out) >= k:
                    break
    for hit in flat:
        if hit.via != "match" and hit.node.id not in seen and (hit.expanded_from in seen):
            seen.add(hit.node.id)
            if one.admit(hit.node):
                out.append(hit)
    return [_noted(h, one) for h in out]


def _noted(hit: RecallHit, one: Collapser) -> RecallHit:
    copies = one.copies.get(hit.node.id)
    if not copies:
        return hit
    return replace(hit, copies=tuple(copies), widest_scope=one.widest[hit.node.id])
