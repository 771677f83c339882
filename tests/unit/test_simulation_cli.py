"""``memorybus simulate`` refuses bad input with one line and status 2, and starts
and writes nothing (no Ray is started: these run in a plain subprocess)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--agents", "1"], "1 agents cannot give each of 2 orgs two agents"),
        (["--users", "30"], "30 users need at least as many agents"),
        (["--days", "0"], "days: must be a whole number between 1 and 3650"),
        (["--backend", "mongo"], "argument --backend: invalid choice"),
        (["--chaos", "--faults", "redis"], "a redis fault needs the redis backend"),
        (["--address", f"127.0.0.1:{_free_port()}"], "cannot reach a Ray cluster at 127.0.0.1:"),
        (["--address", "nowhere"], "is not HOST:PORT"),
    ],
)
def test_bad_input_gets_one_line_and_leaves_nothing(tmp_path, args, says):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "memorybus.cli", "simulate", *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0] and says in lines[0], proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output directory, no data
