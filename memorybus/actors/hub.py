"""HubActor: a thin async Ray wrapper over :class:`memorybus.bus.hub.Hub`.

One actor per hub partition; orgs are spread over partitions, so a hot org
does not block another. The actor reads event logs from the shards for replay
and pushes batches to subscriber actors.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable
from typing import Any

import ray

from memorybus.actors.gauges import SAMPLE_SECONDS, HubMetrics
from memorybus.actors.names import hub_actor_name, shard_actor_name
from memorybus.actors.runtime import gone, pick_one, unwrap
from memorybus.actors.targets import RayTargets
from memorybus.auth import gatekeeper_for
from memorybus.bus.hub import Hub
from memorybus.bus.ports import KeyValue
from memorybus.bus.routing import partition_of
from memorybus.config import Config
from memorybus.errors import ConfigError, MemoryBusError
from memorybus.memory.events import Event, EventFilter
from memorybus.scopes import Context, Level, Router
from memorybus.storage import dirlock
from memorybus.storage.kv import RedisKV, SqliteKV

log = logging.getLogger(__name__)


def _dir(config: Config, partition: int) -> str:
    return os.path.join(os.path.abspath(config.data_dir), f"bus-{partition}")


def _kv(config: Config, partition: int) -> KeyValue:
    """The partition's durable state. Its stored name (``bus-<n>``) predates the hub's
    actor name and is kept, so existing data directories and Redis keys stay readable."""
    if config.backend == "redis":
        if config.redis_url is None:  # Config refuses this; kept for the type checker
            raise ConfigError("redis_url", "is required when backend='redis'")
        return RedisKV.for_config(config, f"mb:{{{config.namespace}:bus-{partition}}}:kv")
    return SqliteKV(os.path.join(_dir(config, partition), "bus.sqlite"))


class HubActor:
    def __init__(self, config: Config, partition: int) -> None:
        self.config = config
        self.partition = partition
        self.router = Router(config.num_shards)
        self._gate = gatekeeper_for(config)
        self._shards: list[Any] | None = None
        self.hub = Hub(
            _kv(config, partition),
            self._read_events,
            self._last_seqs,
            self._deliver,
            queue_limit=config.bus.subscriber_queue,
            batch_size=config.bus.delivery_batch,
            targets=RayTargets(),
            cursor_flush_seconds=config.bus.cursor_flush_seconds,
            replay_page=config.bus.replay_page,
        )
        self._restored = False
        self._lock: dirlock.DirLock | None = None
        self._metrics = HubMetrics(config, partition)
        self._sampler: asyncio.Task[None] | None = None
        # restore the subscriptions as soon as the actor runs (after a restart too), not
        # when some unrelated call arrives: a call to itself, queued behind __init__
        self._self_restore = ray.get_runtime_context().current_actor.ready.remote()

    def _shard_handles(self) -> list[Any]:
        if self._shards is None:
            ns = self.config.namespace
            self._shards = [
                ray.get_actor(shard_actor_name(self.config, i), namespace=ns) for i in range(self.config.num_shards)
            ]
        return self._shards

    def _owners(self, context: Context) -> list[int]:
        return sorted({self.router.shard_for(s.key) for s in context.visible_scopes()})

    async def _read_events(
        self, context: Context, cursors: dict[str, int], flt: EventFilter, limit: int
    ) -> tuple[list[Event], dict[str, int], bool]:
        """One page of the logs of every shard owning a scope ``context`` sees (at most
        ``limit`` entries in all), the cursors after it, and whether more may follow."""
        shards = self._shard_handles()
        owners = self._owners(context)
        per_shard = max(1, limit // max(1, len(owners)))
        context = self._gate.as_service(context)  # a subscription's stored context: the hub reads for it
        try:
            results = await asyncio.gather(
                *(shards[i].read_events.remote(context, cursors, flt, per_shard) for i in owners)
            )
        except ray.exceptions.RayError as exc:  # a memorybus error naming the shard, never Ray's
            raise unwrap(exc) from None
        events: list[Event] = []
        merged = dict(cursors)
        more = False
        for evs, cur, shard_more in results:
            events.extend(evs)
            more = more or shard_more
            for k, v in cur.items():
                merged[k] = max(merged.get(k, 0), v)
        return events, merged, more

    async def _last_seqs(self, context: Context) -> dict[str, int]:
        shards = self._shard_handles()
        out: dict[str, int] = {}
        context = self._gate.as_service(context)
        try:
            parts = await asyncio.gather(*(shards[i].last_seqs.remote(context) for i in self._owners(context)))
        except ray.exceptions.RayError as exc:
            raise unwrap(exc) from None
        for part in parts:
            for k, v in part.items():
                out[k] = max(out.get(k, 0), v)
        return out

    def _deliver(self, target: Any, method: str, batch: list[Event]) -> Awaitable[Any]:
        """Push ``batch``: the call leaves now; the answer awaits its outcome, a failure
        as a memorybus error (the subscriber's own exception as it raised it,
        ActorUnavailable naming a subscriber that died or is gone)."""
        try:
            ref = getattr(target, method).remote(batch)
        except ray.exceptions.RayError as exc:
            return _failed(exc)
        return _answer(ref)

    async def _ensure_restored(self) -> None:
        if not self._restored:
            if self.config.backend == "embedded" and self._lock is None:  # one bus per data directory
                self._lock = dirlock.acquire(_dir(self.config, self.partition), f"namespace={self.config.namespace}")
            self.hub.restore()  # synchronous: no other call runs in between
            self._restored = True
            await self.hub.attach_parked(force=True)
            for sub in self.hub.parked():
                log.warning("subscription %r of %s parked: %s", sub.name, sub.context, sub.parked)

    async def ready(self) -> int:
        if self._sampler is None:  # the delivery-lag gauges, set on a timer (never on a call's path)
            self._sampler = asyncio.get_running_loop().create_task(self._sample_loop())
        await self._ensure_restored()
        return self.partition

    async def parked(self, auth: str = "") -> list[str]:
        """The parked subscriptions, one line each (operator only: names of every org)."""
        self._gate.operator(auth, "parked")
        await self._ensure_restored()
        return [f"{s.name!r} of {s.context} ({s.parked})" for s in self.hub.parked()]

    async def _sample_loop(self) -> None:
        while True:
            try:
                self._metrics.sample(list(self.hub.subs.values()), time.time())
            except Exception as exc:  # a failed sample never ends the timer (the gauges would vanish)
                log.warning("hub %d: delivery-lag sample failed: %r", self.partition, exc)
            await asyncio.sleep(SAMPLE_SECONDS)

    async def publish(self, auth: str, events: list[Event]) -> None:
        """Events a shard committed (operator only: the shards' own credential)."""
        self._gate.operator(auth, "publish")
        await self._ensure_restored()
        self.hub.publish(events)

    async def subscribe(
        self, name: str, context: Context, flt: EventFilter, target: Any, method: str, start: str
    ) -> dict[str, int]:
        context = self._gate.admit(context, "subscribe", write=False)
        await self._ensure_restored()
        return await self.hub.subscribe(name, context, flt, target, method, start)

    async def unsubscribe(self, name: str, context: Context) -> bool:
        context = self._gate.admit(context, "unsubscribe", write=False)
        await self._ensure_restored()
        return await self.hub.unsubscribe(name, context)

    async def cursors(self, name: str, context: Context) -> dict[str, int]:
        context = self._gate.admit(context, "subscription_cursors", write=False)
        await self._ensure_restored()
        return self.hub.cursors(name, context)

    async def pull(self, name: str, context: Context, ack: dict[str, int] | None, timeout: float) -> list[Event]:
        context = self._gate.admit(context, "pull", write=False)
        await self._ensure_restored()
        return await self.hub.pull(name, context, ack, timeout)

    async def erase_principal(self, auth: str, org: str, user: str, agent: str, dry_run: bool = False) -> int:
        """Delete an erased principal's subscriptions and cursors (operator only)."""
        self._gate.operator(auth, "erase")
        await self._ensure_restored()
        return self.hub.erase_principal(org, user, agent, dry_run=dry_run)

    async def stats(self, context: Context) -> dict[str, Any]:
        context = self._gate.admit(context, "bus_stats", write=False)
        await self._ensure_restored()
        return self.hub.stats(context)

    async def totals(self, auth: str = "") -> dict[str, int]:
        """Operator counters over every org (numbers only, no names): for ``memorybus top``."""
        self._gate.operator(auth, "hub_stats")
        await self._ensure_restored()
        subs = list(self.hub.subs.values())
        return {
            "published": sum(self.hub.published_by_org.values()),
            "delivered": sum(s.delivered for s in subs),
            "subscriptions": len(subs),
            "replaying": sum(1 for s in subs if (s.needs_replay or s.more) and not s.parked),
            "parked": sum(1 for s in subs if s.parked),
        }

    async def flush(self, auth: str = "") -> int:
        """Write the moved subscription cursors now (before a planned stop; any valid credential)."""
        if not self._gate.trusted:
            self._gate.grant(auth)
        return self.hub.flush()

    async def close(self, auth: str = "") -> None:
        """Write the moved cursors and close the durable state (before a planned stop; operator only)."""
        self._gate.operator(auth, "close")
        self.hub.flush()
        self.hub.kv.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    async def broadcast(self, context: Context, memory_id: str, to: str, op: str | None = None) -> Any:
        """Widen a memory: the owning shard checks and builds the copy, the shard of the
        wider scope stores it (idempotently)."""
        context = self._gate.admit(context, "broadcast", write=True)
        shards = self._shard_handles()
        routed = self.router.shard_for_id(memory_id)  # the one shard that may hold it
        asked = shards if routed is None else [shards[routed]]
        results = await asyncio.gather(
            *(s.broadcast_source.remote(context, memory_id, to) for s in asked), return_exceptions=True
        )
        copy = pick_one(results, memory_id)
        target = shards[self.router.shard_for(copy.scope.key)]
        return await target.put_broadcast.remote(context, copy, op)

    async def pid(self) -> int:
        return os.getpid()

    async def auth_reload(self) -> None:
        """Read the key ring again now (after a rotation or revocation)."""
        self._gate.reload()


def _mapped(exc: ray.exceptions.RayError) -> BaseException:
    if isinstance(exc, (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)):
        return gone(exc)
    return unwrap(exc)


async def _answer(ref: Any) -> Any:
    try:
        return await ref
    except ray.exceptions.RayError as exc:
        raise _mapped(exc) from None


async def _failed(exc: ray.exceptions.RayError) -> Any:
    raise _mapped(exc)


class HubPush:
    """A shard's live push of the events it committed to the hub actor of each event's
    org partition: fire and forget, best effort (the durable event log is the fallback
    when a push is lost). A hub that is not running yet is looked for again next time."""

    def __init__(self, config: Config, token: Any = lambda: "") -> None:
        self.config = config
        self._token = token  # the shard's own (operator) credential
        self._hubs: dict[int, Any] = {}

    def _hub(self, partition: int) -> Any:
        hub = self._hubs.get(partition)
        if hub is None:
            try:
                hub = ray.get_actor(hub_actor_name(self.config, partition), namespace=self.config.namespace)
            except ValueError:
                return None
            self._hubs[partition] = hub
        return hub

    def __call__(self, events: list[Event]) -> None:
        groups: dict[int, list[Event]] = {}
        for ev in events:
            groups.setdefault(partition_of(ev.node.scope.org, self.config.bus.partitions), []).append(ev)
        try:
            token = self._token()
        except MemoryBusError as exc:  # the key ring unreadable now: the log has the events
            log.warning("shard could not push %d event(s) to the hub: %r", len(events), exc)
            return
        for partition, evs in groups.items():
            hub = self._hub(partition)
            if hub is not None:
                try:
                    hub.publish.remote(token, evs)
                except ray.exceptions.RayError:  # the log has the events
                    self._hubs.pop(partition, None)


__all__ = ["HubActor", "HubPush", "Level", "partition_of"]
