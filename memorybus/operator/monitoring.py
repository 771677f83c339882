"""What the bus exports for monitoring, as plain data (no Ray here).

The actors turn these numbers into Ray metrics (see :mod:`memorybus.actors.gauges`);
the names below are the ones the code registers, before Ray's exporter adds its
``ray_`` prefix (and ``_total`` to counters). ``deploy/prometheus/alerts.yml`` and
``deploy/grafana/memorybus.json`` use the exported names; a test checks that every
name they use is registered here or by the actors.

Everything here is sampled by a timer, never on a call's path:

- :func:`delivery_lag` — per hub partition: events waiting in subscription queues
  and the age of the oldest of them, subscriptions catching up from the durable log.
- :func:`redis_memory` — ``used_memory`` and ``maxmemory`` from Redis ``INFO memory``.
- backup marks — the unix time of the last successful backup of each kind: ``redis``
  (a ``deploy/redis.sh backup`` snapshot, written by that script) and ``export``
  (``bus.export`` finished and its file was renamed into place). Kept where every
  shard can read them: a Redis hash (:data:`BACKUP_KEY`) on the Redis backend, a JSON
  file in the data directory (:data:`BACKUP_FILE`) on the embedded one. Recording
  one never fails the backup it records: an error there is logged and dropped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any, Protocol

log = logging.getLogger(__name__)

#: Redis hash: field (backup kind) -> unix time of the last successful backup of that kind
BACKUP_KEY = "memorybus:backups"
#: embedded backend: the same marks as a JSON object in the data directory
BACKUP_FILE = "backups.json"

#: metric names the actors register (Ray exports them as ``ray_<name>``, counters with ``_total``)
SHARD_WRITES = "memorybus_shard_writes"
SHARD_MEMORIES = "memorybus_shard_memories"
SHARD_STARTS = "memorybus_shard_starts"
SHARD_RECALL_SECONDS = "memorybus_shard_recall_seconds"
#: its buckets (seconds): a shard's part of a recall takes about a millisecond here
RECALL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
STORE_ERRORS = "memorybus_store_errors"
REDIS_USED_MEMORY = "memorybus_redis_used_memory_bytes"
REDIS_MAXMEMORY = "memorybus_redis_maxmemory_bytes"
BACKUP_LAST_SUCCESS = "memorybus_backup_last_success_timestamp_seconds"
DELIVERY_QUEUED = "memorybus_delivery_queued_events"
DELIVERY_MAX_QUEUED = "memorybus_delivery_max_queued_events"
DELIVERY_OLDEST = "memorybus_delivery_oldest_undelivered_seconds"
DELIVERY_REPLAYING = "memorybus_delivery_replaying_subscriptions"
DELIVERY_SUBSCRIPTIONS = "memorybus_delivery_subscriptions"


#: events of each queue that :func:`delivery_lag` looks at for the oldest one
LAG_SCAN = 256


class _Queued(Protocol):
    """What :func:`delivery_lag` reads of a subscription (a ``bus.records.Subscription``)."""

    queue: Any  # a deque of events, each with ``at`` (unix time of its commit)
    needs_replay: bool
    more: bool


def delivery_lag(subs: Iterable[_Queued], now: float) -> dict[str, float]:
    """Delivery lag of one hub partition at ``now``: the events waiting in all queues,
    the longest queue, the age in seconds of the oldest waiting event (0 when none
    waits), how many subscriptions are catching up from the durable log (their
    backlog is not in a queue: it is counted there, not here), and how many there are.
    The age looks at the first :data:`LAG_SCAN` events of each queue (a queue delivers
    in order per scope, so its oldest events are at its front), bounding a sample's cost
    at full queues. Never changes a subscription."""
    subs = list(subs)
    sizes = [len(s.queue) for s in subs]
    oldest = min((ev.at for s in subs for ev in islice(s.queue, LAG_SCAN)), default=None)
    return {
        DELIVERY_SUBSCRIPTIONS: float(len(subs)),
        DELIVERY_QUEUED: float(sum(sizes)),
        DELIVERY_MAX_QUEUED: float(max(sizes, default=0)),
        DELIVERY_OLDEST: max(0.0, now - oldest) if oldest is not None else 0.0,
        DELIVERY_REPLAYING: float(sum(1 for s in subs if s.needs_replay or s.more)),
    }


def redis_memory(info: Mapping[str, Any]) -> dict[str, float]:
    """``used_memory`` and ``maxmemory`` (0: no limit) from a parsed ``INFO memory``."""
    return {REDIS_USED_MEMORY: float(info.get("used_memory", 0)), REDIS_MAXMEMORY: float(info.get("maxmemory", 0))}


# ------------------------------------------------------------------ backup marks
class BackupMarks(Protocol):
    def record(self, kind: str, at: float) -> None: ...
    def read(self) -> dict[str, float]: ...


class FileBackupMarks:
    """Marks in a JSON file (embedded backend). A write replaces the file atomically
    (temporary file, fsync, rename), so a reader sees the old or the new marks."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)

    def read(self) -> dict[str, float]:
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)}

    def record(self, kind: str, at: float) -> None:
        marks = self.read()
        marks[kind] = max(float(at), marks.get(kind, 0.0))  # never moves back
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".backups-", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(marks, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


class RedisBackupMarks:
    """Marks in the Redis hash :data:`BACKUP_KEY` (outside the bus's ``mb:`` keys).
    ``client``: a redis-py client; its errors propagate (the caller decides)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def read(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for k, v in self.client.hgetall(BACKUP_KEY).items():
            with contextlib.suppress(ValueError):
                out[k.decode() if isinstance(k, bytes) else str(k)] = float(v)
        return out

    def record(self, kind: str, at: float) -> None:
        # the later of the stored time and this one, in one step on the server
        self.client.eval(
            "local c = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') "
            "if tonumber(ARGV[2]) > c then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end return 1",
            1, BACKUP_KEY, kind, repr(float(at)),
        )  # fmt: skip


def backup_marks(config: Any) -> BackupMarks:
    """The marks of ``config``'s bus (a :class:`memorybus.config.Config`)."""
    if config.backend == "redis":
        from memorybus.storage.redis_client import RedisTLS, open_redis  # TLS and Sentinel URLs too

        return RedisBackupMarks(open_redis(config.redis_url, tls=RedisTLS.from_config(config), socket_timeout=5.0))
    return FileBackupMarks(os.path.join(os.path.abspath(config.data_dir), BACKUP_FILE))


def mark_backup(config: Any, kind: str, at: float) -> bool:
    """Record a successful backup; False (and a warning) when the mark could not be
    written: the backup itself succeeded and stays valid."""
    try:
        marks = backup_marks(config)
        marks.record(kind, at)
        close = getattr(getattr(marks, "client", None), "close", None)
        if close is not None:
            close()
        return True
    except Exception as exc:  # never fail the backup over its monitoring mark (see test_code_rules)
        log.warning("backup %s succeeded but its time could not be recorded for monitoring: %r", kind, exc)
        return False
