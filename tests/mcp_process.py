"""``memorybus mcp`` as a server process for the integration tests: started in its own
session with its output in a log file, waited for until its port accepts, stopped
with its whole process group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

#: seconds a server has to stop after SIGTERM: the listener's grace for open connections
#: (memorybus.integrations.mcp_http.GRACEFUL_SHUTDOWN_S, 5 s), then the bus's shutdown
STOP_S = 20.0


@contextmanager
def server_process(
    cmd: list[str], log_path: Path, port: int, *, timeout: float, what: str, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``cmd`` (in ``env``, or this process's environment) until the block ends; the
    block starts once 127.0.0.1:``port`` accepts.

    The test fails (with the log's tail) if the process exits first or the port does not
    open within ``timeout`` seconds; ``what`` names the server in that message.
    """
    log = open(log_path, "wb")  # noqa: SIM115 - closed once the process is stopped
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=None if env is None else dict(env))  # fmt: skip
    try:
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        else:
            pytest.fail(f"the {what} server did not start: " + log_path.read_text()[-3000:])
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        stopped = True
        try:
            proc.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            stopped = False
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()
    # a server must stop on SIGTERM by itself, whatever its clients left open (checked
    # after the block: a failure inside it is reported first)
    assert stopped, f"the {what} server was still running {STOP_S} s after SIGTERM: " + log_path.read_text()[-3000:]
