"""DecayActor and ConsolidationActor: scheduled maintenance across every shard.

They only sleep and call: the decisions are the pure functions of
:mod:`memorybus.maintenance`, applied by each shard to the records it owns. Each
run covers all shards in parallel. ``run_once(now=..., within=ctx)`` takes an
injected time and the context whose scopes it may manage (each shard sweeps only
those: :meth:`~memorybus.scopes.Context.manages`); the schedule's own runs
(``within=None``) cover every scope with the actor's clock. ``now`` must be a
time in ``[0, MAX_TIME]`` no later than the clock plus
``Config.maintenance_max_future_seconds`` (300 s by default: a simulation that
runs maintenance weeks ahead raises it in its config).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import ray
from ray.util import metrics

from memorybus.actors.names import shard_actor_name
from memorybus.actors.runtime import unwrap
from memorybus.auth import gatekeeper_for
from memorybus.clock import Clock, SystemClock
from memorybus.config import Config, ConsolidationPolicy, DecayPolicy
from memorybus.errors import InvalidRequest, MemoryBusError
from memorybus.hooks import call_hook, resolve_hook, text_result
from memorybus.maintenance import Cluster, RunStatus, extractive_summary
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Context
from memorybus.validation import check_time


def _shards(config: Config) -> list[Any]:
    ns = config.namespace
    return [ray.get_actor(shard_actor_name(config, i), namespace=ns) for i in range(config.num_shards)]


class _Scheduled:
    """The loop both maintenance actors share."""

    kind = "maintenance"
    interval = 3600.0

    def __init__(self, config: Config, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.status_ = RunStatus(self.kind)
        self._gate = gatekeeper_for(config)
        self._task: asyncio.Task[None] | None = None
        tags = {"namespace": config.namespace}
        self._runs = metrics.Counter(f"memorybus_{self.kind}_runs", "maintenance runs", tag_keys=("namespace",))
        self._duration = metrics.Gauge(f"memorybus_{self.kind}_seconds", "last run duration", tag_keys=("namespace",))
        self._items = metrics.Counter(f"memorybus_{self.kind}_items", "items changed", tag_keys=("namespace", "what"))
        self._errors = metrics.Counter(f"memorybus_{self.kind}_errors", "failed runs", tag_keys=("namespace",))
        self._tags = tags

    async def _run(self, now: float, within: Context | None = None) -> dict[str, int]:
        raise NotImplementedError

    def _when(self, now: object) -> float:
        """The run's time: the clock's, or ``now`` if it is a representable time no later
        than the clock plus the configured tolerance (InvalidRequest otherwise)."""
        clock = self.clock.now()
        if now is None:
            return clock
        when = check_time("now", now, InvalidRequest)
        if when > clock + self.config.maintenance_max_future_seconds:
            raise InvalidRequest(
                "now", f"is {when - clock:.0f} s in the future (at most "
                f"{self.config.maintenance_max_future_seconds:.0f} s: Config.maintenance_max_future_seconds)"
            )
        return when

    async def run_once(self, now: float | None = None, within: Context | None = None, auth: str = "",
                       **kw: Any) -> dict[str, Any]:  # fmt: skip
        """One run at ``now`` over the scopes ``within`` manages (None: every scope).

        Checked first: ``within``'s credential must allow a write there; a run at an
        explicit ``now`` or over every scope is an operator call (``auth``, or the
        operator's credential on ``within``). Returns the actor's status for a full
        run, and for a scoped run the same fields describing that run alone (nothing
        about other orgs)."""
        if within is not None and not isinstance(within, Context):
            raise InvalidRequest("context", "must be a Context")
        if within is not None:
            within = self._gate.admit(within, f"run_{self.kind}", write=True)
        if not self._gate.trusted and (within is None or now is not None):
            token = auth or (within.credential if within is not None else "")
            self._gate.operator(token, f"run_{self.kind} with an explicit now or over every scope")
        return await self._run_once(now, within, **kw)

    async def _run_once(self, now: float | None = None, within: Context | None = None,
                        **kw: Any) -> dict[str, Any]:  # fmt: skip
        when = self._when(now)
        started = time.perf_counter()
        try:
            counts = await self._run(when, within=within, **kw)
        except (MemoryBusError, ray.exceptions.RayError) as exc:
            err = unwrap(exc)  # a shard's own error, or which actor was unavailable
            self.status_.failed(when, time.perf_counter() - started, repr(err))
            self._errors.inc(1, tags=self._tags)
            raise err from None
        duration = time.perf_counter() - started
        self.status_.succeeded(when, duration, counts)
        self._runs.inc(1, tags=self._tags)
        self._duration.set(duration, tags=self._tags)
        for what, n in counts.items():
            if n:
                self._items.inc(n, tags={**self._tags, "what": what})
        if within is None:
            return self.status_.as_dict()
        alone = RunStatus(self.kind)
        alone.succeeded(when, duration, counts)
        return alone.as_dict()

    async def _loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            with contextlib.suppress(MemoryBusError):  # recorded in status; the schedule goes on
                await self._run_once()
            await self._after_scheduled_run()

    async def _after_scheduled_run(self) -> None:
        """What the schedule does after each of its runs (nothing, unless a kind says)."""

    async def start(self, auth: str = "", interval: float | None = None) -> bool:
        self._gate.operator(auth, "schedule_maintenance")
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop(interval or self.interval))
            return True
        return False

    async def stop(self, auth: str = "") -> bool:
        self._gate.operator(auth, "stop maintenance")
        if self._task is not None and not self._task.done():
            self._task.cancel()
            return True
        return False

    async def status(self, auth: str = "") -> dict[str, Any]:
        self._gate.operator(auth, "maintenance_status")
        return {**self.status_.as_dict(), "scheduled": self._task is not None and not self._task.done(),
                **self._extra_status()}

    def _extra_status(self) -> dict[str, Any]:
        return {}

    async def auth_reload(self) -> None:
        """Read the key ring again now (after a rotation or revocation)."""
        self._gate.reload()


class DecayActor(_Scheduled):
    kind = "decay"

    def __init__(self, config: Config, policy: DecayPolicy | None = None, clock: Clock | None = None) -> None:
        super().__init__(config, clock)
        self.policy = policy or config.decay
        self.interval = self.policy.interval_seconds

    async def _run(self, now: float, within: Context | None = None) -> dict[str, int]:
        op = uuid.uuid4().hex  # one sweep: a shard re-running it (Ray retry) answers from its record
        parts = await asyncio.gather(
            *(s.decay_sweep.remote(self._gate.service_token(), now, self.policy, op, within)
              for s in _shards(self.config))
        )
        total = {"scanned": 0, "archived": 0, "expired": 0}
        for part in parts:
            for k, v in part.items():
                total[k] = total.get(k, 0) + v
        return total


class ConsolidationActor(_Scheduled):
    """Clusters recent episodic memories per scope into semantic memories.

    ``summarizer`` (e.g. an LLM call) turns a cluster into text: this argument,
    else ``config.consolidation.summarizer`` (a callable or an import path), else
    the extractive summary. The shard that owns a cluster embeds its summary (on
    the bus's embedder pool, outside any transaction) and applies it in one atomic,
    idempotent commit.
    """

    kind = "consolidation"

    def __init__(
        self,
        config: Config,
        policy: ConsolidationPolicy | None = None,
        summarizer: Callable[[Sequence[MemoryNode]], str] | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(config, clock)
        self.policy = policy or config.consolidation
        self.interval = self.policy.interval_seconds
        self.summarizer = summarizer or resolve_hook(self.policy.summarizer, "consolidation.summarizer")
        #: what each shard answered to the last vector index build request
        self.index_builds: list[dict[str, Any]] = []

    async def _after_scheduled_run(self) -> None:
        """Each shard builds its vector index's HNSW graph when due, in a process of its
        own (:mod:`memorybus.shard.indexbuild`); the shards serve meanwhile."""
        await self.build_indexes()

    async def build_indexes(self, auth: str = "", min_points: int | None = None) -> list[dict[str, Any]]:
        """Ask every shard to build its vector index when due (``min_points``: the
        shards' threshold unless given). Operator only when called from outside."""
        if auth:
            self._gate.operator(auth, "build vector indexes")
        token = self._gate.service_token()
        try:
            self.index_builds = list(await asyncio.gather(
                *(s.build_vector_index.remote(token, min_points) for s in _shards(self.config))
            ))
        except (MemoryBusError, ray.exceptions.RayError) as exc:
            self.index_builds = [{"built": False, "reason": repr(unwrap(exc))}]
        return self.index_builds

    def _extra_status(self) -> dict[str, Any]:
        return {"index_builds": self.index_builds}

    async def _run(
        self,
        now: float,
        within: Context | None = None,
        scopes: Sequence[str] | None = None,
        due_only: bool = False,
        pause_before_apply: float = 0.0,
    ) -> dict[str, int]:
        shards = _shards(self.config)
        plans: list[list[Cluster]] = await asyncio.gather(
            *(s.consolidation_plan.remote(self._gate.service_token(), now, self.policy, scopes, due_only, within)
              for s in shards)
        )
        work = [(shard, c) for shard, clusters in zip(shards, plans, strict=True) for c in clusters]
        counts = {"clusters": len(work), "consolidated": 0, "sources": 0, "contradictions": 0}
        if not work:
            return counts
        # every summary first: a summarizer that fails (HookFailed) fails the run before anything is applied
        texts = [
            call_hook("consolidation.summarizer", self.summarizer, c.members, check=text_result)
            if self.summarizer
            else extractive_summary(c.members, self.policy.key_phrases)
            for _, c in work
        ]
        if pause_before_apply:
            await asyncio.sleep(pause_before_apply)
        results = await asyncio.gather(
            *(
                shard.apply_consolidation.remote(
                    self._gate.service_token(),
                    [m.id for m in c.members], text, now, self.policy, uuid.uuid4().hex, within
                )
                for (shard, c), text in zip(work, texts, strict=True)
            )
        )
        for (_, c), sem in zip(work, results, strict=True):
            if sem is not None:
                counts["consolidated"] += 1
                counts["sources"] += len(c.members)
                counts["contradictions"] += len(sem.contradicts)
        return counts

    async def run_once(self, now: float | None = None, within: Context | None = None, auth: str = "",
                       **kw: Any) -> dict[str, Any]:  # fmt: skip
        return await super().run_once(now, within, auth, **kw)
