"""ShardMetrics without a Ray instance (Ray's metric objects record nothing then): store
errors are counted and re-raised untouched, other errors pass uncounted, and the timer's
sample reads the backup marks and stays cheap between slow samples."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memorybus import Config
from memorybus.actors import gauges
from memorybus.errors import InvalidRequest, StoreUnavailable
from memorybus.operator import monitoring as mon


class Counted:
    def __init__(self) -> None:
        self.calls: list[tuple[float, dict[str, str]]] = []

    def inc(self, value: float = 1.0, tags: dict[str, str] | None = None) -> None:
        self.calls.append((value, dict(tags or {})))

    set = inc  # a gauge's set, recorded the same way


@pytest.fixture
def metrics(tmp_path):
    m = gauges.ShardMetrics(Config(data_dir=str(tmp_path)), "shard-3", restarted=False)
    m.errors = Counted()
    m.memories = Counted()
    m.backup = Counted()
    return m


def test_store_errors_are_counted_per_op_and_raised_unchanged(metrics):
    err = StoreUnavailable("redis", "ConnectionError: gone")
    with pytest.raises(StoreUnavailable) as raised, metrics.counting("write"):
        raise err
    assert raised.value is err
    with pytest.raises(InvalidRequest), metrics.counting("read"):
        raise InvalidRequest("k", "must be positive")  # a caller's mistake is not a store error
    assert metrics.errors.calls == [(1, {"namespace": "memorybus", "shard": "shard-3", "op": "write"})]


def test_sample_sets_memories_and_the_backup_marks_of_the_data_dir(metrics, tmp_path):
    mon.FileBackupMarks(tmp_path / mon.BACKUP_FILE).record("export", 1700.0)
    shard = SimpleNamespace(core=SimpleNamespace(nodes={"a": 1, "b": 2}), store=object())
    metrics.sample(shard, now=1000.0)
    assert metrics.memories.calls == [(2, {"namespace": "memorybus", "shard": "shard-3"})]
    assert metrics.backup.calls == [(1700.0, {"namespace": "memorybus", "kind": "export"})]
    # a newer mark is read at the next slow sample, not before; the cached one is set again meanwhile
    mon.FileBackupMarks(tmp_path / mon.BACKUP_FILE).record("export", 1800.0)
    metrics.sample(shard, now=1000.0 + gauges.SAMPLE_SECONDS)
    metrics.sample(shard, now=1000.0 + gauges.SLOW_SAMPLE_SECONDS)
    assert [v for v, _ in metrics.backup.calls] == [1700.0, 1700.0, 1800.0]
    metrics.sample(None, now=2000.0)  # a shard that has not opened its store: nothing set
    assert len(metrics.memories.calls) == 3


def test_a_failing_redis_sample_is_a_counted_store_error(metrics):
    class Down:
        def info(self, section: str) -> dict[str, int]:
            raise ConnectionError("redis is down")

    shard = SimpleNamespace(core=SimpleNamespace(nodes={}), store=SimpleNamespace(client=Down()))
    with pytest.raises(StoreUnavailable, match="monitoring sample"):
        metrics.sample(shard, now=100.0)
    assert metrics.errors.calls == [(1, {"namespace": "memorybus", "shard": "shard-3", "op": "sample"})]
