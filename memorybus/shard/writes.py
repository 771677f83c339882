"""The shard's write path: new memories (with duplicate and contradiction
detection), compare-and-set updates, deletes, and the atomic commit with events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memorybus.errors import InvalidMemory, InvalidRequest, MemoryNotFound, ScopeViolation, VersionConflict
from memorybus.memory.events import EventKind, bare
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus, evolve
from memorybus.scopes import Context
from memorybus.shard.job import Job
from memorybus.shard.records import content_hash
from memorybus.shard.similar import contradicted, duplicate_of, same_event
from memorybus.storage.base import WriteBatch
from memorybus.validation import is_int

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


class Writes(Job):
    # ------------------------------------------------------- what is embedded
    def embedding_texts(self, context: Context, nodes: Sequence[MemoryNode]) -> list[str]:
        """The texts this shard embeds for new memories ``nodes`` (see
        :mod:`memorybus.shard.texts`), one per node; the vectors of these texts are
        what :meth:`put_many` and the fact calls take. Raises what they would for a bad
        context or a node that is not a valid MemoryNode (before any model work)."""
        self.core.check_context(context)
        return self.core.texts.texts([self.core.validate(n) if isinstance(n, MemoryNode) else n for n in nodes])

    def update_texts(self, context: Context, memory_id: str, changes: dict[str, Any]) -> list[str]:
        """The text this shard embeds for :meth:`update` ``changes`` (one, or none when
        they keep the content, or the memory is not there for ``context``: the update
        then says why)."""
        self.core.check_context(context)
        current = self.core.nodes.get(memory_id)
        if not isinstance(changes, dict) or "content" not in changes or current is None \
                or not current.scope.visible_to(context) or changes["content"] == current.content:
            return []
        return self.core.texts.texts([self.core.validate(evolve(current, content=changes["content"]))])

    # ------------------------------------------------------------------ writes
    def put_many(
        self,
        context: Context,
        nodes: Sequence[MemoryNode],
        vectors: np.ndarray | None = None,
        *,
        event: EventKind = EventKind.REMEMBERED,
        op: str | None = None,
    ) -> list[MemoryNode]:
        """Store new memories atomically (all or none); returns them as stored.

        ``vectors[i]`` is the embedding of ``nodes[i]``: of its text as
        :meth:`embedding_texts` decides it (the actor embeds them). A node whose id is
        already stored with the same record is returned as stored (retries are
        idempotent). An exact duplicate of a stored memory (same scope, kind and
        content; for episodic memories also the same time, thread, position and
        speaker) and a near duplicate of a semantic or procedural one are not stored
        again: the existing memory is returned, reinforced (one more access, and the
        higher of the two confidences). An episodic repeat counts as a duplicate when
        it has the same event time, or when both are undated and were written within
        ``BusPolicy.repeat_window_seconds``. A memory that contradicts a similar one in
        its scope is stored with ``contradicts`` links both ways.
        ``op``: the operation id (see :mod:`memorybus.shard.ops`): a re-execution
        returns the first answer.
        """
        context = self.core.check_context(context)
        if vectors is not None:
            vectors = np.asarray(vectors)
            if vectors.ndim != 2 or len(vectors) != len(nodes):
                raise InvalidRequest("vectors", "do not match the nodes")
        now = self.core.clock.now()
        prepared = [
            self.core.prepare_new(n, None if vectors is None else vectors[i], context, now)
            for i, n in enumerate(nodes)
        ]
        if prepared:  # each with its checked vector now; a memory of a thread takes in its predecessor's
            mixed = self.core.contextualize(prepared, np.stack([np.asarray(n.embedding) for n in prepared]))
            prepared = [evolve(n, embedding=v) for n, v in zip(prepared, mixed, strict=True)]
        for n in prepared:
            check_source(n.source)
        ids = [n.id for n in prepared]
        if len(set(ids)) != len(ids):
            raise InvalidRequest("nodes", "duplicate ids in one batch")
        call = self.core.op_call("put_many", context, op)
        fresh: list[MemoryNode] = []
        result: list[MemoryNode | None] = [None] * len(prepared)
        reinforce: dict[str, list[float]] = {}  # duplicate's id -> confidences of its repeats
        batch_hashes: dict[tuple[str, str], MemoryNode] = {}
        for i, n in enumerate(prepared):
            existing = self.core.nodes.get(n.id)
            if existing is not None:
                if not existing.scope.visible_to(context):
                    raise ScopeViolation("write")  # the id is taken: say nothing of by whom, or its version
                if existing.content_equal(evolve(n, created_at=existing.created_at, valid_from=existing.valid_from)):
                    result[i] = evolve(existing)  # a retried write: already durable
                    continue
                done, answer = self.core.recorded(call)  # a re-execution, the memory changed since
                if done:
                    return answer
                raise VersionConflict(n.id, 0, existing.version)
            dup = duplicate_of(self.core, n) if self.core.dedupe else None
            in_batch = batch_hashes.get((n.scope.key, content_hash(n)))
            if (
                dup is None
                and self.core.dedupe
                and in_batch is not None
                and in_batch.kind is n.kind
                and (n.kind is not MemoryKind.EPISODIC or same_event(self.core.policy, n, in_batch))
            ):
                dup = in_batch
            if dup is not None:
                result[i] = dup  # resolved to its stored form below
                reinforce.setdefault(dup.id, []).append(n.confidence)
                continue
            batch_hashes[(n.scope.key, content_hash(n))] = n
            fresh.append(n)
        fresh, updates, repeated = self._reinforced(fresh, reinforce, now)
        raised = set(updates)
        linked_by: dict[str, str] = {}
        # contradiction links, both ways (the old side is a versioned update)
        for i, n in enumerate(fresh):
            others = contradicted(self.core, n)
            if not others:
                continue
            fresh[i] = evolve(n, contradicts=tuple(dict.fromkeys((*n.contradicts, *others))))
            for other_id in others:
                base = updates[other_id][0] if other_id in updates else self.core.store.get(other_id)
                if base is None:
                    continue
                expected = updates[other_id][1] if other_id in updates else base.version
                linked = evolve(base, contradicts=(*base.contradicts, n.id), version=expected + 1)
                updates[other_id] = (linked, expected)
                linked_by[other_id] = n.id
        events = [self.core.event(event, n, context, now) for n in fresh]
        for u, _ in updates.values():
            why: dict[str, Any] = {"contradicted_by": linked_by[u.id]} if u.id in linked_by else {}
            if u.id in raised:
                why["reinforced"] = True
            events.append(self.core.event(EventKind.UPDATED, u, context, now, **why))
        final = {n.id: n for n in fresh}
        final.update({u.id: u for u, _ in updates.values()})
        out: list[MemoryNode] = []
        for i, n in enumerate(prepared):
            r = result[i]
            node = final[n.id] if r is None else final.get(r.id) or self.core.nodes.get(r.id, r)
            out.append(evolve(node.without_embedding()))
        if not fresh and not updates:
            if repeated:
                self.core.touch(repeated, now)  # a repeat is one more access of what it repeats
            return out

        def apply() -> None:
            self.core.index.upsert(fresh)
            for n in fresh:
                self.core.mirror(n)
                self.core.note_written(n)
            for u, _ in updates.values():
                self.core.mirror(u)
            if repeated:
                self.core.touch(repeated, now)

        return self.core.commit(call, WriteBatch(puts=fresh, updates=list(updates.values())), events, out, apply)

    def check_puts(self, context: Context, nodes: Sequence[MemoryNode]) -> int:
        """Check, writing nothing, that :meth:`put_many` would accept ``nodes`` as far
        as their ids go: each is new here or already stored with the same record.
        Raises what put_many would (VersionConflict, InvalidMemory, ScopeViolation);
        returns how many are new. The client runs it on every shard of a batch
        before any shard writes."""
        context = self.core.check_context(context)
        new = 0
        for given in nodes:
            if not isinstance(given, MemoryNode):
                raise InvalidMemory("node", f"must be a MemoryNode, got {type(given).__name__}")
            if given.version != 0:
                raise InvalidMemory("version", "a new memory must have version 0")
            node = self.core.validate(given).stamped(self.core.clock.now())
            self.core.visible(node, context, "write")
            self.core.check_id(node)
            check_source(node.source)
            existing = self.core.nodes.get(node.id)
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
            current = self.core.nodes.get(memory_id)
            if current is None or max(confidences) <= current.confidence:
                continue
            base = self.core.store.get(memory_id)
            if base is not None:
                raised = evolve(base, confidence=max(confidences), version=base.version + 1)
                updates[memory_id] = (raised, base.version)
        return fresh, updates, repeated

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

        Changing ``content`` requires its new ``vector`` (of :meth:`update_texts`). Raises VersionConflict,
        MemoryNotFound, ScopeViolation, InvalidMemory/InvalidRequest. One winner per
        version: a second update at the same ``expected_version`` raises
        VersionConflict even with identical changes, unless it is a re-execution of
        the winner (same ``op``), which returns the winner's answer.
        """
        context = self.core.check_context(context)
        if not is_int(expected_version):
            raise InvalidRequest("expected_version", "must be an int")
        if not isinstance(changes, dict) or not changes:
            raise InvalidRequest("changes", "must be a non-empty dict")
        bad = set(changes) - UPDATABLE
        if bad:
            raise InvalidRequest("changes", f"cannot update {sorted(bad)}")
        check_source(changes.get("source"))
        call = self.core.op_call("update", context, op)
        current = self.core.nodes.get(memory_id)
        if current is None:
            done, answer = self.core.recorded(call)
            if done:
                return answer
            raise MemoryNotFound(memory_id)
        self.core.visible(current, context, "update")
        if "content" in changes and changes["content"] != current.content and vector is None:
            raise InvalidRequest("vector", "changing content needs the new content's embedding")
        base = self.core.store.get(memory_id)
        if base is None:
            raise MemoryNotFound(memory_id)
        new = evolve(base, **changes, version=expected_version + 1)
        if vector is not None:
            new = evolve(new, embedding=vector)
        new = self.core.validate(new)
        if base.version != expected_version:
            done, answer = self.core.recorded(call)  # a re-execution of the winner answers as it did
            if done:
                return answer
            raise VersionConflict(memory_id, expected_version, base.version)
        now = self.core.clock.now()
        kind = EventKind.UPDATED
        if new.status is not base.status and new.status is MemoryStatus.ARCHIVED:
            kind = EventKind.ARCHIVED
        return self.core.commit(
            call,
            WriteBatch(updates=[(new, expected_version)]),
            [self.core.event(kind, new, context, now, fields=sorted(changes))],
            new.without_embedding(),
            self.core.apply_changed([new]),
        )

    def delete(
        self, context: Context, memory_id: str, expected_version: int | None = None, *, op: str | None = None
    ) -> bool:
        """Forget a memory: its record leaves the store and every index. False if already
        gone (a re-execution of a delete that succeeded, same ``op``, answers True).

        Soft with respect to history: the events of its earlier writes and the records of
        earlier operations still hold its content (its ``FORGOTTEN`` event holds none:
        ids, scope, kind, key and tags only). To remove the content everywhere, erase it
        (:mod:`memorybus.shard.erase`)."""
        context = self.core.check_context(context)
        if expected_version is not None and not is_int(expected_version):
            raise InvalidRequest("expected_version", "must be an int or None")
        call = self.core.op_call("delete", context, op)
        current = self.core.nodes.get(memory_id)
        if current is None:
            return self.core.recorded(call)[0]  # gone: by this very call (re-executed), or not
        self.core.visible(current, context, "forget")

        def apply() -> None:
            self.core.index.delete([memory_id])
            self.core.forget(memory_id)

        return self.core.commit(
            call,
            WriteBatch(deletes=[(memory_id, expected_version)]),
            [self.core.event(EventKind.FORGOTTEN, bare(current, keep_tags=True), context, self.core.clock.now())],
            True,
            apply,
        )
