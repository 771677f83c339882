"""The shard's write path: new memories (with duplicate and contradiction
detection), compare-and-set updates, deletes, and the atomic commit with events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memorybus.conflicts import is_contradiction
from memorybus.errors import InvalidMemory, InvalidRequest, MemoryNotFound, ScopeViolation, VersionConflict
from memorybus.events import Event, EventKind
from memorybus.model import MemoryKind, MemoryNode, MemoryStatus, evolve
from memorybus.scopes import Context
from memorybus.shard.state import _content_hash, _ShardState
from memorybus.storage.base import WriteBatch

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
        "thread",
        "position",
        "speaker",
    }
)


#: the ``source`` of broadcast copies; only :meth:`put_broadcast` writes it, so a node
#: carrying it at a copy's id is the copy (nobody can plant one)
BROADCAST_SOURCE = "broadcast:"


def check_source(source: object) -> None:
    """Refuse a caller-written ``source`` in the namespace reserved for broadcast copies."""
    if isinstance(source, str) and source.startswith(BROADCAST_SOURCE):
        raise InvalidMemory("source", f"{BROADCAST_SOURCE!r} is reserved for broadcast copies")


class WritesMixin(_ShardState):
    # ------------------------------------------------------------------ writes
    def _event(self, kind: EventKind, node: MemoryNode, context: Context, now: float, **data: Any) -> Event:
        return Event(kind, node.without_embedding(), now, context.agent or context.user, 0, data)

    def _same_event(self, node: MemoryNode, other: MemoryNode) -> bool:
        """Whether two episodic memories with the same words in the same scope record one
        event. Both must be in the same thread: the scope (it carries the session) and,
        when declared, the same conversation thread, position and speaker (turns at two
        positions of a thread are two turns). Then: the same event time, or both undated
        (event time = write time) and written within ``BusPolicy.repeat_window_seconds``
        of each other (an accidental repeat, such as a job run twice).
        """
        if (node.thread, node.position, node.speaker) != (other.thread, other.position, other.speaker):
            return False
        if other.valid_from == node.valid_from:
            return True
        undated = node.valid_from == node.created_at and other.valid_from == other.created_at
        return undated and abs(node.created_at - other.created_at) <= self.policy.repeat_window_seconds

    def _duplicate_of(self, node: MemoryNode) -> MemoryNode | None:
        """An existing memory this new one duplicates, in the same scope (the shard owns
        the scope, so this check cannot race with another writer)."""
        for other_id in self._hashes.get((node.scope.key, _content_hash(node)), ()):
            other = self._nodes.get(other_id)
            if other is None or other.kind is not node.kind:
                continue
            if node.kind is MemoryKind.EPISODIC and not self._same_event(node, other):
                continue  # the same words said at another time or turn are another event
            if other.status in (MemoryStatus.ACTIVE, MemoryStatus.CONSOLIDATED):
                return other
        if node.kind in (MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL) and node.embedding is not None:
            for other_id, cosine in self.index.search(
                node.embedding,
                1,
                scope_keys=[node.scope.key],
                kinds=[node.kind],
                statuses=[MemoryStatus.ACTIVE],
            ):
                other = self._nodes.get(other_id)
                if cosine >= self.policy.near_duplicate and other is not None:
                    if self.detect_contradictions and is_contradiction(node, other, self.judge):
                        return None  # nearly the same words, a different claim: keep both
                    return other
        return None

    def _contradicted(self, node: MemoryNode) -> list[str]:
        """Similar facts in the same scope that this one contradicts.

        Only semantic and procedural memories (statements of fact) are checked:
        episodic memories record events, and two events are not a contradiction.
        """
        if node.embedding is None or node.kind not in (MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL):
            return []
        found = []
        for other_id, cosine in self.index.search(
            node.embedding, 5, scope_keys=[node.scope.key], statuses=[MemoryStatus.ACTIVE]
        ):
            other = self._nodes.get(other_id)
            if other is None or cosine < self.policy.contradiction or other.id == node.id:
                continue
            if other.kind not in (MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL):
                continue
            if other.key and node.key and other.key == node.key:
                continue  # keyed facts are resolved by assert_fact, not flagged
            if is_contradiction(node, other, self.judge):
                found.append(other_id)
        return found

    def put_many(
        self,
        context: Context,
        nodes: Sequence[MemoryNode],
        vectors: np.ndarray | None = None,
        rows: Sequence[int] | None = None,
        *,
        event: EventKind = EventKind.REMEMBERED,
        op: str | None = None,
    ) -> list[MemoryNode]:
        """Store new memories atomically (all or none); returns them as stored.

        ``vectors[rows[i]]`` (or ``vectors[i]``) is the embedding of ``nodes[i]``
        when given. A node whose id is already stored with the same record is
        returned as stored (retries are idempotent). An exact duplicate of a stored
        memory (same scope, kind and content; for episodic memories also the same
        time, thread, position and speaker) and a near duplicate of a semantic or procedural one are not stored
        again: the existing memory is returned, reinforced (one more access, and the
        higher of the two confidences). An episodic repeat counts as a duplicate when
        it has the same event time, or when both are undated and were written within
        ``BusPolicy.repeat_window_seconds``. A memory that contradicts a similar one in
        its scope is stored with ``contradicts`` links both ways.
        ``op``: the operation id (see :mod:`memorybus.shard.ops`): a re-execution
        returns the first answer.
        """
        context = self._check_context(context)
        if vectors is not None:
            vectors = np.asarray(vectors)
            rows = list(range(len(nodes))) if rows is None else list(rows)
            if len(rows) != len(nodes) or (rows and max(rows) >= len(vectors)):
                raise InvalidRequest("vectors", "do not match the nodes")
        vectors, rows = self._recall.contextualize(nodes, vectors, rows)
        now = self.clock.now()
        prepared = [
            self._prepare_new(n, None if vectors is None or rows is None else vectors[rows[i]], context, now)
            for i, n in enumerate(nodes)
        ]
        for n in prepared:
            check_source(n.source)
        ids = [n.id for n in prepared]
        if len(set(ids)) != len(ids):
            raise InvalidRequest("nodes", "duplicate ids in one batch")
        call = self._op_call("put_many", context, op)
        fresh: list[MemoryNode] = []
        result: list[MemoryNode | None] = [None] * len(prepared)
        reinforce: dict[str, list[float]] = {}  # duplicate's id -> confidences of its repeats
        batch_hashes: dict[tuple[str, str], MemoryNode] = {}
        for i, n in enumerate(prepared):
            existing = self._nodes.get(n.id)
            if existing is not None:
                if not existing.scope.visible_to(context):
                    raise ScopeViolation("write")  # the id is taken: say nothing of by whom, or its version
                if existing.content_equal(evolve(n, created_at=existing.created_at, valid_from=existing.valid_from)):
                    result[i] = evolve(existing)  # a retried write: already durable
                    continue
                done, answer = self._recorded(call)  # a re-execution, the memory changed since
                if done:
                    return answer
                raise VersionConflict(n.id, 0, existing.version)
            dup = self._duplicate_of(n) if self.dedupe else None
            in_batch = batch_hashes.get((n.scope.key, _content_hash(n)))
            if (
                dup is None
                and self.dedupe
                and in_batch is not None
                and in_batch.kind is n.kind
                and (n.kind is not MemoryKind.EPISODIC or self._same_event(n, in_batch))
            ):
                dup = in_batch
            if dup is not None:
                result[i] = dup  # resolved to its stored form below
                reinforce.setdefault(dup.id, []).append(n.confidence)
                continue
            batch_hashes[(n.scope.key, _content_hash(n))] = n
            fresh.append(n)
        fresh, updates, repeated = self._reinforced(fresh, reinforce, now)
        raised = set(updates)
        linked_by: dict[str, str] = {}
        # contradiction links, both ways (the old side is a versioned update)
        for i, n in enumerate(fresh):
            others = self._contradicted(n) if self.detect_contradictions else []
            if not others:
                continue
            fresh[i] = evolve(n, contradicts=tuple(dict.fromkeys((*n.contradicts, *others))))
            for other_id in others:
                base = updates[other_id][0] if other_id in updates else self.store.get(other_id)
                if base is None:
                    continue
                expected = updates[other_id][1] if other_id in updates else base.version
                linked = evolve(base, contradicts=(*base.contradicts, n.id), version=expected + 1)
                updates[other_id] = (linked, expected)
                linked_by[other_id] = n.id
        events = [self._event(event, n, context, now) for n in fresh]
        for u, _ in updates.values():
            why: dict[str, Any] = {"contradicted_by": linked_by[u.id]} if u.id in linked_by else {}
            if u.id in raised:
                why["reinforced"] = True
            events.append(self._event(EventKind.UPDATED, u, context, now, **why))
        final = {n.id: n for n in fresh}
        final.update({u.id: u for u, _ in updates.values()})
        out: list[MemoryNode] = []
        for i, n in enumerate(prepared):
            r = result[i]
            node = final[n.id] if r is None else final.get(r.id) or self._nodes.get(r.id, r)
            out.append(evolve(node.without_embedding()))
        if not fresh and not updates:
            if repeated:
                self._touch(repeated, now)  # a repeat is one more access of what it repeats
            return out

        def apply() -> None:
            self.index.upsert(fresh)
            for n in fresh:
                self._remember_local(n)
                if n.kind is MemoryKind.EPISODIC:
                    self._importance_since[n.scope.key] = self._importance_since.get(n.scope.key, 0.0) + n.importance
            for u, _ in updates.values():
                self._remember_local(u)
            if repeated:
                self._touch(repeated, now)

        return self._commit_op(call, WriteBatch(puts=fresh, updates=list(updates.values())), events, out, apply)

    def check_puts(self, context: Context, nodes: Sequence[MemoryNode]) -> int:
        """Check, writing nothing, that :meth:`put_many` would accept ``nodes`` as far
        as their ids go: each is new here or already stored with the same record.
        Raises what put_many would (VersionConflict, InvalidMemory, ScopeViolation);
        returns how many are new. The client runs it on every shard of a batch
        before any shard writes."""
        context = self._check_context(context)
        new = 0
        for given in nodes:
            if not isinstance(given, MemoryNode):
                raise InvalidMemory("node", f"must be a MemoryNode, got {type(given).__name__}")
            if given.version != 0:
                raise InvalidMemory("version", "a new memory must have version 0")
            node = self._validate(given).stamped(self.clock.now())
            self._visible(node, context, "write")
            self._check_id(node)
            check_source(node.source)
            existing = self._nodes.get(node.id)
            if existing is None:
                new += 1
            elif not existing.scope.visible_to(context):
                raise ScopeViolation("write")  # the id is taken: say nothing of by whom, or its version
            elif not existing.content_equal(evolve(node, created_at=existing.created_at,
                                                   valid_from=existing.valid_from)):
                raise VersionConflict(node.id, 0, existing.version)
        return new

    def _reinforced(
        self, fresh: list[MemoryNode], reinforce: dict[str, list[float]], now: float
    ) -> tuple[list[MemoryNode], dict[str, tuple[MemoryNode, int]], list[str]]:
        """Apply repeats: a repeated new memory of this batch takes the higher confidence
        and one access per repeat; a stored one gets a versioned update when its
        confidence rises. Returns the batch, the updates, and the stored ids repeated
        (their accesses are counted once committed)."""
        updates: dict[str, tuple[MemoryNode, int]] = {}
        repeated: list[str] = []
        by_id = {n.id: i for i, n in enumerate(fresh)}
        for memory_id, confidences in reinforce.items():
            if memory_id in by_id:
                i = by_id[memory_id]
                n = fresh[i]
                fresh[i] = evolve(n, confidence=max(n.confidence, *confidences),
                                  access_count=n.access_count + len(confidences), last_accessed=now)
                continue
            repeated.extend([memory_id] * len(confidences))
            current = self._nodes.get(memory_id)
            if current is None or max(confidences) <= current.confidence:
                continue
            base = self.store.get(memory_id)
            if base is not None:
                raised = evolve(base, confidence=max(confidences), version=base.version + 1)
                updates[memory_id] = (raised, base.version)
        return fresh, updates, repeated

    def _remember_local(self, node: MemoryNode) -> None:
        """Mirror a committed node in the cache and the content-hash map."""
        old = self._nodes.get(node.id)
        if old is not None:
            self._unhash(old)
        self._nodes[node.id] = node.without_embedding()
        self._hashes.setdefault((node.scope.key, _content_hash(node)), set()).add(node.id)
        self._recall.on_indexed(node)
        if self.graph_policy.hops > 0:
            self.graph.add_memory(node)

    def _unhash(self, node: MemoryNode) -> None:
        """Drop ``node`` from the content-hash map (and its entry once empty: a memory
        rewritten many times leaves nothing behind)."""
        key = (node.scope.key, _content_hash(node))
        ids = self._hashes.get(key)
        if ids is not None:
            ids.discard(node.id)
            if not ids:
                del self._hashes[key]

    def _forget_local(self, memory_id: str) -> None:
        old = self._nodes.pop(memory_id, None)
        if old is not None:
            self._unhash(old)
        self._touches.pop(memory_id, None)
        self._recall.on_removed(memory_id)
        if self.graph_policy.hops > 0:
            self.graph.remove_source(memory_id)

    def update(
        self,
        context: Context,
        memory_id: str,
        expected_version: int,
        changes: dict[str, Any],
        vector: np.ndarray | None = None,
        *,
        op: str | None = None,
    ) -> MemoryNode:
        """Compare-and-set: apply ``changes`` if the stored version is ``expected_version``.

        Changing ``content`` requires its new ``vector``. Raises VersionConflict,
        MemoryNotFound, ScopeViolation, InvalidMemory/InvalidRequest. One winner per
        version: a second update at the same ``expected_version`` raises
        VersionConflict even with identical changes, unless it is a re-execution of
        the winner (same ``op``), which returns the winner's answer.
        """
        context = self._check_context(context)
        if isinstance(expected_version, bool) or not isinstance(expected_version, int):
            raise InvalidRequest("expected_version", "must be an int")
        if not isinstance(changes, dict) or not changes:
            raise InvalidRequest("changes", "must be a non-empty dict")
        bad = set(changes) - UPDATABLE
        if bad:
            raise InvalidRequest("changes", f"cannot update {sorted(bad)}")
        check_source(changes.get("source"))
        call = self._op_call("update", context, op)
        current = self._nodes.get(memory_id)
        if current is None:
            done, answer = self._recorded(call)
            if done:
                return answer
            raise MemoryNotFound(memory_id)
        self._visible(current, context, "update")
        if "content" in changes and changes["content"] != current.content and vector is None:
            raise InvalidRequest("vector", "changing content needs the new content's embedding")
        base = self.store.get(memory_id)
        if base is None:
            raise MemoryNotFound(memory_id)
        new = evolve(base, **changes, version=expected_version + 1)
        if vector is not None:
            new = evolve(new, embedding=vector)
        new = self._validate(new)
        if base.version != expected_version:
            done, answer = self._recorded(call)  # a re-execution of the winner answers as it did
            if done:
                return answer
            raise VersionConflict(memory_id, expected_version, base.version)
        now = self.clock.now()
        kind = EventKind.UPDATED
        if new.status is not base.status and new.status is MemoryStatus.ARCHIVED:
            kind = EventKind.ARCHIVED

        def apply() -> None:
            self.index.upsert([new])
            self._remember_local(new)

        return self._commit_op(
            call,
            WriteBatch(updates=[(new, expected_version)]),
            [self._event(kind, new, context, now, fields=sorted(changes))],
            new.without_embedding(),
            apply,
        )

    def delete(
        self, context: Context, memory_id: str, expected_version: int | None = None, *, op: str | None = None
    ) -> bool:
        """Forget a memory (hard delete from store and index). False if already gone
        (a re-execution of a delete that succeeded, same ``op``, answers True)."""
        context = self._check_context(context)
        if expected_version is not None and (
            isinstance(expected_version, bool) or not isinstance(expected_version, int)
        ):
            raise InvalidRequest("expected_version", "must be an int or None")
        call = self._op_call("delete", context, op)
        current = self._nodes.get(memory_id)
        if current is None:
            return self._recorded(call)[0]  # gone: by this very call (re-executed), or not
        self._visible(current, context, "forget")

        def apply() -> None:
            self.index.delete([memory_id])
            self._forget_local(memory_id)

        return self._commit_op(
            call,
            WriteBatch(deletes=[(memory_id, expected_version)]),
            [self._event(EventKind.FORGOTTEN, current, context, self.clock.now())],
            True,
            apply,
        )
