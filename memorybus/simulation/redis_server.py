"""A private redis-server for ``memorybus simulate --backend redis``.

Loopback only, its own port and directory, AOF with ``appendfsync always`` (an
acknowledged write survives ``kill -9``). The chaos schedule kills it with
SIGKILL and starts it again on the same directory and port.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

from memorybus.errors import ConfigError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    def __init__(self, directory: str, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ConfigError("backend", "--backend redis needs the redis-server binary on PATH")
        self.binary = binary
        self.dir = directory
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        os.makedirs(self.dir, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise ConfigError("backend", f"redis-server did not start on port {self.port}")

    def kill9(self) -> None:
        """``kill -9`` the server (its AOF stays on disk)."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        self.kill9()
        self.proc = None
