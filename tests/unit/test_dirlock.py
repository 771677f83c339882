"""One bus per data directory: the lock a second process meets, and a crashed holder
that leaves nothing stuck. Holders are real processes (flock is per open file)."""

import os
import pickle
import signal
import subprocess
import sys
import time

import pytest

from memorybus.errors import ConfigError, DataDirInUse
from memorybus.storage import dirlock

HOLD = """
import sys, time
from memorybus.storage import dirlock
lock = dirlock.acquire(sys.argv[1], "namespace=first", wait=0)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def holder_process(directory, seconds=60.0):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory), str(seconds)],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})  # fmt: skip
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_holder_is_refused_naming_the_directory_and_the_holder(tmp_path):
    proc = holder_process(tmp_path)
    try:
        assert dirlock.is_locked(str(tmp_path))
        started = time.monotonic()
        with pytest.raises(DataDirInUse) as err:
            dirlock.acquire(str(tmp_path), "namespace=second", wait=0.3)
        assert time.monotonic() - started < 2.0  # refused fast
        assert isinstance(err.value, ConfigError) and err.value.directory == str(tmp_path)
        text = str(err.value)
        assert str(tmp_path) in text and f"pid={proc.pid}" in text and "namespace=first" in text
        assert "namespace=first" in dirlock.holder(str(tmp_path))  # the refused one wrote nothing
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holders_lock_is_taken_again(tmp_path):
    proc = holder_process(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)  # a crash: no cleanup runs
    proc.wait()
    assert not dirlock.is_locked(str(tmp_path))
    lock = dirlock.acquire(str(tmp_path), "namespace=second", wait=0)
    assert lock.held and f"pid={os.getpid()}" in dirlock.holder(str(tmp_path))
    lock.release()
    assert not lock.held and not dirlock.is_locked(str(tmp_path))


def test_a_holder_going_away_within_the_wait_is_waited_for(tmp_path):
    proc = holder_process(tmp_path, seconds=0.5)  # a bus being closed
    try:
        lock = dirlock.acquire(str(tmp_path), "namespace=next", wait=10.0)
        assert lock.held
        lock.release()
    finally:
        proc.wait()


def test_a_released_lock_can_be_taken_again_in_the_same_process(tmp_path):
    first = dirlock.acquire(str(tmp_path / "new" / "dir"), "a", wait=0)  # the directory is made
    with pytest.raises(DataDirInUse):
        dirlock.acquire(str(tmp_path / "new" / "dir"), "b", wait=0)  # another open file: refused too
    first.release()
    dirlock.acquire(str(tmp_path / "new" / "dir"), "b", wait=0).release()


def test_data_dir_in_use_crosses_actor_boundaries_intact():
    err = pickle.loads(pickle.dumps(DataDirInUse("/data/shard-0", "pid=7 host=h namespace=a")))
    assert isinstance(err, DataDirInUse) and err.directory == "/data/shard-0" and err.field == "data_dir"
    assert "pid=7" in str(err) and "/data/shard-0" in str(err)
