"""The :class:`Shard`: its parts, wired, and the calls of its jobs.

Parts (each owns its data): :class:`~memorybus.shard.records.Records` (the store
and its in-memory mirror), :class:`~memorybus.shard.index.SearchIndex` (vectors on
disk; keywords, vectors and threads in memory), the temporal graph, and
:class:`~memorybus.shard.ops.Commits` (atomic commits with operation records and
events). :class:`~memorybus.shard.core.ShardCore` holds them with the checks every
call makes. Jobs, each over the core: reads and recall (:mod:`.reads`), writes
(:mod:`.writes`), keyed facts (:mod:`.facts`), broadcast (:mod:`.broadcast`),
decay (:mod:`.decay`), consolidation (:mod:`.consolidation`), event replay
(:mod:`.replay`), export and import (:mod:`.transfer`), erasure (:mod:`.erase`).
The shard's calls are theirs; an erasure left unfinished is completed on opening.
"""

from __future__ import annotations

from collections.abc import Callable

from memorybus.audit import Entry
from memorybus.audit.read import AuditQuery, query
from memorybus.bus.conflicts import Judge
from memorybus.clock import Clock, SystemClock
from memorybus.config import BusPolicy, GraphPolicy, RankingWeights
from memorybus.errors import InvalidRequest
from memorybus.memory.events import Event
from memorybus.memory.model import DEFAULT_MAX_CONTENT_CHARS, DEFAULT_MAX_STRUCTURED_BYTES, DEFAULT_MAX_TAGS
from memorybus.shard.auditing import AuditTrail
from memorybus.shard.broadcast import Broadcasts
from memorybus.shard.consolidation import Consolidation
from memorybus.shard.core import Limits, ShardCore
from memorybus.shard.decay import Decay
from memorybus.shard.erase import Erasure
from memorybus.shard.factgroup import FactGroups
from memorybus.shard.facts import Facts
from memorybus.shard.gate import Gate
from memorybus.shard.index import SearchIndex
from memorybus.shard.indexbuild import IndexBuilds
from memorybus.shard.ops import Commits
from memorybus.shard.reads import Reads
from memorybus.shard.records import Records
from memorybus.shard.replay import Replay
from memorybus.shard.transfer import Transfer
from memorybus.shard.writes import Writes
from memorybus.storage.base import Store
from memorybus.storage.vectors import VectorIndex


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
        max_tags: int = DEFAULT_MAX_TAGS,
        max_structured_bytes: int = DEFAULT_MAX_STRUCTURED_BYTES,
        touch_flush_seconds: float = 1.0,
        policy: BusPolicy | None = None,
        on_events: Callable[[list[Event]], None] | None = None,
        judge: Judge | None = None,
        dedupe: bool = True,
        detect_contradictions: bool = True,
        graph: GraphPolicy | None = None,
        owns: Callable[[str], bool] | None = None,
        audit_key: bytes | None = None,
    ) -> None:
        """``audit_key``: the HMAC key the audit trail's checkpoints are signed with
        (None: entries are chained, no checkpoints are written; see :mod:`.auditing`)."""
        ranking = ranking or RankingWeights()
        clock = clock or SystemClock()
        records = Records(store, touch_flush_seconds)
        audit = AuditTrail(store, clock, records.get, flush_seconds=touch_flush_seconds, key=audit_key)
        core = ShardCore(
            name,
            records,
            SearchIndex(index, records.get, k1=ranking.bm25_k1, b=ranking.bm25_b, session_gap=ranking.session_gap),
            Commits(store, Gate(), on_events, audit),  # the gate: how the actor's read and write threads share it
            limits=Limits(dim, max_content_chars, max_tags, max_structured_bytes),
            clock=clock,
            ranking=ranking,
            policy=policy or BusPolicy(),
            graph=graph or GraphPolicy(),
            judge=judge,
            dedupe=dedupe,
            detect_contradictions=detect_contradictions,
            owns=owns,
        )
        self.core = core
        self.name = name
        # the parts, for the actor and for tests
        self.store, self.index, self.graph, self.gate = core.store, core.index, core.graph, core.gate
        self.clock, self.ranking, self.texts = core.clock, core.ranking, core.texts
        reads, writes, facts = Reads(core), Writes(core), Facts(core)
        broadcasts, decay, consolidation = Broadcasts(core), Decay(core), Consolidation(core)
        replay, transfer, erasure = Replay(core), Transfer(core), Erasure(core)
        self._recall = reads.recall
        # reads and recall
        self.get = reads.get
        self.search = reads.search
        self.pinned = reads.pinned
        self.list_memories = reads.list_memories
        self.count = reads.count
        # writes
        self.embedding_texts = writes.embedding_texts
        self.update_texts = writes.update_texts
        self.put_many = writes.put_many
        self.check_puts = writes.check_puts
        self.update = writes.update
        self.delete = writes.delete
        self.assert_fact = facts.assert_fact
        self.assert_facts = facts.assert_facts
        self.fact_groups = FactGroups(facts)  # concurrent single assertions, group-committed
        self.assert_fact_grouped = self.fact_groups.assert_fact
        self.current_fact = facts.current_fact
        self.history = facts.history
        self.source_reliability = facts.source_reliability
        self.broadcast_source = broadcasts.broadcast_source
        self.put_broadcast = broadcasts.put_broadcast
        # maintenance
        self.decay_sweep = decay.decay_sweep
        self.consolidation_plan = consolidation.consolidation_plan
        self.build_vector_index = IndexBuilds(core).build_vector_index
        self.apply_consolidation = consolidation.apply_consolidation
        # the event log
        self.read_events = replay.read_events
        self.read_events_page = replay.read_events_page
        self.last_seqs = replay.last_seqs
        # the operator's side
        self.export_nodes = transfer.export_nodes
        self.export_events = transfer.export_events
        self.export_slots = transfer.export_slots
        self.import_conflicts = transfer.import_conflicts
        self.import_records = transfer.import_records
        self.stats = transfer.stats
        self.inspect = transfer.inspect
        self.peek = transfer.peek
        self.erase_targets = erasure.erase_targets
        self.erase = erasure.erase
        self.resume_erase = erasure.resume
        # access statistics and the index's health
        self.touches_due = core.flush_due
        self.flush = core.flush
        self.audit_checkpoint = audit.checkpoint
        self._audit = audit
        self.repair_index = core.repair_index
        self.checkpoint_index = core.checkpoint_index
        self.rebuild = core.rebuild
        core.rebuild()
        erasure.resume()  # an erasure an earlier process left unfinished is completed first

    def audit_log(self, org: str, q: AuditQuery) -> list[Entry]:
        """``org``'s audit entries on this shard that ``q`` asks for (see
        :func:`memorybus.audit.read.query`), buffered reads flushed first. An operator
        call: it sees every principal's entries."""
        if not isinstance(org, str) or not org:
            raise InvalidRequest("org", "must be a non-empty string")
        if not isinstance(q, AuditQuery):
            raise InvalidRequest("q", f"must be an AuditQuery, got {type(q).__name__}")
        self._audit.flush()
        return query(self.core.store, org, q)

    @property
    def on_events(self) -> Callable[[list[Event]], None] | None:
        return self.core.commits.on_events

    @on_events.setter
    def on_events(self, push: Callable[[list[Event]], None] | None) -> None:
        self.core.commits.on_events = push

    def close(self) -> None:
        """Flush access statistics and audit entries, sign the audit heads (with a key),
        checkpoint and close the vector index (the next start trusts it), close the store."""
        self.flush()
        self._audit.checkpoint()  # the head as it is now, signed (with a key)
        self.core.index.close(self.core.digest())
        self.core.store.close()
