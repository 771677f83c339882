"""The bus's Ray metrics: what the shard and hub actors export, and the timers that
keep gauges fresh.

Ray 2.60 exports a metric registered as ``name`` as ``ray_name`` (counters as
``ray_name_total``), with the process's ``WorkerId`` among the labels. Its agent
drops a gauge that was not set again within two report intervals (20 s by
default), so every gauge here is set again every :data:`SAMPLE_SECONDS` by a
timer, whether or not anything changed; counters are kept by the agent after
their process died (so a restarted shard's series add up per node).

Nothing here runs on a call's path but a counter increment or a histogram
observation (in-process aggregation): Redis ``INFO`` and
the backup marks are read every :data:`SLOW_SAMPLE_SECONDS` by the timer. A sample
that fails is counted as a store error (``op="sample"``) and the timer goes on.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import ray
from ray.util import metrics

from memorybus.config import Config
from memorybus.errors import StoreUnavailable
from memorybus.operator import monitoring as mon

#: seconds between two settings of every gauge (under Ray's 20 s gauge expiry)
SAMPLE_SECONDS = 5.0
#: seconds between two reads of Redis INFO and of the backup marks
SLOW_SAMPLE_SECONDS = 30.0


class ShardMetrics:
    """One shard actor's metrics: writes, memories, starts, store errors, and (read by
    its timer) Redis memory and backup times."""

    def __init__(self, config: Config, shard: str, restarted: bool) -> None:
        self.config = config
        self.tags = {"namespace": config.namespace, "shard": shard}
        keys = ("namespace", "shard")
        self.writes = metrics.Counter(mon.SHARD_WRITES, "committed changes (events)", tag_keys=keys)
        self.memories = metrics.Gauge(mon.SHARD_MEMORIES, "memories held by the shard", tag_keys=keys)
        self.starts = metrics.Counter(mon.SHARD_STARTS, "shard actor starts (restart=1: restarted by Ray)",
                                      tag_keys=(*keys, "restart"))  # fmt: skip
        self.errors = metrics.Counter(mon.STORE_ERRORS, "StoreUnavailable raised by the shard's store",
                                      tag_keys=(*keys, "op"))  # fmt: skip
        self.recall = metrics.Histogram(mon.SHARD_RECALL_SECONDS, "a shard's part of a recall (seconds)",
                                        boundaries=list(mon.RECALL_BUCKETS), tag_keys=keys)  # fmt: skip
        ns = ("namespace",)
        self.redis_used = metrics.Gauge(mon.REDIS_USED_MEMORY, "Redis INFO used_memory", tag_keys=ns)
        self.redis_max = metrics.Gauge(mon.REDIS_MAXMEMORY, "Redis INFO maxmemory (0: none)", tag_keys=ns)
        self.backup = metrics.Gauge(mon.BACKUP_LAST_SUCCESS, "unix time of the last successful backup",
                                    tag_keys=("namespace", "kind"))  # fmt: skip
        self.starts.inc(1, tags={**self.tags, "restart": "1" if restarted else "0"})
        self._slow: dict[str, float] = {}
        self._marks: dict[str, float] = {}
        self._slow_at = 0.0

    def wrote(self, events: int) -> None:
        self.writes.inc(events, tags=self.tags)

    def recalled(self, seconds: float) -> None:
        self.recall.observe(seconds, tags=self.tags)

    @contextlib.contextmanager
    def counting(self, op: str) -> Iterator[None]:
        """Counts a StoreUnavailable raised inside (and lets it through)."""
        try:
            yield
        except StoreUnavailable:
            self.errors.inc(1, tags={**self.tags, "op": op})
            raise

    def sample(self, shard: Any, now: float) -> None:
        """Set every gauge; Redis and the backup marks are read again when due."""
        if shard is None:
            return
        self.memories.set(len(shard.core.nodes), tags=self.tags)
        if now - self._slow_at >= SLOW_SAMPLE_SECONDS:
            self._slow_at = now
            with self.counting("sample"):
                self._read_slow(shard)
        ns = {"namespace": self.config.namespace}
        if self._slow:
            self.redis_used.set(self._slow[mon.REDIS_USED_MEMORY], tags=ns)
            self.redis_max.set(self._slow[mon.REDIS_MAXMEMORY], tags=ns)
        for kind, at in self._marks.items():
            self.backup.set(at, tags={**ns, "kind": kind})

    def _read_slow(self, shard: Any) -> None:
        client = getattr(shard.store, "client", None)  # a RedisStore's redis-py client
        try:
            if client is not None:
                self._slow = mon.redis_memory(client.info("memory"))
                self._marks = mon.RedisBackupMarks(client).read()
            else:
                self._marks = mon.backup_marks(self.config).read()
        except Exception as exc:  # a sample's failure is a store error, counted (see test_code_rules)
            raise StoreUnavailable(self.config.backend, f"monitoring sample: {exc!r}") from None

    def start(self, shard: Callable[[], Any]) -> None:
        """The timer: samples ``shard()`` (the open shard or None) every SAMPLE_SECONDS."""

        def tick() -> None:
            while True:
                with contextlib.suppress(StoreUnavailable):
                    self.sample(shard(), time.time())
                time.sleep(SAMPLE_SECONDS)

        threading.Thread(target=tick, name="metrics-sample", daemon=True).start()


class HubMetrics:
    """One hub partition's delivery lag (see :func:`memorybus.operator.monitoring.delivery_lag`)."""

    def __init__(self, config: Config, partition: int) -> None:
        self.tags = {"namespace": config.namespace, "partition": str(partition)}
        keys = ("namespace", "partition")
        self.gauges = {
            mon.DELIVERY_SUBSCRIPTIONS: metrics.Gauge(mon.DELIVERY_SUBSCRIPTIONS, "subscriptions", tag_keys=keys),
            mon.DELIVERY_QUEUED: metrics.Gauge(mon.DELIVERY_QUEUED, "events waiting in queues", tag_keys=keys),
            mon.DELIVERY_MAX_QUEUED: metrics.Gauge(mon.DELIVERY_MAX_QUEUED, "longest queue", tag_keys=keys),
            mon.DELIVERY_OLDEST: metrics.Gauge(mon.DELIVERY_OLDEST, "age of the oldest waiting event",
                                               tag_keys=keys),
            mon.DELIVERY_REPLAYING: metrics.Gauge(mon.DELIVERY_REPLAYING, "subscriptions catching up from the log",
                                                  tag_keys=keys),
        }

    def sample(self, subs: Any, now: float) -> dict[str, float]:
        values = mon.delivery_lag(subs, now)
        for name, value in values.items():
            self.gauges[name].set(value, tags=self.tags)
        return values


def actor_restarts() -> int:
    """How many times Ray has restarted the current actor (0: its first start, or unknown).

    Asks the GCS what ``RuntimeContext.was_current_actor_reconstructed`` asks, without
    that property's deprecation warning (it reads the deprecated ``actor_id``)."""
    try:
        from ray._private.state import actors

        actor_id = ray.get_runtime_context().get_actor_id()
        info = actors(actor_id=actor_id) if actor_id else None
        return int(info.get("NumRestarts", 0)) if info else 0
    except (ImportError, AttributeError, TypeError, ValueError, ray.exceptions.RayError):  # pragma: no cover
        return 0
