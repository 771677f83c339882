"""The plain monitoring pieces: delivery lag, Redis memory, backup marks (no Ray, no servers)."""

from __future__ import annotations

import json
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace

from memorybus import Config
from memorybus.operator import monitoring as mon


@dataclass
class Sub:
    queue: deque = field(default_factory=deque)
    needs_replay: bool = False
    more: bool = False


def ev(at: float) -> SimpleNamespace:
    return SimpleNamespace(at=at)


def test_delivery_lag_counts_queues_and_ages_the_oldest_waiting_event():
    subs = [Sub(deque([ev(100.0), ev(90.0)])), Sub(deque([ev(95.0)] * 3)), Sub(needs_replay=True), Sub(more=True)]
    lag = mon.delivery_lag(subs, now=130.0)
    assert lag == {
        mon.DELIVERY_SUBSCRIPTIONS: 4.0,
        mon.DELIVERY_QUEUED: 5.0,
        mon.DELIVERY_MAX_QUEUED: 3.0,
        mon.DELIVERY_OLDEST: 40.0,  # the oldest waiting event, wherever it is in its queue (replay sorts by scope)
        mon.DELIVERY_REPLAYING: 2.0,
    }
    assert [len(s.queue) for s in subs] == [2, 3, 0, 0]  # read, never consumed


def test_delivery_lag_of_idle_or_empty_hub_is_zero_not_missing():
    assert mon.delivery_lag([], now=5.0) == dict.fromkeys(
        (mon.DELIVERY_SUBSCRIPTIONS, mon.DELIVERY_QUEUED, mon.DELIVERY_MAX_QUEUED, mon.DELIVERY_OLDEST,
         mon.DELIVERY_REPLAYING), 0.0)  # fmt: skip
    # an event stamped by a shard whose clock runs ahead never gives a negative age
    assert mon.delivery_lag([Sub(deque([ev(200.0)]))], now=100.0)[mon.DELIVERY_OLDEST] == 0.0


def test_redis_memory_reads_info_fields():
    assert mon.redis_memory({"used_memory": 1234, "maxmemory": 0, "used_memory_rss": 9}) == {
        mon.REDIS_USED_MEMORY: 1234.0, mon.REDIS_MAXMEMORY: 0.0}  # fmt: skip


def test_file_marks_keep_the_latest_time_per_kind(tmp_path):
    marks = mon.FileBackupMarks(tmp_path / "d" / mon.BACKUP_FILE)
    assert marks.read() == {}
    marks.record("export", 100.0)
    marks.record("redis", 50.0)
    marks.record("export", 80.0)  # an older export finishing late never moves the mark back
    assert marks.read() == {"export": 100.0, "redis": 50.0}
    assert sorted(os.listdir(tmp_path / "d")) == [mon.BACKUP_FILE]  # no temporary file left


def test_file_marks_ignore_a_damaged_file(tmp_path):
    path = tmp_path / mon.BACKUP_FILE
    path.write_text("{not json")
    marks = mon.FileBackupMarks(path)
    assert marks.read() == {}
    path.write_text(json.dumps({"export": "yesterday", "redis": 7, "flag": True}))
    assert marks.read() == {"redis": 7.0}
    marks.record("export", 9.0)  # a damaged file is replaced by a good one
    assert json.loads(path.read_text()) == {"redis": 7.0, "export": 9.0}


def test_concurrent_readers_see_old_or_new_marks_never_a_torn_file(tmp_path):
    marks = mon.FileBackupMarks(tmp_path / mon.BACKUP_FILE)
    marks.record("export", 1.0)
    seen: list[dict[str, float]] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.append(marks.read())

    reader = threading.Thread(target=read)
    reader.start()
    for t in range(2, 200):
        marks.record("export", float(t))
    stop.set()
    reader.join()
    assert seen and all(m.get("export", 0) >= 1.0 for m in seen)


def test_mark_backup_on_the_embedded_backend_writes_the_data_dirs_file(tmp_path):
    config = Config(data_dir=str(tmp_path / "data"))
    assert mon.mark_backup(config, "export", 1234.5)
    assert mon.backup_marks(config).read() == {"export": 1234.5}
    assert (tmp_path / "data" / mon.BACKUP_FILE).is_file()


def test_a_mark_that_cannot_be_written_never_fails_the_backup(tmp_path, caplog):
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data directory should be")
    config = Config(data_dir=str(blocker))
    assert mon.mark_backup(config, "export", 1.0) is False
    assert "could not be recorded" in caplog.text
    assert blocker.read_text() == "a file where the data directory should be"


def test_delivery_lag_costs_at_most_lag_scan_events_per_queue():
    full = Sub(deque([ev(100.0)] * mon.LAG_SCAN + [ev(1.0)] * 10_000))  # a full queue's tail is not read
    lag = mon.delivery_lag([full], now=150.0)
    assert lag[mon.DELIVERY_QUEUED] == mon.LAG_SCAN + 10_000
    assert lag[mon.DELIVERY_OLDEST] == 50.0
