"""A private Redis Sentinel set on loopback: one master, ``replicas`` replicas and three
sentinels, every process its own port and directory, stopped by pid.

Data nodes admit only ACL users (as deploy/redis.sh runs them): ``memorybus`` (the
bus's, a random password shared by every node, since any may become the master) and
``admin`` (the sentinels' and the replicas' login). The sentinels require a password
of their own. Failure detection is fast: ``down-after-milliseconds`` 400,
``failover-timeout`` 2000.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.conftest import AclRedisServer, free_port

MASTER_NAME = "mbset"


class SentinelSet:
    def __init__(self, root: Path, replicas: int = 2) -> None:
        self.root = root
        self.password = os.urandom(16).hex()
        self.admin_password = os.urandom(16).hex()
        self.sentinel_password = os.urandom(16).hex()
        self.nodes: list[AclRedisServer] = []
        for i in range(1 + replicas):
            d = root / f"node{i}"
            d.mkdir()
            node = AclRedisServer(d)
            node.password, node.admin_password = self.password, self.admin_password
            self.nodes.append(node)
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)
        return (f"redis+sentinel://{AclRedisServer.USER}:{self.password}@{hosts}/{MASTER_NAME}/0"
                f"?sentinel_password={self.sentinel_password}")

    def start(self) -> None:
        master = self.nodes[0]
        for node in self.nodes:  # a replica's first full sync starts at once, not after 5 s
            node.arguments = (lambda base=node.arguments: [*base(), "--repl-diskless-sync-delay", "0"])  # type: ignore[method-assign]
        master.start()
        for node in self.nodes[1:]:
            extra = ["--replicaof", "127.0.0.1", str(master.port), "--masteruser", "admin",
                     "--masterauth", self.admin_password]
            node.arguments = (lambda base=node.arguments, extra=extra: [*base(), *extra])  # type: ignore[method-assign]
            node.start()
        for port in self.sentinel_ports:
            d = self.root / f"sentinel{port}"
            d.mkdir()
            conf = d / "sentinel.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {d}\n"
                f"requirepass {self.sentinel_password}\nsentinel sentinel-pass {self.sentinel_password}\n"
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {master.port} 2\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} 400\n"
                f"sentinel failover-timeout {MASTER_NAME} 2000\n"
                f"sentinel parallel-syncs {MASTER_NAME} 2\n"
                f"sentinel auth-user {MASTER_NAME} admin\nsentinel auth-pass {MASTER_NAME} {self.admin_password}\n"
            )
            conf.chmod(0o600)
            binary = shutil.which("redis-server")
            assert binary
            self.sentinels.append(subprocess.Popen([binary, str(conf), "--sentinel"], stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.DEVNULL, start_new_session=True))
        self.wait_until(lambda: self.sentinels_agree_on(master.port) and self.replicas_online(master) == len(
            self.nodes) - 1, 15, "the sentinel set did not come up")

    def sentinel(self, port: int) -> Any:
        import redis

        return redis.Redis(port=port, password=self.sentinel_password, socket_timeout=0.5)

    def master_port_seen(self, port: int) -> int | None:
        try:
            return int(self.sentinel(port).sentinel_get_master_addr_by_name(MASTER_NAME)[1])
        except Exception:
            return None

    def sentinels_agree_on(self, master_port: int) -> bool:
        """Every sentinel names ``master_port`` and knows the two others."""
        for port in self.sentinel_ports:
            if self.master_port_seen(port) != master_port:
                return False
            try:
                if int(self.sentinel(port).sentinel_master(MASTER_NAME)["num-other-sentinels"]) < 2:
                    return False
            except Exception:
                return False
        return True

    def replicas_online(self, master: AclRedisServer) -> int:
        """Replicas of ``master`` past their initial sync (those WAIT can count)."""
        try:
            info = master.admin(socket_timeout=0.5).info("replication")
            return sum(1 for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)
                       and v.get("state") == "online")
        except Exception:
            return 0

    def node_on(self, port: int) -> AclRedisServer:
        return next(n for n in self.nodes if n.port == port)

    @staticmethod
    def wait_until(check: Any, timeout: float, what: str) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if check():
                return
            time.sleep(0.05)
        raise AssertionError(what)

    def stop(self) -> None:
        for proc in self.sentinels:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        for node in self.nodes:
            node.stop()
