"""Expansions around recall's top hits: thread neighbours and relation-linked memories."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

from memorybus.memory.model import MemoryNode
from memorybus.retrieval.hits import RecallHit
from memorybus.retrieval.options import RecallOptions
from memorybus.retrieval.structure import RecallIndex

RELATION_FIELDS = ("related", "parents", "children", "source_ids", "contradicts")


def expand(
    top: Sequence[RecallHit],
    nodes: Mapping[str, MemoryNode],
    structure: RecallIndex,
    options: RecallOptions,
    visible: Callable[[MemoryNode], bool],
) -> list[RecallHit]:
    """Neighbours and relation-linked memories of ``top``, within the budgets.

    Each expansion carries ``via`` and ``expanded_from`` and the score of the
    hit it came from (scaled down with distance), so callers can keep or
    drop it; its ``relevance`` is 0 (it was not matched against the query).
    Memories already in ``top`` are not repeated.
    """
    seen = {h.node.id for h in top}
    out: list[RecallHit] = []
    if options.neighbors > 0 and options.neighbor_budget > 0:
        n = options.neighbors
        for hit, rank_i, node in _around(top, nodes, visible, seen, lambda m: structure.neighbors(m.id, n, n),
                                         options.neighbor_budget, None):  # fmt: skip
            out.append(RecallHit(replace(node), hit.score * (0.9 ** (1 + rank_i // 2)), 0.0, "neighbor",
                                 hit.node.id, {}))  # fmt: skip
    if options.relations > 0 and options.relation_budget > 0:
        for hit, _, node in _around(top, nodes, visible, seen, _linked, options.relation_budget, options.relations):
            out.append(RecallHit(replace(node), hit.score * 0.8, 0.0, "relation", hit.node.id, {}))
    return out


def _linked(node: MemoryNode) -> list[str]:
    """The memories ``node``'s relation fields name, each once, in field order."""
    return list(dict.fromkeys(i for f in RELATION_FIELDS for i in getattr(node, f)))


def _around(
    top: Sequence[RecallHit],
    nodes: Mapping[str, MemoryNode],
    visible: Callable[[MemoryNode], bool],
    seen: set[str],
    linked: Callable[[MemoryNode], Sequence[str]],
    budget: int,
    per_hit: int | None,
) -> Iterator[tuple[RecallHit, int, MemoryNode]]:
    """``(hit, rank, node)``: for each hit of ``top`` in turn, the memories ``linked`` names
    for it (``rank``: the position among them) that are stored, visible and not ``seen``
    yet (they join ``seen``): at most ``per_hit`` per hit (None: no cap), ``budget`` in all."""
    added = 0
    for hit in top:
        taken = 0
        for rank, nid in enumerate(linked(hit.node)):
            if added >= budget or (per_hit is not None and taken >= per_hit):
                break
            node = nodes.get(nid)
            if nid in seen or node is None or not visible(node):
                continue
            seen.add(nid)
            added += 1
            taken += 1
            yield hit, rank, node
        if added >= budget:
            break
