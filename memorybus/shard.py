"""The memory shard: the plain class a ShardActor wraps.

A shard owns the scopes routed to it. It writes through to its durable
:class:`~memorybus.storage.Store` first and only then to its derived vector
index; it enforces scope visibility on every read and write; it ranks recall by
relevance and salience and records accesses.

Guarantees:
- ``put_many``, ``update`` and ``delete`` validate everything before writing;
  a rejected call changes nothing (store, index and cache).
- A call returns only after its store commit is durable.
- The index and cache are rebuilt from the store when the shard starts.
- Access statistics (counts, last access) are flushed to the store at most
  ``touch_flush_seconds`` after a recall, or on :meth:`flush`; a crash may lose
  that window of access statistics, never a memory.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from memorybus.clock import Clock, SystemClock
from memorybus.config import RankingWeights
from memorybus.errors import (
    InvalidMemory,
    InvalidRequest,
    MemoryNotFound,
    ScopeViolation,
    VersionConflict,
)
from memorybus.model import DEFAULT_MAX_CONTENT_CHARS, MemoryKind, MemoryNode, MemoryStatus
from memorybus.retrieval import DEFAULT_STATUSES, RecallHit, rank_score
from memorybus.scopes import Context
from memorybus.storage.base import Store, WriteBatch
from memorybus.storage.vectors import VectorIndex

#: Fields a caller may change with :meth:`Shard.update`.
UPDATABLE = frozenset(
    {
        "content",
        "structured",
        "kind",
        "status",
        "confidence",
        "importance",
        "decay_rate",
        "valid_from",
        "valid_to",
        "expires_at",
        "parents",
        "children",
        "related",
        "contradicts",
        "source",
        "source_ids",
        "tags",
    }
)


class Shard:
    def __init__(
        self,
        name: str,
        store: Store,
        index: VectorIndex,
        *,
        dim: int,
        clock: Clock | None = None,
        ranking: RankingWeights | None = None,
        max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
        touch_flush_seconds: float = 1.0,
    ) -> None:
        self.name = name
        self.store = store
        self.index = index
        self.dim = dim
        self.clock = clock or SystemClock()
        self.ranking = ranking or RankingWeights()
        self.max_content_chars = max_content_chars
        self.touch_flush_seconds = touch_flush_seconds
        self._nodes: dict[str, MemoryNode] = {}
        self._touches: dict[str, tuple[int, float]] = {}
        self._last_flush = time.monotonic()
        self.rebuild()

    # ----------------------------------------------------------------- startup
    def rebuild(self) -> int:
        """Rebuild cache and vector index from the store; returns the record count."""
        self.index.reset()
        self._nodes.clear()
        batch: list[MemoryNode] = []
        for node in self.store.iter_all():
            if node.embedding is not None:
                batch.append(node)
            self._nodes[node.id] = node.without_embedding()
            if len(batch) >= 1000:
                self.index.upsert(batch)
                batch = []
        self.index.upsert(batch)
        return len(self._nodes)

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _check_context(context: object) -> Context:
        if not isinstance(context, Context):
            raise InvalidRequest("context", f"must be a Context, got {type(context).__name__}")
        return context

    def _visible(self, node: MemoryNode, context: Context, action: str) -> None:
        if not node.scope.visible_to(context):
            raise ScopeViolation(action, str(node.scope), str(context))

    def _prepare_new(
        self, node: MemoryNode, vector: np.ndarray | None, context: Context, now: float
    ) -> MemoryNode:
        if not isinstance(node, MemoryNode):
            raise InvalidMemory("node", f"must be a MemoryNode, got {type(node).__name__}")
        if vector is not None:
            node = replace(node, embedding=vector)
        if node.embedding is None:
            raise InvalidMemory("embedding", "is required to store a memory")
        if node.version != 0:
            raise InvalidMemory("version", "a new memory must have version 0")
        node = node.validate(dim=self.dim, max_content_chars=self.max_content_chars)
        self._visible(node, context, "write")
        return replace(node.stamped(now), version=1)

    # ------------------------------------------------------------------ writes
    def put_many(
        self,
        context: Context,
        nodes: Sequence[MemoryNode],
        vectors: np.ndarray | None = None,
        rows: Sequence[int] | None = None,
    ) -> list[MemoryNode]:
        """Store new memories atomically (all or none); returns them as stored.

        ``vectors[rows[i]]`` (or ``vectors[i]``) is the embedding of ``nodes[i]``
        when given. A node whose id is already stored with the same record is
        returned as stored (retries are idempotent).
        """
        context = self._check_context(context)
        if vectors is not None:
            vectors = np.asarray(vectors)
            rows = list(range(len(nodes))) if rows is None else list(rows)
            if len(rows) != len(nodes) or (rows and max(rows) >= len(vectors)):
                raise InvalidRequest("vectors", "do not match the nodes")
        now = self.clock.now()
        prepared = [
            self._prepare_new(n, None if vectors is None or rows is None else vectors[rows[i]], context, now)
            for i, n in enumerate(nodes)
        ]
        ids = [n.id for n in prepared]
        if len(set(ids)) != len(ids):
            raise InvalidRequest("nodes", "duplicate ids in one batch")
        fresh: list[MemoryNode] = []
        out: list[MemoryNode] = []
        for n in prepared:
            existing = self._nodes.get(n.id)
            if existing is None:
                fresh.append(n)
                out.append(n.without_embedding())
            elif existing.content_equal(
                replace(n, created_at=existing.created_at, valid_from=existing.valid_from)
            ):
                out.append(existing)  # a retried write: already durable
            else:
                raise VersionConflict(n.id, 0, existing.version)
        self.store.commit(WriteBatch(puts=fresh))
        self.index.upsert(fresh)
        for n in fresh:
            self._nodes[n.id] = n.without_embedding()
        return out

    def update(
        self,
        context: Context,
        memory_id: str,
        expected_version: int,
        changes: dict[str, Any],
        vector: np.ndarray | None = None,
    ) -> MemoryNode:
        """Compare-and-set: apply ``changes`` if the stored version is ``expected_version``.

        Changing ``content`` requires its new ``vector``. Raises VersionConflict,
        MemoryNotFound, ScopeViolation, InvalidMemory/InvalidRequest.
        """
        context = self._check_context(context)
        if isinstance(expected_version, bool) or not isinstance(expected_version, int):
            raise InvalidRequest("expected_version", "must be an int")
        if not isinstance(changes, dict) or not changes:
            raise InvalidRequest("changes", "must be a non-empty dict")
        bad = set(changes) - UPDATABLE
        if bad:
            raise InvalidRequest("changes", f"cannot update {sorted(bad)}")
        current = self._nodes.get(memory_id)
        if current is None:
            raise MemoryNotFound(memory_id)
        self._visible(current, context, "update")
        if "content" in changes and changes["content"] != current.content and vector is None:
            raise InvalidRequest("vector", "changing content needs the new content's embedding")
        base = self.store.get(memory_id)
        if base is None:
            raise MemoryNotFound(memory_id)
        new = replace(base, **changes, version=expected_version + 1)
        if vector is not None:
            new = replace(new, embedding=vector)
        new = new.validate(dim=self.dim, max_content_chars=self.max_content_chars)
        if base.version != expected_version:
            if base.version == expected_version + 1 and base.content_equal(new):
                return base.without_embedding()  # a retried update that already committed
            raise VersionConflict(memory_id, expected_version, base.version)
        self.store.commit(WriteBatch(updates=[(new, expected_version)]))
        self.index.upsert([new])
        self._nodes[memory_id] = new.without_embedding()
        return replace(self._nodes[memory_id])

    def delete(self, context: Context, memory_id: str, expected_version: int | None = None) -> bool:
        """Forget a memory (hard delete from store and index). False if already gone."""
        context = self._check_context(context)
        if expected_version is not None and (
            isinstance(expected_version, bool) or not isinstance(expected_version, int)
        ):
            raise InvalidRequest("expected_version", "must be an int or None")
        current = self._nodes.get(memory_id)
        if current is None:
            return False
        self._visible(current, context, "forget")
        self.store.commit(WriteBatch(deletes=[(memory_id, expected_version)]))
        self.index.delete([memory_id])
        self._nodes.pop(memory_id, None)
        self._touches.pop(memory_id, None)
        return True

    # ------------------------------------------------------------------- reads
    def get(self, context: Context, memory_id: str, *, with_embedding: bool = False) -> MemoryNode:
        context = self._check_context(context)
        node = self._nodes.get(memory_id)
        if node is None:
            raise MemoryNotFound(memory_id)
        self._visible(node, context, "read")
        if with_embedding:
            stored = self.store.get(memory_id)
            if stored is None:
                raise MemoryNotFound(memory_id)
            return stored
        return replace(node)

    def search(
        self,
        context: Context,
        vector: np.ndarray,
        k: int = 10,
        *,
        kinds: Sequence[MemoryKind] | None = None,
        statuses: Sequence[MemoryStatus] | None = None,
        touch: bool = True,
    ) -> list[RecallHit]:
        """Top ``k`` memories visible to ``context``, ranked by relevance and salience.

        Visibility is enforced here twice: the index is filtered to the
        context's visible scope keys, and every candidate is checked again.
        """
        context = self._check_context(context)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
            raise InvalidRequest("k", "must be an int between 1 and 1000")
        vec = np.asarray(vector, dtype=np.float32)
        if vec.ndim == 2 and vec.shape[0] == 1:
            vec = vec[0]
        if vec.shape != (self.dim,) or not np.all(np.isfinite(vec)):
            raise InvalidRequest("vector", f"must be a finite vector of dimension {self.dim}")
        statuses = tuple(statuses) if statuses else DEFAULT_STATUSES
        scope_keys = [s.key for s in context.visible_scopes()]
        limit = k * max(1, self.ranking.candidate_multiplier)
        now = self.clock.now()
        hits: list[RecallHit] = []
        for memory_id, relevance in self.index.search(
            vec, limit, scope_keys=scope_keys, kinds=kinds, statuses=statuses
        ):
            node = self._nodes.get(memory_id)
            if node is None or not node.scope.visible_to(context):
                continue
            if node.expires_at is not None and node.expires_at <= now:
                continue
            score = rank_score(node, relevance, now, self.ranking)
            hits.append(RecallHit(replace(node), score, relevance))
        hits.sort(key=lambda h: (-h.score, h.node.id))
        hits = hits[:k]
        if touch:
            self._touch([h.node.id for h in hits], now)
        return hits

    def list_scope(self, context: Context, scope_key: str) -> list[MemoryNode]:
        context = self._check_context(context)
        return [n for n in self._nodes.values() if n.scope.key == scope_key and n.scope.visible_to(context)]

    def count(self) -> int:
        return len(self._nodes)

    # ------------------------------------------------------------------ access
    def _touch(self, ids: Sequence[str], now: float) -> None:
        for memory_id in ids:
            node = self._nodes[memory_id]
            node.access_count += 1
            node.last_accessed = max(node.last_accessed, now)
            count, _ = self._touches.get(memory_id, (0, now))
            self._touches[memory_id] = (count + 1, now)
        if time.monotonic() - self._last_flush >= self.touch_flush_seconds:
            self.flush()

    def flush(self) -> int:
        """Write pending access statistics to the store; returns how many nodes."""
        pending, self._touches = self._touches, {}
        self._last_flush = time.monotonic()
        if pending:
            self.store.touch(pending)
        return len(pending)

    def close(self) -> None:
        self.flush()
        self.index.close()
        self.store.close()
