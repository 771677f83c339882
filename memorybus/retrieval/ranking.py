"""Recall's ranking inside a shard, in named stages over a :class:`Signals` record.

Pure: no I/O, no model. Given the dense candidates (cosine from the vector
index or the exact vector cache) and the keyword candidates (BM25), :func:`rank`

1. **gathers** the candidates: dense and keyword ones, the thread neighbours of
   the best of them, the members of the best thread around its best candidate, and
   facts the shard's knowledge graph links to the query;
2. scores their **relevance** on a 0..1 scale: calibrated cosine and the share
   of the query's keyword weight matched (``content``), read in the thread's
   context (a reply inherits part of the relevance of the turn it answers). When the best
   match holds a name the query names but none of the words it asks with, it may match on
   the name alone (:class:`NameCheck`): unless the query embedded without its names still
   reaches ``min_relevance`` on such a memory, or the whole query is closer to it than the
   names alone, its content is that name-free cosine's relevance, so a question about
   something never stored is not answered by what a name shares;
3. adds **structure**: how well the memory's thread answers the query, whether
   the query names its speaker or source, how close its event time is to a
   time the query names, how strongly the graph links it, whether it states the
   form of answer the query asks for (a time for *when*, a number for *how many*),
   whether it names a specific thing when the query asks *which X* (a quoted title,
   or a capitalised word few memories hold);
4. **reranks**: relevant memories (relevance at or over ``min_relevance``) are
   ordered by relevance, structure, salience, recency, importance, confidence
   and a document-length prior (how many distinct keyword terms the memory
   holds), on the score scale ``[min_relevance, 1]``; the others keep
   their relevance (below ``min_relevance``) as their score, so nothing lifts an
   irrelevant memory above a relevant one;
5. **selects** the best ``limit`` whose relevance passes the recall's floor.

Weights are :class:`~memorybus.config.RankingWeights`; ranking reads only
declared fields of a memory (content, vector, thread, position, speaker,
source, times, epistemic fields), never ``structured``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain
from operator import attrgetter
from typing import TypeVar

import numpy as np

from memorybus.config import RankingWeights
from memorybus.memory.model import MemoryKind, MemoryNode
from memorybus.retrieval.answers import NAMED, NUMBER, QUOTED_TITLE, TIME
from memorybus.retrieval.hits import RecallHit
from memorybus.retrieval.query import Query
from memorybus.retrieval.signals import Signals, dense_relevance, either, fuse, keyword_relevance
from memorybus.retrieval.structure import RecallIndex
from memorybus.retrieval.timeparse import time_match
from memorybus.salience import SECONDS_PER_DAY, salience_array

G = TypeVar("G")  # a group of candidates: a thread's key, a session's number


@dataclass(frozen=True, slots=True)
class NameCheck:
    """What tells a memory that matches a query only on a name it names: ``names``, the
    keyword terms of each name the query names, and ``asked``, those of what it asks
    (:attr:`~memorybus.retrieval.query.Query.asked`); ``cosines(ids)``, two rows: each
    memory's cosine with the query embedded without its names, and with its names alone
    (:func:`~memorybus.retrieval.query.query_texts`); ``holds(ids, terms)``, whether each
    memory holds any of ``terms``."""

    names: tuple[frozenset[str], ...]
    asked: tuple[str, ...]
    cosines: Callable[[Sequence[str]], np.ndarray]
    holds: Callable[[Sequence[str], Collection[str]], np.ndarray]


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
    *,
    query_weight: float = 0.0,
    limit: int | None = None,
    linked: Mapping[str, float] | None = None,
    timed: Sequence[str] = (),
    min_relevance: float | None = None,
    keyword_scores: Callable[[Sequence[str]], np.ndarray] | None = None,
    term_share: Callable[[Sequence[str]], np.ndarray] | None = None,
    cosines: Callable[[Sequence[str]], Mapping[str, float]] | None = None,
    names: NameCheck | None = None,
) -> list[RecallHit]:
    """The candidates as hits, best first (ties by id): the best ``limit`` (all when None)
    whose relevance is at least ``min_relevance`` (default ``weights.min_relevance``).

    ``query_weight``: the query's full keyword weight (``KeywordIndex.weight``);
    ``linked``: memories the knowledge graph links to the query, with their link
    strength; ``timed``: memories inside a time the query names; ``keyword_scores``: the
    BM25 of any memory for the query (``KeywordMatches.bm25``), so that a candidate the
    keyword list did not reach still gets its exact keyword evidence; ``term_share``: the
    share of the visible memories holding each of some terms (``KeywordIndex.doc_share``),
    which tells a rare capitalised word (a name) from a common one.
    With the query ``vector``, every candidate gets its exact cosine from the
    shard's vector cache (``cosines``: those of an exact search's scan, read off it
    instead of computed again). ``names``: see :class:`NameCheck` (applied when
    ``weights.name_check``). The hits hold the shard's node objects: copy before
    handing them out.
    """
    w = weights
    if linked:  # the graph lifts facts; conversation turns are left to the thread structure
        linked = {i: g for i, g in linked.items() if i in nodes and nodes[i].kind is not MemoryKind.EPISODIC}
    sig = gather(dense, keyword, nodes, structure, w, accept, vector, linked, query_weight, timed, keyword_scores,
                 cosines)
    if not len(sig):
        return []
    score_relevance(sig, structure, w, query_weight, names if w.name_check else None)
    if w.hybrid:
        score_structure(sig, nodes, structure, query, w, vector, linked, term_share)
        if w.length:  # the document-length prior: a memory that says more
            n = structure.keywords.distinct_terms(sig.ids)
            sig.length = n / (n + w.length_pivot)
    rerank(sig, nodes, now, w)
    floor = w.min_relevance if min_relevance is None else min_relevance
    return select(sig, nodes, floor, limit)


# ------------------------------------------------------------------- 1. gather
def gather(
    dense: Sequence[tuple[str, float]],
    keyword: Sequence[tuple[str, float]],
    nodes: Mapping[str, MemoryNode],
    structure: RecallIndex,
    w: RankingWeights,
    accept: Callable[[MemoryNode], bool],
    vector: np.ndarray | None,
    linked: Mapping[str, float] | None,
    query_weight: float = 0.0,
    timed: Sequence[str] = (),
    keyword_scores: Callable[[Sequence[str]], np.ndarray] | None = None,
    cosines: Callable[[Sequence[str]], Mapping[str, float]] | None = None,
) -> Signals:
    """The candidates and their raw evidence (exact cosine, exact BM25)."""
    if cosines is None and vector is not None:
        cosines = partial(structure.vectors.scores, vector)
    get = nodes.get
    cos = {i: s for i, s in dense if (n := get(i)) is not None and accept(n)}
    bm = {i: s for i, s in keyword if i in cos or ((n := get(i)) is not None and accept(n))} if w.hybrid else {}
    ids = list(dict.fromkeys([*cos, *bm]))
    if w.hybrid and timed:
        ids += [i for i in dict.fromkeys(timed) if i not in cos and i not in bm and i in nodes and accept(nodes[i])]
    if not ids or not w.hybrid:
        return Signals.of(ids, np.array([cos[i] for i in ids], dtype=np.float64), np.zeros(len(ids)))
    # every candidate's BM25 from the same keyword search (also one past the keyword list)
    def bm25_of(some: list[str]) -> np.ndarray:
        if keyword_scores is not None:
            return keyword_scores(some)
        return np.array([bm.get(i, 0.0) for i in some], dtype=np.float64)

    first_bm25 = bm25_of(ids)
    extra: list[str] = []
    # thread neighbours of the best candidates (replies, follow-ups) are candidates too
    if w.neighbor_candidates > 0 and (w.neighbor or w.thread):
        if vector is not None:
            missing = [i for i in ids if i not in cos]
            if missing and cosines is not None:
                cos.update(cosines(missing))
        first = np.array([cos.get(i, 0.0) for i in ids], dtype=np.float64)
        content = fuse(dense_relevance(first, w), keyword_relevance(first_bm25, query_weight), w)
        order = np.lexsort((np.arange(len(ids)), -content))[: w.neighbor_candidates]
        best = [ids[x] for x in order.tolist()]
        seen = set(ids)
        for i in best:
            for j in structure.adjacent(i):
                if j not in seen and j in nodes and accept(nodes[j]):
                    seen.add(j)
                    extra.append(j)
        # the members of the best thread around its best candidate: the thread lift reaches
        # them even when their own text matches too weakly to be a candidate
        if w.thread_members > 0 and w.thread:
            lead = next((i for i in best if structure.thread(i) is not None), None)
            for j in structure.around(lead, w.thread_members) if lead is not None else ():
                if j not in seen and j in nodes and accept(nodes[j]):
                    seen.add(j)
                    extra.append(j)
    # facts the knowledge graph links to the query's entities
    if linked and w.graph:
        seen = set(ids) | set(extra)
        for j in linked:
            node = nodes.get(j)
            if j not in seen and node is not None and accept(node):
                seen.add(j)
                extra.append(j)
    bm25 = np.concatenate([first_bm25, bm25_of(extra)]) if extra else first_bm25
    ids += extra
    if cosines is not None:
        missing = [i for i in ids if i not in cos]
        if missing:
            cos.update(cosines(missing))
    cosine = np.array([cos.get(i, 0.0) for i in ids], dtype=np.float64)
    return Signals.of(ids, cosine, bm25)


# ---------------------------------------------------------------- 2. relevance
def score_relevance(sig: Signals, structure: RecallIndex, w: RankingWeights, query_weight: float,
                    names: NameCheck | None = None) -> None:  # fmt: skip
    """``dense``, ``keyword``, ``content``, ``context`` and ``relevance`` (all 0..1)."""
    sig.dense = dense_relevance(sig.cosine, w)
    if not w.hybrid:
        sig.content = sig.relevance = sig.dense
        return
    sig.keyword = keyword_relevance(sig.bm25, query_weight)
    sig.content = fuse(sig.dense, sig.keyword, w)
    if names is not None and names.names and names.asked:
        _name_only(sig, names, w)
    if w.neighbor:
        at = {i: x for x, i in enumerate(sig.ids)}
        content = sig.content
        for x, near_ids in structure.threaded(sig.ids):
            near = [content[at[j]] for j in near_ids if j in at]
            if near:
                sig.context[x] = max(near)
    sig.relevance = either(sig.content, w.neighbor * sig.context)


def _name_only(sig: Signals, check: NameCheck, w: RankingWeights) -> None:
    """A memory that holds one name the query names (two match a relation between them) and
    none of the terms it asks with matches on the name, and perhaps on nothing else. When the
    best content match is such a memory (else the query is answered by what it asks, and
    nothing changes), each such memory keeps its ``content`` only when the query without its
    names still reaches ``min_relevance`` on it (the configured floor, not a recall's own: a
    memory's relevance does not depend on the call), or when the whole query is closer to it
    than the names alone by more than ``name_margin`` (the question adds to what the name
    matches); else its ``content`` is at most the relevance of its cosine with the query
    without its names. ``unnamed`` records that cosine."""
    ids = sig.ids
    held = sum(check.holds(ids, name).astype(np.int64) for name in check.names)
    only = (held == 1) & ~check.holds(ids, check.asked)
    if not only[int(np.argmax(sig.content))]:
        return  # the best match holds what is asked (or no name): the query is answered
    at = np.flatnonzero(only)
    unnamed, alone = np.asarray(check.cosines([ids[x] for x in at.tolist()]), dtype=np.float64)
    sig.unnamed[at] = unnamed
    free = dense_relevance(unnamed, w)
    weak = (free < w.min_relevance) & (sig.cosine[at] - alone <= w.name_margin)
    sig.content[at[weak]] = np.minimum(sig.content[at[weak]], free[weak])


# ---------------------------------------------------------------- 3. structure
def score_structure(
    sig: Signals,
    nodes: Mapping[str, MemoryNode],
    structure: RecallIndex,
    query: Query | None,
    w: RankingWeights,
    vector: np.ndarray | None,
    linked: Mapping[str, float] | None,
    term_share: Callable[[Sequence[str]], np.ndarray] | None = None,
) -> None:
    """``thread``, ``speaker``, ``time``, ``graph``, ``answer`` and ``named`` (all 0..1)."""
    ids = sig.ids
    if w.thread:
        _thread_relevance(sig, structure, w, vector)
    if w.session:
        _session_relevance(sig, structure, w, vector)
    if query is not None and w.speaker and query.term_set:
        sig.speaker = structure.named(ids, query.term_set)
    if query is not None and query.windows and w.time:
        windows = list(query.windows)
        close = np.array([time_match(windows, nodes[i].valid_from, w.time_slack_days) for i in ids])
        if close.max(initial=0.0) > 0:  # only when the named time is among the candidates
            sig.time = close
    if linked and w.graph:
        sig.graph = np.array([float(linked.get(i, 0.0)) for i in ids])
    if query is not None and query.forms & (TIME | NUMBER) and w.answer:
        asked = query.forms & (TIME | NUMBER)
        sig.answer = np.array([1.0 if f & asked else 0.0 for f in structure.forms(ids)])
    if query is not None and query.forms & NAMED and w.named:
        sig.named = _names_a_thing(ids, structure, w.named_share, term_share)


def _names_a_thing(ids: Sequence[str], structure: RecallIndex, share: float,
                   term_share: Callable[[Sequence[str]], np.ndarray] | None) -> np.ndarray:  # fmt: skip
    """1 for a memory holding a quoted title or a capitalised word that fewer than ``share``
    of the visible memories hold (a name, not a greeting or a speaker everyone mentions)."""
    proper = structure.proper_terms(ids)
    named = {QUOTED_TITLE}
    terms = [t for t in {t for p in proper for t in p} if t != QUOTED_TITLE]
    if term_share is not None and terms:
        named.update(t for t, x in zip(terms, term_share(terms).tolist(), strict=True) if x < share)
    return np.fromiter((1.0 if p and not named.isdisjoint(p) else 0.0 for p in proper), dtype=np.float64,
                       count=len(proper))  # fmt: skip


def _thread_relevance(sig: Signals, structure: RecallIndex, w: RankingWeights, vector: np.ndarray | None) -> None:
    """A thread that answers the query lifts its members: its best member's relevance,
    with its centroid's cosine (the thread as a whole), relative to the best thread."""
    threads = [structure.thread(i) for i in sig.ids]
    scores = None if vector is None else (lambda ts: structure.thread_scores(vector, ts))
    lift = _group_lift(threads, sig.relevance, w.thread_centroid, scores, w)
    if lift is not None:
        sig.thread = lift


def _session_relevance(sig: Signals, structure: RecallIndex, w: RankingWeights, vector: np.ndarray | None) -> None:
    """The thread lift for sessions from time: a session of two or more memories that
    answers the query lifts its members (its best member's relevance, with
    ``session_centroid`` of its centroid's cosine, relative to the best session). Nothing
    else of a declared thread applies: no neighbour expansion, no contextual vectors, no
    members brought in."""
    size = structure.sessions.size
    # a memory alone in its session has no context to be lifted by (its own relevance
    # would lift it above memories of other kinds that have no session)
    sessions = [s if s is not None and size(s) > 1 else None for s in map(structure.session, sig.ids)]
    scores = None if vector is None else (lambda ss: structure.session_scores(vector, ss))
    lift = _group_lift(sessions, sig.relevance, w.session_centroid, scores, w)
    if lift is not None:
        sig.session = lift


def _group_lift(
    groups: Sequence[G | None],
    relevance: np.ndarray,
    share: float,
    scores: Callable[[list[G]], dict[G, float]] | None,
    w: RankingWeights,
) -> np.ndarray | None:
    """Per candidate, how well its group (a thread, a session; None: none) answers the
    query: ``1 - (1 - best) * (1 - share * whole)``, ``best`` the relevance of the group's
    best candidate and ``whole`` its centroid's cosine relative to the best group's (on the
    dense scale). None when no candidate has a group."""
    best: dict[G, float] = {}
    for g, r in zip(groups, relevance.tolist(), strict=True):
        if g is not None and r > best.get(g, -1.0):
            best[g] = r
    if not best:
        return None
    whole: dict[G, float] = {}
    if share and scores is not None:
        cos = scores(list(best))
        if cos:
            top, span = max(cos.values()), w.dense_full - w.dense_zero
            whole = {g: max(0.0, 1.0 - (top - c) / span) for g, c in cos.items()}
    per = {g: 1.0 - (1.0 - b) * (1.0 - share * whole.get(g, 0.0)) for g, b in best.items()}
    return np.array([per[g] if g is not None else 0.0 for g in groups])


# ------------------------------------------------------------------- 4. rerank
#: what the rerank reads of each candidate, in one pass
_RERANK_FIELDS = attrgetter("confidence", "access_count", "last_accessed", "decay_rate", "importance", "created_at")


def rerank(sig: Signals, nodes: Mapping[str, MemoryNode], now: float, w: RankingWeights) -> None:
    """The score: relevant memories on ``[min_relevance, 1]`` by relevance, structure and
    salience; the others at their relevance (below ``min_relevance``)."""
    fields = np.fromiter(chain.from_iterable(map(_RERANK_FIELDS, map(nodes.__getitem__, sig.ids))),
                         dtype=np.float64, count=6 * len(sig)).reshape(len(sig), 6)
    conf, access, last, decay, imp, created = fields.T
    sal = np.minimum(1.0, salience_array(conf, access, last, decay, imp, now))
    age_days = np.maximum(0.0, now - created) / SECONDS_PER_DAY
    recency = np.exp(-math.log(2) * age_days / max(1e-9, w.recency_half_life_days))
    structure_weights = (w.thread, w.session, w.speaker, w.time, w.graph, w.answer, w.named) if w.hybrid else (0.0,) * 7
    lifts = (sig.thread, sig.session, sig.speaker, sig.time, sig.graph, sig.answer, sig.named)
    lift = sum(k * s for k, s in zip(structure_weights, lifts, strict=True))
    length = w.length if w.hybrid else 0.0
    base = (sig.relevance + lift) * (1.0 - w.salience + w.salience * sal)
    base = base + w.recency * recency + w.importance * (imp - 1.0) / 9.0 + w.confidence * conf + length * sig.length
    top = 1.0 + sum(structure_weights) + w.recency + w.importance + w.confidence + length
    floor = w.min_relevance
    sig.score = np.where(sig.relevance >= floor, floor + (1.0 - floor) * np.clip(base / top, 0.0, 1.0),
                         np.minimum(sig.relevance, np.nextafter(floor, 0.0)))  # fmt: skip


# ------------------------------------------------------------------- 5. select
def select(sig: Signals, nodes: Mapping[str, MemoryNode], floor: float, limit: int | None) -> list[RecallHit]:
    """The hits whose relevance reaches ``floor``, best score first (ties by id)."""
    score, ids = sig.score.tolist(), sig.ids
    keep = np.flatnonzero(sig.relevance >= floor).tolist()
    keep.sort(key=lambda x: (-score[x], ids[x]))
    if limit is not None:
        keep = keep[:limit]
    return [
        RecallHit(nodes[ids[x]], score[x], float(sig.relevance[x]), "match", None, sig.report(x)) for x in keep
    ]

