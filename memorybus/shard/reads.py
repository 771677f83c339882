"""Reads on the shard: one memory, hybrid recall, pinned memories, listing, counts.

Visibility is enforced here, on what the caller may see, and again on what leaves
(recall: see :meth:`memorybus.retrieval.reader.RecallReader.search`). Reads change nothing but access statistics (recall
counts an access of what it returns) and the audit trail's buffer of reads
(:mod:`.auditing`): who read which ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memorybus import views
from memorybus.errors import InvalidRequest, MemoryNotFound
from memorybus.graph import entities as graph_entities
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus, evolve
from memorybus.retrieval import DEFAULT_STATUSES
from memorybus.retrieval.hits import RecallHit
from memorybus.retrieval.reader import RecallReader
from memorybus.scopes import Context, Scope
from memorybus.shard.job import Job
from memorybus.validation import is_int

if TYPE_CHECKING:
    from memorybus.shard.core import ShardCore


class Reads(Job):
    def __init__(self, core: ShardCore) -> None:
        super().__init__(core)
        #: the read path of recall, over what the core hands it (not the core itself)
        self.recall = RecallReader(core.nodes, core.index, core.index.structure, ranking=core.ranking,
                                   dim=core.dim, clock=core.clock, touch=core.touch, check=core.check_context,
                                   links=self._graph_links)

    def get(self, context: Context, memory_id: str, *, with_embedding: bool = False) -> MemoryNode:
        context = self.core.check_context(context)
        node = self.core.nodes.get(memory_id)
        if node is None:
            raise MemoryNotFound(memory_id)
        self.core.visible(node, context, "read")
        self.core.noted(context, "get", [node])
        if with_embedding:
            stored = self.core.store.get(memory_id)
            if stored is None:
                raise MemoryNotFound(memory_id)
            return stored
        return evolve(node)

    def search(self, context: Context, vector: np.ndarray, k: int = 10, **kwargs: Any) -> list[RecallHit]:
        """Recall (:meth:`RecallReader.search`), noted in the audit trail with the ids it returns."""
        hits = self.recall.search(context, vector, k, **kwargs)
        self.core.noted(context, "recall", [h.node for h in hits])
        return hits

    def _graph_links(self, context: Context, query: str, as_of: float | None) -> dict[str, float]:
        """Memories linked to the query's entities by graph edges valid at the query time."""
        if self.core.graph_policy.hops <= 0:
            return {}
        seeds = list(dict.fromkeys([*graph_entities(query), *self.core.graph.match_entities(query)]))
        if not seeds:
            return {}
        at = self.core.clock.now() if as_of is None else as_of
        scope_keys = [s.key for s in context.visible_scopes()]
        return self.core.graph.memories_for(seeds, at, scope_keys, hops=self.core.graph_policy.hops,
                                       fanout=self.core.graph_policy.fanout)

    def pinned(self, context: Context) -> list[MemoryNode]:
        """The pinned (core) memories visible to ``context``: most important first."""
        found = self.recall.pinned(self.core.check_context(context))
        self.core.noted(context, "pinned", found)
        return found

    def list_memories(
        self,
        context: Context | None,
        *,
        scope_key: str | None = None,
        key_prefix: str | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        statuses: Sequence[MemoryStatus] | None = None,
        limit: int = 100,
        after: tuple[float, str] | None = None,
        within: Scope | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[MemoryNode]:
        """The memories here that ``context`` may see, in ``(created_at, id)`` order: at
        most ``limit`` of them, starting after the position ``after``. Filters: one exact
        scope, scopes ``within`` a wider one, a key prefix, kinds, statuses (default active
        and consolidated), ``since <= created_at < until``. Expired memories are left
        out, as recall leaves them out. Read-only (no access counted). ``context=None``
        is the operator's view: every memory, whatever its scope.

        Cost: one pass over this shard's in-memory mirror of its records.
        """
        if context is not None:
            context = self.core.check_context(context)
        if not is_int(limit, 1, 10_000):
            raise InvalidRequest("limit", "must be an int between 1 and 10000")
        kind_set = frozenset(MemoryKind(k) for k in kinds) if kinds else None
        status_set = frozenset(MemoryStatus(s) for s in statuses) if statuses else frozenset(DEFAULT_STATUSES)
        visible = None if context is None else frozenset(s.key for s in context.visible_scopes())
        if scope_key is not None:
            visible = frozenset({scope_key}) if visible is None else visible & {scope_key}
        found = views.select(self.core.nodes.values(), self.core.clock.now(), visible=visible,
                             key_prefix=key_prefix, kinds=kind_set, statuses=status_set, after=after,
                             within=within, since=since, until=until)  # fmt: skip
        out = [evolve(n) for n in found[:limit] if context is None or n.scope.visible_to(context)]
        self.core.noted(context, "list", out)
        return out

    def count(self) -> int:
        self.core.reading()
        return len(self.core.nodes)
