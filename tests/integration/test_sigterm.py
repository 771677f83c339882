"""SIGTERM of a driver script closes its bus and leaves no Ray process behind.

Without the hook (measured): Ray's native failure-signal handler aborts the driver
(exit 134), close() never runs and the shard's SQLite WAL is left un-checkpointed.
The script runs in its own process with a private RAY_TMPDIR; Ray's processes are
counted by that directory in their command lines."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import signal, sys, time
import memorybus as mb
from memorybus import Config, Context
mode = sys.argv[2]
if mode == "own-handler":
    def mine(signum, frame):
        print("SCRIPT HANDLER", flush=True)
        raise SystemExit(7)
bus = mb.connect(Config.embedded(sys.argv[1], num_shards=1, namespace="sigterm"), num_cpus=2)
if mode == "own-handler":
    signal.signal(signal.SIGTERM, mine)  # a script's handler set after connect stays the script's
bus.remember("written before SIGTERM", Context("acme", "u1", "a1"))
print("READY", flush=True)
time.sleep(600)
"""


def ray_processes(tmp: str) -> list[int]:
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if tmp.encode() in cmd and b"python -c" not in cmd[:20]:
                found.append(int(entry))
    return found


def run_and_terminate(tmp_path: Path, mode: str, ray_tmp: str) -> tuple[int, str, Path]:
    data = tmp_path / "data"
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(data), mode], env=env, cwd=str(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    lines = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("READY"):
                break
        assert ray_processes(ray_tmp), "the script's Ray runs under its private temp dir"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
        lines.append(out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(lines), data


def wait_gone(ray_tmp: str, timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := ray_processes(ray_tmp)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def test_sigterm_closes_the_bus_and_leaves_no_ray_process(tmp_path, short_tmp):
    ray_tmp = short_tmp("mbsig")
    rc, out, data = run_and_terminate(tmp_path, "plain", ray_tmp)
    assert rc == signal.SIGTERM, out  # Ray's handler: sys.exit(15), not an abort (134)
    assert "SIGTERM received" not in out  # no native stack dump
    assert wait_gone(ray_tmp) == []
    # close() ran: the shard's store was closed cleanly (WAL checkpointed into the main file)
    shard = data / "shard-0"
    assert (shard / "records.sqlite").stat().st_size > 0
    assert not (shard / "records.sqlite-wal").exists() or (shard / "records.sqlite-wal").stat().st_size == 0
    import sqlite3

    with sqlite3.connect(shard / "records.sqlite") as db:
        rows = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert rows  # readable without its WAL


def test_a_scripts_own_sigterm_handler_set_after_connect_is_left_alone(tmp_path, short_tmp):
    ray_tmp = short_tmp("mbsig")
    rc, out, _ = run_and_terminate(tmp_path, "own-handler", ray_tmp)
    assert "SCRIPT HANDLER" in out and rc == 7, out
    assert wait_gone(ray_tmp) == []  # the exit still closes the bus and Ray (atexit)
