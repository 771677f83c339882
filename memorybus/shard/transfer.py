"""The shard's operator side: export pages, import (checked, then applied), counts,
and one memory with its history. These calls take no caller context: they are for
operators and tools (backup, restore, ``memorybus ls/show/stats``), like reading the
store's files directly, and are not reachable through an agent's ``Context``.

An import is checked here too, whoever calls: every memory's id must be an id of its
scope and its scope routed to this shard; every fact head an id of its scope, and
when that memory is here (or in the same call), a memory of the same scope and key;
otherwise InvalidRequest and nothing of the call is written. What is here already is
skipped, so an import rerun writes nothing twice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memorybus import views
from memorybus.errors import InvalidRequest, VersionConflict
from memorybus.memory.events import Event
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Scope
from memorybus.shard.auditing import OPERATOR
from memorybus.shard.job import Job
from memorybus.storage.base import SlotWrite, WriteBatch
from memorybus.transfer import (
    EventDigests,
    ExportedSlot,
    LoggedEvent,
    Slot,
    event_digest,
    event_key,
    id_problem,
    record_digest,
    slot_problem,
)


class Transfer(Job):
    # ------------------------------------------------------------------ export
    def export_nodes(self, outer: Scope | None, after: str | None, limit: int) -> tuple[list[bytes], str | None]:
        """:func:`memorybus.views.export_nodes` over this shard (access statistics
        written first: they travel with the records)."""
        self.core.records.flush()
        return views.export_nodes(self.core.nodes, self.core.store, outer, after, limit)

    def export_events(
        self, outer: Scope | None, scope_key: str | None, after: int, limit: int
    ) -> tuple[list[LoggedEvent], tuple[str, int] | None]:
        """:func:`memorybus.views.export_events` over this shard's store."""
        return views.export_events(self.core.store, outer, scope_key, after, limit)

    def export_slots(self, outer: Scope | None) -> list[ExportedSlot]:
        return views.export_slots(self.core.store, outer)

    # ------------------------------------------------------------------ import
    def import_conflicts(
        self, digests: Sequence[tuple[str, str]], owned: Sequence[str], events: EventDigests, slots: Sequence[Slot]
    ) -> list[str]:
        """What an import would conflict with here, changing nothing.

        ``digests``: ``(id, record digest)`` of every imported memory (an id held here
        with another record, or held here while the import routes it elsewhere, is a
        conflict); ``owned``: the ids routed here; ``events``: per scope, ``(seq, event
        digest)`` (a scope whose history here differs from the import's is a conflict);
        ``slots``: fact heads routed here (another head or position is a conflict).
        """
        mine = set(owned)
        found: list[str] = []
        for memory_id, digest in digests:
            node = self.core.nodes.get(memory_id)
            if node is None:
                continue
            if memory_id not in mine:
                found.append(f"memory {memory_id} is stored in another shard ({self.core.name})")
            elif record_digest(node) != digest:
                found.append(f"memory {memory_id} exists with another content or version")
        for scope_key, wanted in events.items():
            have = self.core.store.read_events(scope_key, 0, len(wanted) + 1)
            for (seq, blob), (want_seq, want) in zip(have, wanted, strict=False):
                if seq != want_seq or event_digest(blob) != want:
                    found.append(f"scope {Scope.from_key(scope_key)} has another history (event {seq})")
                    break
            else:
                if len(have) > len(wanted):
                    found.append(f"scope {Scope.from_key(scope_key)} has a longer history here")
        current = {(s, k): (h, q) for s, k, h, q in self.core.store.all_slots()}
        for slot in slots:
            scope_key, key, head, seq = slot
            problem = slot_problem(slot, self.core.nodes.get(head))
            if problem is not None:
                found.append(problem)
            elif (scope_key, key) in current and current[(scope_key, key)] != (head, seq):
                found.append(f"fact {key!r} in {Scope.from_key(scope_key)} has another current value")
        return found

    def import_records(
        self,
        nodes: Sequence[MemoryNode],
        events: Sequence[LoggedEvent],
        slots: Sequence[Slot],
        evidence: Mapping[tuple[str, str], bytes] | None = None,
    ) -> dict[str, int]:
        """Store exported records as they were: ids, versions, access statistics,
        embeddings, event sequence numbers and fact heads, each head with its fact's
        ``evidence`` (``{(scope key, key): encoded}``; a head restored without it has
        none), so the facts resolve as they did. One atomic commit; what is
        here already with the same content is skipped (an import can be rerun). Raises
        VersionConflict when something here differs, InvalidRequest for an id or fact
        head that is not of its scope (see the module docstring); nothing is written."""
        puts: list[MemoryNode] = []
        given_ids: dict[str, MemoryNode] = {}
        for given in nodes:
            limit = max(self.core.limits.max_content_chars, len(given.content))  # restored as it was
            node = given.validate(dim=self.core.dim, max_content_chars=limit)
            problem = id_problem(node.id, node.scope)
            if problem is not None or node.id in given_ids:
                raise InvalidRequest("import", f"memory with {problem or f'id {node.id} twice'}; nothing was imported")
            if self.core.owns is not None and not self.core.owns(node.scope.key):
                raise InvalidRequest("import", f"memory {node.id}: its scope is not routed to {self.core.name}")
            given_ids[node.id] = node
            have = self.core.nodes.get(node.id)
            if have is None:
                if node.embedding is None:
                    raise InvalidRequest("import", f"memory {node.id} has no embedding")
                puts.append(node)
            elif record_digest(have) != record_digest(node):
                raise VersionConflict(node.id, node.version, have.version)
        appended: list[tuple[str, bytes]] = []
        keys: list[str | None] = []
        last: dict[str, int] = {}
        for scope_key, seq, blob in events:
            named = Event.decode(blob, seq).node
            problem = id_problem(named.id, named.scope) if named.scope.key == scope_key else "another scope"
            if problem is not None:
                raise InvalidRequest("import", f"event {seq} of {scope_key} names a memory with {problem}; "
                                     "nothing was imported")
            at = last.setdefault(scope_key, self.core.store.last_seq(scope_key))
            if seq <= at:
                (have_seq, have_blob), *_ = self.core.store.read_events(scope_key, seq - 1, 1) or [(0, b"")]
                if have_seq != seq or have_blob != blob:
                    raise VersionConflict(f"events of {scope_key}", seq, at)
                continue
            if seq != at + 1:
                raise VersionConflict(f"events of {scope_key}", seq - 1, at)  # a gap: history incomplete
            appended.append((scope_key, blob))
            keys.append(event_key(blob))
            last[scope_key] = seq
        current = {(s, k): (h, q) for s, k, h, q in self.core.store.all_slots()}
        writes = []
        for slot in slots:
            scope_key, key, head, seq = slot
            problem = slot_problem(slot, given_ids.get(head) or self.core.nodes.get(head))
            if problem is not None:
                raise InvalidRequest("import", f"{problem}; nothing was imported")
            head_here = current.get((scope_key, key))
            if head_here == (head, seq):
                continue
            if head_here is not None:
                raise VersionConflict(f"{key}@{scope_key}", seq, head_here[1])
            writes.append(SlotWrite(scope_key, key, 0, head, seq, (evidence or {}).get((scope_key, key))))
        batch = WriteBatch(puts=puts, slots=writes, events=appended, event_keys=keys)
        if batch:
            if self.core.audit is not None:
                batch.audit = self.core.audit.write_drafts("import", OPERATOR, batch)
            self.core.store.commit(batch)  # restored history is not news: no live push
        if any(w.evidence for w in writes):
            self.core.reliabilities = None  # learned again, with the restored evidence
        self.core.index.upsert(puts)
        for node in puts:
            self.core.mirror(node)
        return {"nodes": len(puts), "events": len(appended), "slots": len(writes)}

    # --------------------------------------------------------------- inspection
    def stats(self) -> dict[str, Any]:
        """Counts of this shard (:func:`memorybus.views.shard_stats`)."""
        return views.shard_stats(self.core.name, self.core.nodes, self.core.store)

    def inspect(self, memory_id: str, limit: int = 200) -> tuple[MemoryNode, list[Event]] | None:
        """:func:`memorybus.views.inspect` over this shard."""
        return views.inspect(self.core.nodes, self.core.store, memory_id, limit)

    def peek(self, ids: Sequence[str]) -> list[MemoryNode]:
        """The memories of ``ids`` held here (no embeddings), for provenance."""
        return views.peek(self.core.nodes, ids)
