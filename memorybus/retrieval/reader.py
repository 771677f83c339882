"""The read path of a shard: hybrid recall over the shard's indexes.

:class:`RecallReader` belongs to one shard, and reads only what the shard hands it
(its cached records, its vector index, the recall structure it keeps current with
every committed write; see :class:`RecallReader`): it does not know the shard. It
checks the caller's context with the check the shard hands it.

A search costs one vector-index query, one keyword query over the visible
scope partitions and a pass over at most ``dense_candidates +
keyword_candidates`` candidates: it does not grow with the shard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from memorybus.clock import Clock
from memorybus.config import RankingWeights
from memorybus.errors import InvalidRequest
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus, evolve
from memorybus.retrieval.expand import expand
from memorybus.retrieval.hits import DEFAULT_STATUSES, RecallHit
from memorybus.retrieval.options import RecallOptions
from memorybus.retrieval.query import Query
from memorybus.retrieval.ranking import NameCheck, rank
from memorybus.retrieval.structure import RecallIndex
from memorybus.scopes import Context
from memorybus.storage.vectors import NearestIndex

#: how much deeper the indexes are searched when a time filter drops candidates
_FILTER_DEPTH = 8

#: memories linked to a query's entities, with their weights: ``links(context, query, as_of)``
Links = Callable[[Context, str, float | None], Mapping[str, float]]


@dataclass(slots=True)
class SearchPlan:
    """A search prepared up to the query vector (see :meth:`RecallReader.search`)."""

    context: Context
    k: int
    kinds: Sequence[MemoryKind] | None
    statuses: Sequence[MemoryStatus]
    touch: bool
    options: RecallOptions
    scope_keys: list[str]
    now: float
    accept: Callable[[MemoryNode], bool]
    query: Query | None
    keyword: list[tuple[str, float]]
    keyword_scores: Callable[[Sequence[str]], np.ndarray] | None
    query_weight: float
    filtered: bool
    depth: int


class RecallReader:
    """Recall over ``nodes`` (the shard's cached records, read only), ``index`` and
    ``structure`` (keywords, vectors in memory, threads: kept by the shard);
    ``touch(ids, now)`` counts the accesses of what a recall returned, ``check(context)``
    checks a caller's context, ``links`` (optional) are the shard's graph links."""

    def __init__(self, nodes: Mapping[str, MemoryNode], index: NearestIndex, structure: RecallIndex, *,
                 ranking: RankingWeights, dim: int, clock: Clock, touch: Callable[[list[str], float], None],
                 check: Callable[[object], Context], links: Links | None = None) -> None:  # fmt: skip
        self.nodes, self.index, self.ranking, self.dim, self.clock = nodes, index, ranking, dim, clock
        self._touch, self._check, self._links = touch, check, links
        self.structure = structure

    # ------------------------------------------------------------------- reads
    def search(
        self,
        context: Context,
        vector: np.ndarray,
        k: int = 10,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        statuses: Sequence[MemoryStatus] | None = None,
        touch: bool = True,
        as_of: float | None = None,
        query: str | None = None,
        options: RecallOptions | None = None,
    ) -> list[RecallHit]:
        """Top ``k`` memories visible to ``context`` for the query ``vector`` (and its
        ``query`` text: hybrid, structure-aware recall, see
        :mod:`memorybus.retrieval.ranking`), followed by the expansions ``options`` asks for.

        ``vector``: the query's embedding, or the rows of the texts
        :func:`~memorybus.retrieval.query.query_texts` gives for ``query`` (the query, the
        query without the names it names, the names alone: they tell a memory that shares
        only a name with the query; without them such a memory is ranked on the whole query).

        Visibility is enforced twice: the indexes are filtered to the context's
        visible scope keys, and every candidate is checked again. ``as_of``: the state
        at that time — memories valid then (``valid_from <= t < valid_to``), including
        facts deprecated since, excluding later ones. Memories the graph links to the
        query's entities (``links``) are one more fused signal."""
        context = self._check(context)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
            raise InvalidRequest("k", "must be an int between 1 and 1000")
        if query is not None and not isinstance(query, str):
            raise InvalidRequest("query", "must be a string or None")
        opts = options if options is not None else RecallOptions()
        if not isinstance(opts, RecallOptions):
            raise InvalidRequest("options", "must be a RecallOptions")
        if as_of is not None:
            opts = replace(opts, as_of=as_of)
        opts = opts.validate()
        statuses = tuple(statuses) if statuses else DEFAULT_STATUSES
        if opts.as_of is not None and MemoryStatus.DEPRECATED not in statuses:
            statuses = (*statuses, MemoryStatus.DEPRECATED)
        kind_set = {MemoryKind(x) for x in kinds} if kinds else None
        status_set = {MemoryStatus(x) for x in statuses}
        scope_keys = [s.key for s in context.visible_scopes()]
        if not self.structure.timeline.holds(scope_keys):  # no memory here the caller may see
            self._query_vector(vector)  # checked all the same
            return []
        visible_keys = frozenset(scope_keys)
        now = self.clock.now()
        w = self.ranking
        filters_time = opts.filters_time
        key_prefix = opts.key_prefix

        def accept(node: MemoryNode) -> bool:
            if node.scope.key not in visible_keys and not node.scope.visible_to(context):
                return False
            if node.expires_at is not None and node.expires_at <= now:
                return False
            if kind_set is not None and node.kind not in kind_set:
                return False
            if node.status not in status_set:
                return False
            if key_prefix is not None and not (node.key or "").startswith(key_prefix):
                return False
            return not filters_time or opts.admits(node)

        reference = opts.reference_time or opts.as_of or now
        # the words of a time the query names are matched against event times (the time signal)
        time_words = w.time_words or not w.time
        parsed = Query.parse(query, reference, time_words=time_words) if query and w.hybrid else None
        terms = list(parsed.terms) if parsed is not None else []
        # filters the indexes do not apply themselves: look deeper so k survive them
        filtered = (
            opts.filters_time
            or kind_set is not None
            or status_set != set(DEFAULT_STATUSES)
            or key_prefix is not None
        )
        depth = _FILTER_DEPTH if filtered else 1
        kw_limit = max(k, w.keyword_candidates) * depth
        keywords = self.structure.keywords
        matches = keywords.match(terms, scope_keys, kw_limit) if terms else None
        keyword = matches.top if matches is not None else []
        weight = keywords.weight(terms, scope_keys) if keyword else 0.0
        plan = SearchPlan(
            context, k, kinds, statuses, touch and opts.touch, opts, scope_keys, now, accept, parsed, keyword,
            matches.bm25 if keyword and matches is not None else None, weight, filtered, depth,
        )  # fmt: skip
        linked = None
        if query and self._links is not None and w.graph > 0 and self.has_facts(context):
            linked = self._links(context, query, opts.as_of)
        return self._execute(plan, vector, linked)

    def _execute(self, plan: SearchPlan, vector: np.ndarray, linked: Mapping[str, float] | None) -> list[RecallHit]:
        """The search itself, once planned."""
        vec, unnamed = self._query_vectors(vector)
        w = self.ranking
        k, accept, scope_keys = plan.k, plan.accept, plan.scope_keys
        dense_limit = max(k * max(1, w.candidate_multiplier), w.dense_candidates if w.hybrid else 0) * plan.depth
        visible_count = self.structure.vectors.live_count(scope_keys)
        cosines = None
        if visible_count <= w.exact_dense_limit:  # small: exact, no index round trip
            scan = self.structure.vectors.scan(vec, scope_keys)
            dense = scan.top(visible_count if plan.filtered else dense_limit)
            cosines = scan.scores  # every visible memory's cosine is computed: candidates read it off
            if plan.filtered:
                nodes = self.nodes
                dense = [d for d in dense if d[0] in nodes and accept(nodes[d[0]])][:dense_limit]
        else:
            dense = self.index.search(
                vec, dense_limit, scope_keys=scope_keys, kinds=plan.kinds, statuses=plan.statuses
            )
        ranked = rank(
            dense, plan.keyword, self.nodes, self.structure, plan.query, w, plan.now, accept, vec,
            query_weight=plan.query_weight, limit=k, linked=linked, timed=self._timed(plan),
            keyword_scores=plan.keyword_scores, term_share=partial(self.structure.keywords.doc_share,
                                                                   scope_keys=scope_keys),
            min_relevance=plan.options.min_relevance, cosines=cosines, names=self._names(plan, unnamed),
        )  # fmt: skip
        top = []
        for hit in ranked[:k]:
            if not hit.node.scope.visible_to(plan.context):  # the second check, on what leaves the shard
                continue
            hit.node = evolve(hit.node)
            top.append(hit)
        out = list(top)
        if plan.options.neighbors or plan.options.relations:
            out += expand(top, self.nodes, self.structure, plan.options, accept)
        if plan.touch:
            self._touch([h.node.id for h in top], plan.now)
        return out

    def _query_vector(self, vector: np.ndarray) -> np.ndarray:
        """The query vector as one float32 row, or InvalidRequest."""
        return self._query_vectors(vector)[0]

    def _query_vectors(self, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The query's row and, when sent, the rows of the query without its names and of
        its names alone: one or three rows of ``dim`` floats (or as many floats in one row),
        finite, or InvalidRequest."""
        vec = np.asarray(vector, dtype=np.float32)
        if vec.ndim == 1 and vec.shape[0] == 3 * self.dim:
            vec = vec.reshape(3, self.dim)
        rows = vec[None, :] if vec.ndim == 1 else vec
        if rows.ndim != 2 or rows.shape[0] not in (1, 3) or rows.shape[1] != self.dim or not np.all(np.isfinite(rows)):
            raise InvalidRequest("vector", f"must be one or three finite vectors of dimension {self.dim}")
        return rows[0], (rows[1:] if rows.shape[0] == 3 else None)

    def _names(self, plan: SearchPlan, names: np.ndarray | None) -> NameCheck | None:
        """The check of memories that share only a name with the query, when the query
        names one, asks something besides, and its rows without and of its names were sent."""
        q = plan.query
        if names is None or q is None or not q.names or not q.asked:
            return None
        vectors = self.structure.vectors

        def cosines(ids: Sequence[str]) -> np.ndarray:
            out = np.zeros((2, len(ids)))
            for row in (0, 1):
                found = vectors.scores(names[row], ids)
                out[row] = [found.get(i, 0.0) for i in ids]
            return out

        return NameCheck(q.names, q.asked, cosines, self.structure.keywords.holds)

    def _timed(self, plan: SearchPlan) -> list[str]:
        """Memories inside the times the query names, when those times hold few enough
        (``time_candidates``) to be worth scoring one by one."""
        w = self.ranking
        if plan.query is None or not plan.query.windows or w.time_candidates <= 0 or not w.time:
            return []
        timeline = self.structure.timeline
        out: list[str] = []
        for window in plan.query.windows:
            if timeline.count(plan.scope_keys, window.start, window.end) <= w.time_candidates:
                out += timeline.between(plan.scope_keys, window.start, window.end)
        return out

    def has_facts(self, context: Context) -> bool:
        """Whether ``context`` sees any non-episodic memory here (graph links only lift facts)."""
        return self.structure.has_facts([s.key for s in context.visible_scopes()])

    def pinned(self, context: Context) -> list[MemoryNode]:
        """The pinned memories ``context`` (checked) sees: most important first."""
        now = self.clock.now()
        out = []
        for memory_id in self.structure.pinned_ids():
            node = self.nodes.get(memory_id)
            if node is None or not node.scope.visible_to(context):
                continue
            if node.expires_at is not None and node.expires_at <= now:
                continue
            if node.status not in DEFAULT_STATUSES:
                continue
            out.append(evolve(node))
        out.sort(key=lambda n: (-n.importance, -n.confidence, n.created_at, n.id))
        return out
