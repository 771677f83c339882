"""Backup marks in Redis (real server): the later time wins, atomically, outside the bus's keys."""

from __future__ import annotations

import threading

import pytest
import redis

from memorybus import Config
from memorybus.operator import monitoring as mon

pytestmark = pytest.mark.redis


def test_redis_marks_keep_the_latest_time_even_under_concurrent_writers(private_redis):
    client = redis.Redis.from_url(private_redis.url)
    marks = mon.RedisBackupMarks(client)
    assert marks.read() == {}
    times = [float(t) for t in range(1, 101)]
    threads = [threading.Thread(target=marks.record, args=("export", t)) for t in reversed(times)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    marks.record("redis", 5.5)
    assert marks.read() == {"export": 100.0, "redis": 5.5}
    assert client.keys("*") == [mon.BACKUP_KEY.encode()]  # one key, not under the bus's mb: prefix


def test_mark_backup_on_the_redis_backend_and_a_server_that_is_down(private_redis, tmp_path):
    config = Config.redis(private_redis.url, data_dir=str(tmp_path))
    assert mon.mark_backup(config, "export", 42.0)
    assert mon.backup_marks(config).read() == {"export": 42.0}
    private_redis.stop()
    assert mon.mark_backup(config, "export", 43.0) is False  # logged; the backup stays valid
