"""The temporal knowledge graph of a shard: entities, typed relations valid in time, provenance.

One :class:`TemporalGraph` per shard holds the relations of every scope the
shard owns. It is derived data: the shard feeds it from committed memories
(:meth:`TemporalGraph.add_memory` / :meth:`TemporalGraph.remove_source`) and
rebuilds it from the store on start (:meth:`TemporalGraph.rebuild_from`).
Pure Python over networkx: no Ray, no I/O, not thread-safe (the shard actor
serialises calls).

Guarantees:

- Entities are keyed by :func:`entity_key` (NFKC, case-folded, whitespace
  collapsed, possessive and leading article dropped); each keeps the display
  name it was first seen with.
- Every edge carries ``predicate``, ``scope_key``, ``valid_from``, ``valid_to``
  (``None``: still valid) and its provenance ``source_ids`` (memory ids). An
  edge is valid at ``t`` when ``valid_from <= t < valid_to``.
- Functional predicates (a subject has one current object per predicate and
  scope): a later object closes the earlier edge's ``valid_to`` at its own
  ``valid_from``; nothing is deleted. Closure depends only on the set of
  edges, not on the order they were added, and is undone when the closing
  memory is removed. Edges starting at the same instant coexist.
- Expansion is a breadth-first walk that checks validity and scope edge by
  edge while it walks (no filtered view of the graph is built), and keeps at
  most ``fanout`` new neighbours per expanded node, so it visits at most
  ``seeds * (1 + f + ... + f**hops)`` entities however large a hub is.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Collection, Iterable

import networkx as nx

from memorybus.graph.edges import Edge, Group, Mention, Reach
from memorybus.graph.extract import (
    Extractor,
    Triple,
    canonical_predicate,
    default_extractor,
    display_name,
    entities,
    entity_key,
    triples_for,
)
from memorybus.graph.walk import walk
from memorybus.memory.model import MemoryNode

DEFAULT_FUNCTIONAL = frozenset(
    {"is", "works_at", "lives_in", "headquartered_in", "located_in", "ceo_of", "reports_to", "married_to"}
)
DEFAULT_FANOUT = 16


# ----------------------------------------------------------------------- graph
class TemporalGraph:
    """Entities and relations valid in time, for every scope of one shard.

    ``functional`` names the predicates for which a subject has one current
    object (per scope); they are canonicalised with :func:`canonical_predicate`.
    """

    def __init__(self, functional: Iterable[str] = DEFAULT_FUNCTIONAL) -> None:
        self.functional = frozenset(canonical_predicate(p) for p in functional)
        self._clear()

    def _clear(self) -> None:
        self._g = nx.MultiDiGraph()
        self._edges: dict[int, Edge] = {}
        self._next_id = 0
        self._by_triple: dict[tuple[str, str, str, str], list[int]] = {}
        self._by_source: dict[str, set[int]] = {}
        self._groups: dict[tuple[str, str, str], Group] = {}
        self._display: dict[str, str] = {}
        self._mentions: dict[str, dict[str, Mention]] = {}
        self._mentioned_by: dict[str, set[str]] = {}

    # ------------------------------------------------------------- inspection
    @property
    def graph(self) -> nx.MultiDiGraph:
        """The underlying networkx graph (edge keys are edge ids, data ``{"edge": Edge}``); read only."""
        return self._g

    def __len__(self) -> int:
        return len(self._display)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and entity_key(name) in self._display

    @property
    def edge_count(self) -> int:
        return len(self._edges)

    def name(self, entity: str) -> str:
        """The display name of an entity (given by name or key)."""
        return self._display[entity_key(entity)]

    def edges(self, entity: str | None = None) -> list[Edge]:
        """Every edge (of ``entity``, either direction), valid or closed, ordered by id."""
        if entity is None:
            return list(self._edges.values())
        key = entity_key(entity)
        if key not in self._g:
            return []
        ids = {k for _, _, k in self._g.out_edges(key, keys=True)} | {k for _, _, k in self._g.in_edges(key, keys=True)}
        return [self._edges[i] for i in sorted(ids)]

    def edges_at(self, entity: str, t: float, scope_keys: Collection[str] | None = None) -> list[Edge]:
        """The edges of ``entity`` (either direction) valid at ``t`` and in ``scope_keys`` (None: all)."""
        scopes = None if scope_keys is None else frozenset(scope_keys)
        return [e for e in self.edges(entity) if e.valid_at(t) and (scopes is None or e.scope_key in scopes)]

    def match_entities(self, text: str, *, max_words: int = 6) -> list[str]:
        """Keys of known entities named in ``text`` (any case), longest match first, in order."""
        words = [w[:-2] if w.endswith(("'s", "\u2019s")) else w for w in re.findall(r"[\w&'\u2019-]+", text.casefold())]
        out: list[str] = []
        i = 0
        while i < len(words):
            for n in range(min(max_words, len(words) - i), 0, -1):
                phrase = " ".join(words[i : i + n])
                if phrase in self._display:
                    if phrase not in out:
                        out.append(phrase)
                    i += n
                    break
            else:
                i += 1
        return out

    # ---------------------------------------------------------------- writing
    def add(self, triple: Triple) -> Edge:
        """Add one triple; returns the edge that now carries it.

        The same relation in the same scope, valid at the triple's
        ``valid_from`` with the same asserted end, gains the triple's source
        (idempotent); otherwise a new edge. For a functional predicate, edges
        of the subject with another object are closed at the new edge's start
        and the new edge is closed at the start of any later one.
        """
        s, o, p, scope = triple.subject_key, triple.object_key, triple.predicate, triple.scope_key
        ident = (s, p, o, scope)
        for eid in self._by_triple.get(ident, ()):
            edge = self._edges[eid]
            if edge.until == triple.valid_to and edge.valid_at(triple.valid_from):
                self._support(edge, triple)
                return edge
        for key, name in ((s, triple.subject), (o, triple.object)):
            if key not in self._g:
                self._g.add_node(key, name=self._display.setdefault(key, name))
        edge = Edge(self._next_id, s, p, o, scope, triple.valid_from, triple.valid_to, triple.valid_to)
        self._next_id += 1
        self._edges[edge.id] = edge
        self._g.add_edge(s, o, key=edge.id, edge=edge)
        self._by_triple.setdefault(ident, []).append(edge.id)
        self._support(edge, triple)
        if p in self.functional:
            self._place(self._groups.setdefault((s, p, scope), Group()), edge)
        return edge

    def _support(self, edge: Edge, triple: Triple) -> None:
        edge.sources[triple.source_id] = max(edge.sources.get(triple.source_id, 0.0), triple.confidence)
        self._by_source.setdefault(triple.source_id, set()).add(edge.id)

    def _place(self, group: Group, edge: Edge) -> None:
        group.ids.add(edge.id)
        t = edge.valid_from
        if t < group.max_start:  # out of order: recompute the group
            self._sweep(group)
            return
        affected = group.live if t == group.max_start else group.live | group.at_max
        for eid in affected:
            other = self._edges[eid]
            if other.object != edge.object and other.valid_from < t and (other.valid_to is None or other.valid_to > t):
                other.valid_to = t
        if t > group.max_start:
            group.max_start, group.at_max = t, set()
        group.live = {i for i in affected if (v := self._edges[i].valid_to) is None or v > t}
        group.at_max.add(edge.id)

    def _sweep(self, group: Group) -> None:
        """Recompute every edge's valid_to in the group: the next start of another object, or until."""
        edges = sorted((self._edges[i] for i in group.ids), key=lambda e: e.valid_from, reverse=True)
        best: list[tuple[float, str]] = []  # the two earliest later starts with distinct objects
        i = 0
        while i < len(edges):
            j, start = i, edges[i].valid_from
            while j < len(edges) and edges[j].valid_from == start:
                j += 1
            for e in edges[i:j]:
                nxt = next((st for st, ob in best if ob != e.object), None)
                e.valid_to = nxt if e.until is None else e.until if nxt is None else min(nxt, e.until)
            for e in edges[i:j]:
                best = [(start, e.object), *((st, ob) for st, ob in best if ob != e.object)][:2]
            i = j
        group.max_start = edges[0].valid_from if edges else -math.inf
        group.at_max = {e.id for e in edges if e.valid_from == group.max_start}
        group.live = {
            e.id
            for e in edges
            if e.valid_from < group.max_start and (e.valid_to is None or e.valid_to > group.max_start)
        }

    def add_mentions(
        self, memory_id: str, names: Iterable[str], *, scope_key: str, valid_from: float, valid_to: float | None = None
    ) -> None:
        """Record that memory ``memory_id`` names these entities (recall boosts it for them)."""
        mention = Mention(scope_key, valid_from, valid_to)
        for name in names:
            key = entity_key(name)
            if not key:
                continue
            self._display.setdefault(key, display_name(name))
            self._mentions.setdefault(key, {})[memory_id] = mention
            self._mentioned_by.setdefault(memory_id, set()).add(key)

    def add_memory(
        self, node: MemoryNode, extractor: Extractor = default_extractor, *, mentions: bool = True
    ) -> list[Edge]:
        """Mirror one memory: replace whatever ``node.id`` contributed before with its triples and mentions."""
        self.remove_source(node.id)
        edges = [self.add(t) for t in triples_for(node, extractor)]
        if mentions:
            self.add_mentions(
                node.id,
                entities(node.content),
                scope_key=node.scope.key,
                valid_from=node.valid_from,
                valid_to=node.valid_to,
            )
        return edges

    def remove_source(self, memory_id: str) -> int:
        """Forget a memory: drop it from every edge's provenance and its mentions.

        Edges left without a source are deleted, entities left without edges
        or mentions disappear, and closures those edges caused are undone.
        Returns the number of edges deleted.
        """
        touched: set[str] = set()
        dirty: set[tuple[str, str, str]] = set()
        removed = 0
        for eid in self._by_source.pop(memory_id, ()):
            edge = self._edges[eid]
            del edge.sources[memory_id]
            if edge.sources:
                continue
            removed += 1
            del self._edges[eid]
            self._g.remove_edge(edge.subject, edge.object, key=eid)
            ident = (edge.subject, edge.predicate, edge.object, edge.scope_key)
            self._by_triple[ident].remove(eid)
            if not self._by_triple[ident]:
                del self._by_triple[ident]
            gkey = (edge.subject, edge.predicate, edge.scope_key)
            if gkey in self._groups:
                self._groups[gkey].ids.discard(eid)
                dirty.add(gkey)
            touched.update((edge.subject, edge.object))
        for gkey in dirty:
            if self._groups[gkey].ids:
                self._sweep(self._groups[gkey])
            else:
                del self._groups[gkey]
        for key in self._mentioned_by.pop(memory_id, ()):
            named = self._mentions[key]
            del named[memory_id]
            if not named:
                del self._mentions[key]
            touched.add(key)
        for key in touched:
            if (key not in self._g or self._g.degree(key) == 0) and key not in self._mentions:
                if key in self._g:
                    self._g.remove_node(key)
                self._display.pop(key, None)
        return removed

    def rebuild(self, triples: Iterable[Triple]) -> None:
        """Replace the whole graph with these triples (added in valid_from order)."""
        self._clear()
        for t in sorted(triples, key=lambda t: (t.valid_from, t.source_id)):
            self.add(t)

    def rebuild_from(self, nodes: Iterable[MemoryNode], extractor: Extractor = default_extractor) -> None:
        """Replace the whole graph with what these memories contribute (:meth:`add_memory` each)."""
        self._clear()
        for node in sorted(nodes, key=lambda n: (n.valid_from, n.id)):
            self.add_memory(node, extractor)

    # ---------------------------------------------------------------- reading
    def expand(
        self,
        entities: Iterable[str],
        *,
        at: float,
        hops: int = 2,
        fanout: int = DEFAULT_FANOUT,
        scope_keys: Collection[str] | None = None,
        max_nodes: int | None = None,
    ) -> dict[str, Reach]:
        """Entities within ``hops`` of the known ``entities`` over edges valid at ``at``.

        Edges are followed in either direction; only edges valid at ``at`` and
        in ``scope_keys`` (None: every scope) are traversed, checked edge by
        edge during the walk. From each expanded entity at most ``fanout`` new
        neighbours are taken (the most confident, then most recent edges);
        ``max_nodes`` caps the result. Returns ``{entity key: Reach}``, seeds
        at hop 0 with no sources; unknown seeds are left out.
        """
        return walk(self._g, self._edges, self._display, entities, at, hops, fanout, scope_keys, max_nodes)[0]

    def memories_for(
        self,
        entities: Iterable[str],
        at: float,
        scope_keys: Collection[str] | None = None,
        *,
        hops: int = 2,
        fanout: int = DEFAULT_FANOUT,
        decay: float = 0.5,
        mention_weight: float = 0.5,
    ) -> dict[str, float]:
        """Memory ids linked to ``entities`` at ``at``, scored ``decay ** hop``, best first.

        A memory supporting an edge walked from an entity at hop ``h`` scores
        ``decay ** h`` (an edge of a seed: 1.0); a memory naming a reached
        entity (at most ``fanout`` most recent per entity, valid at ``at`` and
        visible) scores ``mention_weight * decay ** h``. Each memory keeps its
        best score.
        """
        reach, credited = walk(self._g, self._edges, self._display, entities, at, hops, fanout, scope_keys, None)
        scores = {mid: decay**h for mid, h in credited.items()}
        if mention_weight > 0:
            scopes = None if scope_keys is None else frozenset(scope_keys)
            for key, r in reach.items():
                named = self._mentions.get(key)
                if not named:
                    continue
                visible = [
                    mid
                    for mid, m in named.items()
                    if m.valid_from <= at
                    and (m.valid_to is None or at < m.valid_to)
                    and (scopes is None or m.scope_key in scopes)
                ]
                score = mention_weight * decay**r.hops
                for mid in heapq.nlargest(fanout, visible, key=lambda mid: (named[mid].valid_from, mid)):
                    if score > scores.get(mid, 0.0):
                        scores[mid] = score
        return dict(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])))
