"""Erasure on the shard: a user's, an agent's, or some memories' content removed from
everywhere this shard keeps it.

``forget`` is soft: the record goes, but earlier events and operation records still
hold its content. :meth:`Erasure.erase` removes it everywhere on the shard:

- the records (and memories derived from them: consolidated summaries and broadcast
  copies whose ``parents``/``source_ids`` name an erased memory; the sources left of an
  erased summary lose the link and are active again, so the next consolidation
  summarises what remains), with ``FORGOTTEN`` events carrying ids only;
- the in-memory parts: mirror, keyword index, vector cache, threads, graph (rebuilt
  from the remaining memories); the on-disk vector index is rebuilt from the remaining
  memories (a deleted point's vector can stay in a Qdrant segment until it is rebuilt);
- event payloads of erased memories (in place: sequence numbers, ids, kind, scope, key
  and times stay, content goes; ``history()`` then shows kind and ids only);
- operation records whose answer holds an erased memory (rewritten without content:
  a retried call is still answered, never applied twice);
- fact slots of an erased user's or agent's scopes, with their fact-event index and
  evidence; an erased agent's assertions (source ``agent:<name>``) are also taken out
  of the evidence of its org's other facts, and with them its learned reliability
  (the per-org table is rebuilt from the evidence left);
- the bytes: SQLite is VACUUMed with ``secure_delete`` and its WAL truncated; Redis
  rewrites its append-only file (``BGREWRITEAOF``, in the background).

Durable and resumable: the job (selector and ids) is recorded in the store before
anything changes and cleared when all is done; a shard that opens and finds a job
completes it (every step is idempotent). A second erase finds nothing and changes
nothing. A dry run reports the same counts and changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from memorybus.bus.evidence import KeyEvidence, without_sources
from memorybus.errors import IndexUnavailable, InvalidRequest
from memorybus.memory.events import Event, EventKind, bare, bare_event
from memorybus.memory.model import MemoryNode, MemoryStatus, evolve
from memorybus.scopes import Scope
from memorybus.shard.job import Job
from memorybus.shard.ops import decode_outcome, encode_outcome
from memorybus.shard.results import FactResult
from memorybus.storage.base import Scrub, WriteBatch
from memorybus.validation import check_text

log = logging.getLogger("memorybus")

#: the actor of an erasure's events and the owner of its operation record
ERASURE = "erasure"
#: event log entries read per page while planning
_PAGE = 1000


@dataclass(frozen=True, slots=True)
class Selector:
    """What to erase: every memory of ``user`` (its user, agent and session scopes) or
    of ``agent`` within ``org`` (both: that user's agent), or the memories ``ids`` (with
    ``org``: only those of that org)."""

    org: str = ""
    user: str = ""
    agent: str = ""
    ids: tuple[str, ...] = ()

    @classmethod
    def of(cls, org: object = None, user: object = None, agent: object = None,
           memory_ids: object = None) -> Selector:  # fmt: skip
        """A checked selector, or InvalidRequest."""
        fields = {}
        for name, value in (("org", org), ("user", user), ("agent", agent)):
            fields[name] = "" if value is None else check_text(name, value, InvalidRequest)
        ids: tuple[str, ...] = ()
        if memory_ids is not None:
            if isinstance(memory_ids, str) or not isinstance(memory_ids, Iterable):
                raise InvalidRequest("memory_ids", "must be a list of memory ids")
            ids = tuple(dict.fromkeys(check_text("memory_ids", i, InvalidRequest) for i in memory_ids))
            if not ids or not all(ids):
                raise InvalidRequest("memory_ids", "must be non-empty memory ids (at least one)")
            if fields["user"] or fields["agent"]:
                raise InvalidRequest("memory_ids", "erase memory ids, or a user's or agent's memories, not both")
        elif not (fields["user"] or fields["agent"]):
            raise InvalidRequest("erase", "name a user, an agent or memory ids")
        elif not fields["org"]:
            raise InvalidRequest("org", "a user's or an agent's memories are erased within an org: name it")
        return cls(fields["org"], fields["user"], fields["agent"], ids)

    def owns(self, scope: Scope) -> bool:
        """Whether every memory of ``scope`` is erased (the user's or agent's scopes)."""
        if not (self.user or self.agent) or scope.org != self.org:
            return False
        return (not self.user or scope.user == self.user) and (not self.agent or scope.agent == self.agent)

    def holds(self, node: MemoryNode, ids: set[str]) -> bool:
        """Whether ``node`` is erased, ``ids`` being every id erased so far."""
        return self.owns(node.scope) or (node.id in ids and (not self.org or node.scope.org == self.org))

    def pack(self) -> list[Any]:
        return [self.org, self.user, self.agent, list(self.ids)]

    @classmethod
    def unpack(cls, value: Sequence[Any]) -> Selector:
        return cls(value[0], value[1], value[2], tuple(value[3]))


@dataclass(slots=True)
class Plan:
    """Everything one erase changes on this shard."""

    ids: set[str]
    deletes: list[MemoryNode] = field(default_factory=list)
    relinks: list[MemoryNode] = field(default_factory=list)
    scrub: Scrub = field(default_factory=Scrub)
    edges: int = 0
    vectors: int = 0

    def __bool__(self) -> bool:
        return bool(self.deletes or self.relinks or self.scrub)

    def counts(self) -> dict[str, int]:
        summaries = sum(n.source == "consolidation" for n in self.deletes)
        copies = sum(n.source.startswith("broadcast:") for n in self.deletes)
        return {
            "memories": len(self.deletes) - summaries - copies,
            "summaries": summaries,
            "copies": copies,
            "relinked": len(self.relinks),
            "events": sum(len(v) for v in self.scrub.events.values()),
            "ops": len(self.scrub.ops),
            "slots": len(self.scrub.slots),
            "evidence": len(self.scrub.evidence),
            "graph_edges": self.edges,
            "vectors": self.vectors,
        }


class Erasure(Job):
    def erase_targets(self, selector: Selector, known: Sequence[str] = ()) -> list[str]:
        """The ids this shard would erase for ``selector``: its memories the selector
        names, and those derived (to any depth) from them or from ``known`` (ids other
        shards erase; the client asks every shard until no new id comes back)."""
        return sorted(self._closure(selector, set(known) | set(selector.ids)))

    def _closure(self, selector: Selector, ids: set[str]) -> set[str]:
        nodes = self.core.nodes
        out = {i for i, n in nodes.items() if selector.holds(n, ids)}
        grown = True
        while grown:
            every = out | ids
            derived = {i for i, n in nodes.items() if i not in out
                       and (any(p in every for p in n.parents) or any(s in every for s in n.source_ids))}  # fmt: skip
            out |= derived
            grown = bool(derived)
        return out

    def erase(self, selector: Selector, ids: Sequence[str] = (), *, dry_run: bool = False) -> dict[str, int]:
        """Erase what ``selector`` names, and the memories ``ids`` (every shard's
        :meth:`erase_targets`); returns counts per place. ``dry_run``: count only."""
        if not isinstance(selector, Selector):
            raise InvalidRequest("selector", "must be an erase Selector")
        every = self._closure(selector, set(ids) | set(selector.ids)) | set(ids) | set(selector.ids)
        plan = self._plan(selector, every)
        if dry_run or not plan:
            return plan.counts()
        self.core.store.set_erase_job(msgpack.packb([selector.pack(), sorted(every)]))
        return self._run(selector, every, plan)

    def resume(self) -> dict[str, int] | None:
        """Complete an erase job an earlier process recorded and did not finish; its
        counts (what was left to do), or None when there was none."""
        job = self.core.store.erase_job()
        if job is None:
            return None
        packed, ids = msgpack.unpackb(job)
        selector = Selector.unpack(packed)
        every = set(ids)
        log.warning("completing an interrupted erasure on %s (%d ids)", self.core.name, len(every))
        return self._run(selector, every, self._plan(selector, every))

    # ------------------------------------------------------------------ plan
    def _plan(self, selector: Selector, ids: set[str]) -> Plan:
        core = self.core
        plan = Plan(ids)
        held = [n for n in core.nodes.values() if selector.holds(n, ids)]
        ids |= {n.id for n in held}
        plan.deletes = sorted(held, key=lambda n: n.id)
        for n in core.nodes.values():
            if n.id in ids or not any(c in ids for c in n.children):
                continue
            children = tuple(c for c in n.children if c not in ids)
            left = [c for c in children if c in core.nodes]
            status = MemoryStatus.ACTIVE if n.status is MemoryStatus.CONSOLIDATED and not left else n.status
            plan.relinks.append(evolve(n, children=children, status=status, version=n.version + 1))
        plan.edges = sum(1 for e in core.graph.edges() if any(s in ids for s in e.sources))
        vectors = core.index.structure.vectors
        plan.vectors = sum(1 for n in held if vectors.vector(n.id) is not None)
        plan.scrub.events = self._events(selector, ids)
        plan.scrub.ops = self._ops(selector, ids)
        plan.scrub.slots = [(s, k) for s, k, _, _ in core.store.all_slots() if selector.owns(Scope.from_key(s))]
        plan.scrub.evidence = self._evidence(selector, set(plan.scrub.slots))
        return plan

    def _evidence(self, selector: Selector, dropped: set[tuple[str, str]]) -> dict[tuple[str, str], bytes]:
        """The new evidence of each fact of the org (not dropped) holding an assertion of
        the erased agent (a user's assertions are the facts of their scopes, dropped)."""
        if not selector.agent or selector.user:
            return {}
        source = f"agent:{selector.agent}"
        out: dict[tuple[str, str], bytes] = {}
        for scope_key, key, blob in self.core.store.all_evidence():
            if (scope_key, key) in dropped or Scope.from_key(scope_key).org != selector.org:
                continue
            ev = KeyEvidence.decode(blob)
            if any(c.source == source for c in ev.claims) or source in ev.tally:
                out[(scope_key, key)] = without_sources(ev, {source}).encode()
        return out

    def _events(self, selector: Selector, ids: set[str]) -> dict[str, dict[int, bytes]]:
        """Per scope, the new payload of each event about an erased memory that still
        holds more than ids."""
        store = self.core.store
        out: dict[str, dict[int, bytes]] = {}
        for scope_key in store.event_scopes():
            after = 0
            while True:
                rows = store.read_events(scope_key, after, _PAGE)
                for seq, blob in rows:
                    event = Event.decode(blob, seq)
                    if selector.holds(event.node, ids):
                        new = bare_event(event).encode()
                        if new != blob:
                            out.setdefault(scope_key, {})[seq] = new
                if len(rows) < _PAGE:
                    break
                after = rows[-1][0]
        return out

    def _ops(self, selector: Selector, ids: set[str]) -> dict[str, bytes]:
        """The new answer of each operation record whose answer holds an erased memory."""
        out: dict[str, bytes] = {}
        for key, blob in self.core.store.op_results():
            value = decode_outcome(blob)
            stripped = _strip(value, selector, ids)
            if stripped is not value:
                new = encode_outcome(stripped)
                if new != blob:
                    out[key] = new
        return out

    # ------------------------------------------------------------------- run
    def _run(self, selector: Selector, ids: set[str], plan: Plan) -> dict[str, int]:
        core = self.core
        counts = plan.counts()
        if plan.deletes or plan.relinks:
            now = core.clock.now()
            gone = [n.id for n in plan.deletes]
            changed = [n for n in core.store.get_many([n.id for n in plan.relinks]) if n is not None]
            relinks = {n.id: n for n in plan.relinks}
            updates = [(evolve(n, children=relinks[n.id].children, status=relinks[n.id].status,
                               version=n.version + 1), n.version) for n in changed]  # fmt: skip
            events = [core.system_event(EventKind.FORGOTTEN, bare(n), ERASURE, now, erased=True)
                      for n in plan.deletes]  # fmt: skip

            def apply() -> None:
                core.index.delete(gone)
                for memory_id in gone:
                    core.forget(memory_id)
                core.index.upsert([u for u, _ in updates])
                for u, _ in updates:
                    core.mirror(u)

            batch = WriteBatch(deletes=[(i, None) for i in gone], updates=updates)
            core.commit(core.op_call("erase", ERASURE, None), batch, events, {"erased": len(gone)}, apply)
        with core.gate.committing():  # readers go on while the store rewrites
            core.store.scrub(plan.scrub)
        if plan.scrub.slots or plan.scrub.evidence:
            core.reliabilities = None  # learned again from the evidence left
        if core.graph_policy.hops > 0:
            core.graph.rebuild_from(core.nodes.values())
        try:
            core.index.load(core._points())  # deleted points' vectors leave the index's files
            core.index.save(core.digest())
        except IndexUnavailable as exc:  # stale: served from memory, rebuilt at the next write
            log.warning("vector index rebuild after an erasure failed: %s", exc)
        with core.gate.committing():
            core.store.compact()
        core.store.set_erase_job(None)
        return counts


def _strip(value: Any, selector: Selector, ids: set[str]) -> Any:
    """An operation's answer with erased memories bare; ``value`` itself if none is."""
    if isinstance(value, MemoryNode):
        return bare(value) if selector.holds(value, ids) else value
    if isinstance(value, list) and value:
        items = [_strip(x.node, selector, ids) if isinstance(x, FactResult) else _strip(x, selector, ids)
                 for x in value]  # fmt: skip
        olds = [x.node if isinstance(x, FactResult) else x for x in value]
        if all(a is b for a, b in zip(items, olds, strict=True)):
            return value
        return [evolve(x, node=n) if isinstance(x, FactResult) else n for x, n in zip(value, items, strict=True)]
    return value
