"""Expansions around recall's top hits: thread neighbours and relation-linked memories."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from memorybus.model import MemoryNode
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
        added = 0
        for hit in top:
            for rank_i, nid in enumerate(structure.neighbors(hit.node.id, options.neighbors, options.neighbors)):
                if added >= options.neighbor_budget:
                    break
                node = nodes.get(nid)
                if nid in seen or node is None or not visible(node):
                    continue
                seen.add(nid)
                added += 1
                score = hit.score * (0.9 ** (1 + rank_i // 2))
                out.append(RecallHit(replace(node), score, 0.0, "neighbor", hit.node.id, {}))
            if added >= options.neighbor_budget:
                break
    if options.relations > 0 and options.relation_budget > 0:
        added = 0
        for hit in top:
            linked = [i for f in RELATION_FIELDS for i in getattr(hit.node, f)]
            taken = 0
            for nid in dict.fromkeys(linked):
                if added >= options.relation_budget or taken >= options.relations:
                    break
                node = nodes.get(nid)
                if nid in seen or node is None or not visible(node):
                    continue
                seen.add(nid)
                added += 1
                taken += 1
                out.append(RecallHit(replace(node), hit.score * 0.8, 0.0, "relation", hit.node.id, {}))
            if added >= options.relation_budget:
                break
    return out
