"""Walking the temporal graph: a breadth-first expansion that checks each edge's
validity and scope as it goes and keeps at most ``fanout`` new neighbours per
expanded entity (so a hub never floods it)."""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Mapping

import networkx as nx

from memorybus.errors import InvalidRequest
from memorybus.graph.edges import Edge, Reach
from memorybus.graph.extract import entity_key, finite
from memorybus.validation import is_int


def walk(
    g: nx.MultiDiGraph,
    edges: Mapping[int, Edge],
    known: Collection[str],
    seeds: Iterable[str],
    at: float,
    hops: int,
    fanout: int,
    scope_keys: Collection[str] | None,
    max_nodes: int | None,
) -> tuple[dict[str, Reach], dict[str, int]]:
    """Breadth-first from ``seeds`` (names; those in ``known``) over the edges of ``g``
    valid at ``at`` and in ``scope_keys``: the entities reached (see
    :meth:`TemporalGraph.expand`) and, per memory id, the hop at which an edge it
    supports was walked."""
    if isinstance(seeds, str):
        raise InvalidRequest("entities", "must be an iterable of names, not a string")
    if not finite(at):
        raise InvalidRequest("at", f"must be a finite number, got {at!r}")
    if not is_int(hops, 0):
        raise InvalidRequest("hops", f"must be an int >= 0, got {hops!r}")
    if not is_int(fanout, 1):
        raise InvalidRequest("fanout", f"must be an int >= 1, got {fanout!r}")
    scopes = None if scope_keys is None else frozenset(scope_keys)
    reach: dict[str, Reach] = {}
    for name in seeds:
        key = entity_key(name)
        if key in known and key not in reach:
            reach[key] = Reach(0, ())
    credited: dict[str, int] = {}

    def credit(edge: Edge, hop: int) -> None:
        for mid in edge.sources:
            if hop < credited.get(mid, hop + 1):
                credited[mid] = hop

    frontier = list(reach)
    for depth in range(hops):
        nxt: list[str] = []
        for u in frontier:
            if u not in g:
                continue
            fresh: dict[str, list[Edge]] = {}
            for adjacency in (g.succ[u], g.pred[u]):
                for v, keyed in adjacency.items():
                    for eid in keyed:
                        e = edges[eid]
                        if e.valid_from > at or (e.valid_to is not None and at >= e.valid_to):
                            continue
                        if scopes is not None and e.scope_key not in scopes:
                            continue
                        if v in reach:
                            credit(e, min(reach[e.subject].hops, reach[e.object].hops))
                        else:
                            fresh.setdefault(v, []).append(e)
            ranked = heapq.nlargest(
                fanout,
                fresh.items(),
                key=lambda kv: (max(e.confidence for e in kv[1]), max(e.valid_from for e in kv[1]), kv[0]),
            )
            parent = reach[u].sources
            for v, es in ranked:
                provenance = set(parent)
                for e in es:
                    provenance.update(e.sources)
                    credit(e, depth)
                reach[v] = Reach(depth + 1, tuple(sorted(provenance)))
                nxt.append(v)
                if max_nodes is not None and len(reach) >= max_nodes:
                    return reach, credited
        frontier = nxt
        if not frontier:
            break
    return reach, credited
