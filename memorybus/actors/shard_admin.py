"""The shard actor's operator calls: maintenance, export and import, counts, one
memory in full. Each checks the operator's credential first (see
:mod:`memorybus.auth.gate`); agents' credentials cannot make them. A mixin of
:class:`~memorybus.actors.shard.ShardActor`, kept apart so each file holds one job.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import ray

from memorybus.audit.read import AuditQuery
from memorybus.config import ConsolidationPolicy, DecayPolicy
from memorybus.errors import InvalidRequest
from memorybus.maintenance import Cluster
from memorybus.memory.events import Event
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Context, Scope
from memorybus.shard import Selector
from memorybus.transfer import EventDigests, ExportedSlot, LoggedEvent, Slot

if TYPE_CHECKING:
    import numpy as np

    from memorybus.actors import direct
    from memorybus.auth import Gatekeeper
    from memorybus.config import Config
    from memorybus.shard import Shard

T = TypeVar("T")


class OperatorCalls:
    if TYPE_CHECKING:
        config: Config
        _gate: Gatekeeper
        _direct: direct.ChannelServer | None

        def _s(self) -> Shard: ...
        def _read(self, call: Callable[[Shard], T]) -> T: ...
        def _write(self, call: Callable[[Shard], T]) -> T: ...
        def _embedded(self, texts: Callable[[Shard], list[str]], write: Callable[[Shard, np.ndarray], T],
                      *args: Any) -> T: ...  # fmt: skip

    def decay_sweep(
        self, auth: str, now: float, policy: DecayPolicy, op: str | None = None, within: Context | None = None
    ) -> dict[str, int]:
        """A decay sweep (operator only: the decay actor's call), at ``now`` no later than
        the clock plus ``Config.maintenance_max_future_seconds``, as the client allows."""
        self._gate.operator(auth, "decay_sweep")
        self._check_now(now)
        return self._write(lambda shard: shard.decay_sweep(now, policy, op=op, within=within))

    @ray.method(concurrency_group="builds")
    def build_vector_index(self, auth: str, min_points: int | None = None) -> dict[str, Any]:
        """Build the vector index's HNSW graph in another process and swap it in when it
        is due (operator only: the consolidation actor's call after each run; see
        :mod:`memorybus.shard.indexbuild`). Reads and writes go on meanwhile."""
        self._gate.operator(auth, "build_vector_index")
        shard = self._s()
        if min_points is None:
            return shard.build_vector_index()
        return shard.build_vector_index(min_points=min_points)

    @ray.method(concurrency_group="reads")
    def consolidation_plan(
        self,
        auth: str,
        now: float,
        policy: ConsolidationPolicy,
        scopes: list[str] | None,
        due_only: bool,
        within: Context | None = None,
    ) -> list[Cluster]:
        self._gate.operator(auth, "consolidation_plan")
        self._check_now(now)
        return self._read(lambda shard: shard.consolidation_plan(now, policy, scopes, due_only, within=within))

    @ray.method(concurrency_group="ingest")
    def apply_consolidation(
        self,
        auth: str,
        member_ids: list[str],
        text: str,
        now: float,
        policy: ConsolidationPolicy,
        op: str | None = None,
        within: Context | None = None,
    ) -> MemoryNode | None:
        self._gate.operator(auth, "apply_consolidation")
        self._check_now(now)
        return self._embedded(
            lambda shard: shard.texts.summary(text),
            lambda shard, vectors: shard.apply_consolidation(
                member_ids, text, vectors[0], now, policy, op=op, within=within
            ),
        )

    @ray.method(concurrency_group="reads")
    def export_nodes(
        self, auth: str, outer: Scope | None, after: str | None, limit: int
    ) -> tuple[list[bytes], str | None]:
        self._gate.operator(auth, "export_nodes")
        return self._read(lambda shard: shard.export_nodes(outer, after, limit))

    @ray.method(concurrency_group="reads")
    def export_events(
        self, auth: str, outer: Scope | None, scope_key: str | None, after: int, limit: int
    ) -> tuple[list[LoggedEvent], tuple[str, int] | None]:
        self._gate.operator(auth, "export_events")
        return self._read(lambda shard: shard.export_events(outer, scope_key, after, limit))

    @ray.method(concurrency_group="reads")
    def export_slots(self, auth: str, outer: Scope | None) -> list[ExportedSlot]:
        self._gate.operator(auth, "export_slots")
        return self._read(lambda shard: shard.export_slots(outer))

    @ray.method(concurrency_group="reads")
    def import_conflicts(
        self, auth: str, digests: list[tuple[str, str]], owned: list[str], events: EventDigests, slots: list[Slot]
    ) -> list[str]:
        self._gate.operator(auth, "import_conflicts")
        return self._read(lambda shard: shard.import_conflicts(digests, owned, events, slots))

    def import_records(
        self, auth: str, nodes: list[MemoryNode], events: list[LoggedEvent], slots: list[Slot],
        evidence: dict[tuple[str, str], bytes] | None = None,
    ) -> dict[str, int]:
        self._gate.operator(auth, "import_records")
        return self._write(lambda shard: shard.import_records(nodes, events, slots, evidence))

    @ray.method(concurrency_group="reads")
    def stats(self, auth: str = "") -> dict[str, Any]:
        """The shard's counts (:meth:`memorybus.shard.Shard.stats`) and, under ``process``,
        this actor's process: its pid, the garbage collector's thresholds, how many
        objects it leaves unscanned (frozen after the shard's rebuild), how many
        recalls its direct channel answered, how many connections it refused (no or a
        bad hello, over a cap), how many it serves now and how many of them have not
        said hello yet; and ``fact_groups``: the single ``assert_fact`` calls it answered
        and the store commits they took (see :mod:`memorybus.shard.factgroup`)."""
        self._gate.operator(auth, "stats")
        counts, groups = self._read(lambda shard: (shard.stats(), shard.fact_groups.counts()))
        d = self._direct
        opened, pending = d.connections if d is not None else (0, 0)
        channel = {"direct_recalls": d.served if d is not None else 0, "direct_refused": d.refused if d else 0,
                   "direct_connections": opened, "direct_pending": pending}
        return {**counts, "process": {"pid": os.getpid(), "gc_threshold": list(gc.get_threshold()),
                                      "gc_frozen": gc.get_freeze_count(), **channel,
                                      "fact_groups": groups}}

    @ray.method(concurrency_group="reads")
    def inspect(self, auth: str, memory_id: str) -> tuple[MemoryNode, list[Event]] | None:
        self._gate.operator(auth, "inspect")
        return self._read(lambda shard: shard.inspect(memory_id))

    @ray.method(concurrency_group="reads")
    def peek(self, auth: str, ids: list[str]) -> list[MemoryNode]:
        self._gate.operator(auth, "peek")
        return self._read(lambda shard: shard.peek(ids))

    @ray.method(concurrency_group="reads")
    def count(self, auth: str = "") -> int:
        self._gate.operator(auth, "count")
        return self._read(lambda shard: shard.count())

    @ray.method(concurrency_group="reads")
    def identity(self, auth: str = "") -> dict[str, Any]:
        """The storage this shard serves (see ``Config.storage_identity``: where, how
        many shards; no password); opens the shard first, so a store that cannot be
        opened fails ``connect``. Anyone may ask: ``connect`` asks before it holds a
        credential, to refuse a config whose storage differs from the running bus's."""
        self._s()
        return self.config.storage_identity()

    @ray.method(concurrency_group="reads")
    def auth_reload(self) -> None:
        """Read the key ring again now (after a rotation or revocation); anyone may ask."""
        self._gate.reload()

    def _check_now(self, now: object) -> None:
        """The limit the client puts on maintenance's injected time, checked here too."""
        if isinstance(now, bool) or not isinstance(now, int | float) or not 0 <= now <= 1e11:
            raise InvalidRequest("now", "must be a time in seconds")
        ahead = now - time.time()
        if ahead > self.config.maintenance_max_future_seconds:
            raise InvalidRequest("now", f"is {ahead:.0f} s in the future (at most "
                                 f"{self.config.maintenance_max_future_seconds:.0f} s)")  # fmt: skip

    @ray.method(concurrency_group="reads")
    def erase_targets(self, auth: str, selector: Selector, known: list[str]) -> list[str]:
        self._gate.operator(auth, "erase")
        return self._read(lambda shard: shard.erase_targets(selector, known))

    def erase(self, auth: str, selector: Selector, ids: list[str], dry_run: bool = False) -> dict[str, int]:
        """Erase content everywhere this shard keeps it (operator only; see
        :mod:`memorybus.shard.erase`). Re-run after the actor died, it finds its job done."""
        self._gate.operator(auth, "erase")
        return self._write(lambda shard: shard.erase(selector, ids, dry_run=dry_run))

    @ray.method(concurrency_group="reads")
    def audit_log(self, auth: str, org: str, q: AuditQuery) -> list[Any]:  # audit Entries
        self._gate.operator(auth, "audit")
        return self._read(lambda shard: shard.audit_log(org, q))
