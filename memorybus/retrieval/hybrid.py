"""Hybrid, structure-aware ranking inside a shard (pure: no I/O, no model).

Given the dense candidates (cosine from the vector index) and the keyword
candidates (BM25 from :class:`~memorybus.retrieval.keyword.KeywordIndex`),
:func:`rank` scores each candidate in five steps (weights in
:class:`~memorybus.config.RankingWeights`):

1. fusion of normalised scores: ``dense * scaled(cosine) + keyword * bm25/max``;
2. source matching: the query names the memory's speaker or source agent;
3. neighbours: a share of the best relevance among the memory's session
   neighbours (evidence often sits next to what the query matched);
4. sessions: a share of the best relevance in the memory's session (a session
   that answers the query lifts its members);
5. time: closeness of the memory's event time (``valid_from``) to a time the
   query names ("in June", "last week", "on 8 May 2023"), applied only when some
   candidate is close to that time;

then the rerank by salience, recency, importance and confidence
(:func:`~memorybus.retrieval.hits.rank_score`). :func:`expand` adds session
neighbours and relation-linked memories of the top hits, each with a budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from memorybus.config import RankingWeights
from memorybus.errors import InvalidRequest
from memorybus.model import MemoryKind, MemoryNode
from memorybus.retrieval.hits import RecallHit, rank_scores
from memorybus.retrieval.structure import RecallIndex, speaker_of
from memorybus.retrieval.text import names
from memorybus.retrieval.timeparse import TimeWindow, query_times, time_match
from memorybus.validation import check_time


@dataclass(frozen=True, slots=True)
class RecallOptions:
    """What a recall may return and what it adds around its hits.

    - ``start``/``end``: only memories whose event time (``valid_from``) is in
      ``[start, end)`` (epoch seconds; either may be None).
    - ``as_of``: the memory as it was at that time: memories valid then
      (``valid_from <= as_of`` and ``valid_to`` unset or later); superseded
      (deprecated) facts count when they were valid.
    - ``reference_time``: "now" for relative time expressions in the query
      ("last week"); default ``as_of``, else the shard clock.
    - ``neighbors``: add up to this many session neighbours on each side of each
      top hit, at most ``neighbor_budget`` in all; ``relations``: add up to this
      many memories linked to each top hit (``related``, ``parents``,
      ``children``, ``source_ids``, ``contradicts``), at most
      ``relation_budget`` in all. Expansions come after the ``k`` matches with
      ``via`` set and are not counted in ``k``.
    - ``touch``: record the access (salience); False for read-only recall.
    - ``key_prefix``: only memories whose ``key`` starts with this string (keyed
      facts and records stored under a key namespace, e.g. a LangGraph store's).
    """

    start: float | None = None
    end: float | None = None
    as_of: float | None = None
    reference_time: float | None = None
    neighbors: int = 0
    neighbor_budget: int = 10
    relations: int = 0
    relation_budget: int = 10
    touch: bool = True
    key_prefix: str | None = None

    def validate(self) -> RecallOptions:
        if self.key_prefix is not None and (not isinstance(self.key_prefix, str) or not self.key_prefix):
            raise InvalidRequest("key_prefix", "must be a non-empty string or None")
        for name in ("start", "end", "as_of", "reference_time"):
            check_time(name, getattr(self, name), InvalidRequest, optional=True)
        if self.start is not None and self.end is not None and self.end < self.start:
            raise InvalidRequest("end", "is before start")
        for name in ("neighbors", "neighbor_budget", "relations", "relation_budget"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 1000:
                raise InvalidRequest(name, "must be an int between 0 and 1000")
        return self

    @property
    def filters_time(self) -> bool:
        return self.start is not None or self.end is not None or self.as_of is not None

    def admits(self, node: MemoryNode) -> bool:
        """The time filters (event-time range and "as of")."""
        if self.start is not None and node.valid_from < self.start:
            return False
        if self.end is not None and node.valid_from >= self.end:
            return False
        if self.as_of is not None:
            if node.valid_from > self.as_of:
                return False
            if node.valid_to is not None and node.valid_to <= self.as_of:
                return False
        return True


@dataclass(frozen=True, slots=True)
class Query:
    """What the ranking reads from the query text."""

    text: str
    names: frozenset[str]
    times: tuple[TimeWindow, ...]

    @classmethod
    def parse(cls, text: str | None, reference: float) -> Query | None:
        if not text:
            return None
        return cls(text, frozenset(names(text)), tuple(query_times(text, reference)))


def rank(
    dense: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    nodes: Mapping[str, MemoryNode],
    structure: RecallIndex,
    query: Query | None,
    weights: RankingWeights,
    now: float,
    accept: Callable[[MemoryNode], bool],
    vector: np.ndarray | None = None,
    limit: int | None = None,
    linked: Mapping[str, float] | None = None,
) -> list[RecallHit]:
    """Score and order the candidates (best first, ties by id); the best ``limit`` (all when None).

    With the query ``vector``, every candidate gets its exact cosine from the
    shard's vector cache, and the session neighbours of the best
    ``neighbor_candidates`` candidates join the candidates. The hits hold the
    shard's node objects: copy before handing them out.
    """
    w = weights
    cos = {i: s for i, s in dense if i in nodes and accept(nodes[i])}
    bm = {i: s for i, s in keyword if i in nodes and accept(nodes[i])} if w.hybrid else {}
    ids = list(dict.fromkeys([*cos, *bm]))
    if not ids:
        return []
    parts: dict[str, dict[str, float]] = {}
    if not w.hybrid:
        rel = {i: cos[i] for i in ids}
        return _finish(ids, rel, cos, bm, parts, nodes, now, w, limit)
    if vector is not None:
        missing = [i for i in ids if i not in cos]
        if missing:
            cos.update(structure.vectors.scores(vector, missing))
    top_bm = max(bm.values(), default=0.0)
    kw = w.keyword / top_bm if top_bm > 0 else 0.0
    span = max(1e-6, w.dense_span)
    hi = max(cos.values(), default=0.0)
    floor = hi - span

    def fuse(i: str) -> float:
        c = cos.get(i)
        dn = (c - floor) / span if c is not None and c > floor else 0.0
        return w.dense * dn + kw * bm.get(i, 0.0)

    rel = {i: fuse(i) for i in ids}
    adjacent = structure.adjacent
    # neighbours of the best candidates are candidates too (replies, follow-ups)
    if w.neighbor_candidates > 0 and (w.neighbor or w.session):
        best = sorted(ids, key=rel.__getitem__, reverse=True)[: w.neighbor_candidates]
        extra = []
        for i in best:
            for j in adjacent(i):
                if j not in rel and j in nodes and accept(nodes[j]):
                    rel[j] = 0.0
                    extra.append(j)
        if extra:
            if vector is not None:
                cos.update(structure.vectors.scores(vector, extra))
            for j in extra:
                rel[j] = fuse(j)
            ids += extra
    # graph: facts linked to the query's entities (multi-hop), scored by the shard's graph;
    # episodic memories (conversation turns) are left to the session structure
    if linked and w.graph:
        linked = {i: g for i, g in linked.items() if i in nodes and nodes[i].kind is not MemoryKind.EPISODIC}
    if linked and w.graph:
        bonus = parts["graph"] = {}
        extra = [j for j in linked if j not in rel and accept(nodes[j])]
        if extra and vector is not None:
            cos.update(structure.vectors.scores(vector, extra))
        for j in extra:
            rel[j] = fuse(j)
        ids += extra
        for i, g in linked.items():
            if i in rel:
                rel[i] += w.graph * g
                bonus[i] = w.graph * g
    # 2. source / speaker named in the query
    if query is not None and query.names and w.source_match:
        bonus = parts["source"] = {}
        for i in ids:
            if _names_speaker(query.names, speaker_of(nodes[i])):
                rel[i] += w.source_match
                bonus[i] = w.source_match
    # 3. neighbours: evidence sits next to what matched
    if w.neighbor:
        base = dict(rel)
        bonus = parts["neighbor"] = {}
        for i in ids:
            near = max((base.get(j, 0.0) for j in adjacent(i)), default=0.0)
            if near > 0:
                rel[i] += w.neighbor * near
                bonus[i] = w.neighbor * near
    # 4. sessions: the session as a whole (its best member, its centroid) lifts its members
    if w.session:
        session_of = structure.session
        sessions = {i: session_of(i) for i in ids}
        best_of: dict[str, float] = {}
        for i, s in sessions.items():
            if s is not None and rel[i] > best_of.get(s, 0.0):
                best_of[s] = rel[i]
        if w.session_centroid and vector is not None and best_of:
            whole = structure.session_scores(vector, list(best_of))
            if whole:
                top = max(whole.values())
                for s, c in whole.items():
                    best_of[s] += w.session_centroid * max(0.0, 1.0 - (top - c) / span)
        bonus = parts["session"] = {}
        for i, s in sessions.items():
            if s is not None:
                rel[i] += w.session * best_of.get(s, 0.0)
                bonus[i] = w.session * best_of.get(s, 0.0)
    # 5. time named in the query
    if query is not None and query.times and w.time_match:
        windows = list(query.times)
        close = {i: time_match(windows, nodes[i].valid_from, w.time_slack_days) for i in ids}
        if max(close.values(), default=0.0) > 0:
            bonus = parts["time"] = {}
            for i in ids:
                if close[i] > 0:
                    rel[i] += w.time_match * close[i]
                    bonus[i] = w.time_match * close[i]
    return _finish(ids, rel, cos, bm, parts, nodes, now, w, limit)


def _names_speaker(named: frozenset[str], speaker: str) -> bool:
    if not speaker:
        return False
    who = speaker.lower()
    return who in named or any(p in named for p in who.split())


def _finish(
    ids: list[str],
    rel: dict[str, float],
    cos: dict[str, float],
    bm: dict[str, float],
    parts: dict[str, dict[str, float]],
    nodes: Mapping[str, MemoryNode],
    now: float,
    w: RankingWeights,
    limit: int | None,
) -> list[RecallHit]:
    """The rerank, then hits (with their score parts) for the best ``limit``."""
    rels = [rel[i] for i in ids]
    scores = rank_scores([nodes[i] for i in ids], rels, now, w)
    order = sorted(range(len(ids)), key=lambda x: (-scores[x], ids[x]))
    if limit is not None:
        order = order[:limit]
    hits = []
    for x in order:
        i = ids[x]
        signals = {"dense": cos.get(i, 0.0), "keyword": bm.get(i, 0.0)}
        for name, bonus in parts.items():
            if i in bonus:
                signals[name] = bonus[i]
        hits.append(RecallHit(nodes[i], scores[x], rels[x], "match", None, signals))
    return hits


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
    drop it. Memories already in ``top`` are not repeated.
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
