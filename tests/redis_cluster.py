"""A private Redis Cluster on loopback for tests and benchmarks: ``masters`` primaries
(each with ``replicas`` replicas), every node ``--cluster-enabled yes`` with its AOF
fsync'd on every write, each in its own directory; stopped by pid.

Three or more primaries are joined with ``redis-cli --cluster create`` (what an
operator runs); one or two (below its minimum) with ``CLUSTER ADDSLOTSRANGE`` and
``CLUSTER MEET``, the same layout by hand.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.conftest import free_port, wait_for_ping

SLOTS = 16384


def _fresh_port(taken: set[int]) -> int:
    while (port := free_port()) in taken:
        pass
    taken.add(port)
    return port


class ClusterNode:
    def __init__(self, directory: Path, node_timeout_ms: int, taken: set[int]) -> None:
        self.dir = directory
        self.port, self.bus_port = _fresh_port(taken), _fresh_port(taken)  # bus: port + 10000 may pass 65535
        self.node_timeout_ms = node_timeout_ms
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed"
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
             "--cluster-enabled", "yes", "--cluster-port", str(self.bus_port), "--cluster-config-file", "nodes.conf",
             "--cluster-node-timeout", str(self.node_timeout_ms), "--appendonly", "yes",
             "--appendfsync", "always", "--save", "", "--protected-mode", "no",
             # a replica is listed in CLUSTER SLOTS once its offset is above 0, which takes the
             # master's first ping to it: every second here, not every 10 s (Redis's default)
             "--repl-ping-replica-period", "1",
             "--repl-diskless-sync-delay", "0"],  # and a replica's first sync starts at once, not after 5 s
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def client(self, **kw: Any) -> Any:
        import redis

        return redis.Redis(port=self.port, socket_timeout=kw.pop("socket_timeout", 2.0), **kw)

    def wait_up(self, seconds: float = 30) -> None:
        wait_for_ping(self.client, seconds, f"redis-server on {self.address} did not start")

    def info(self, section: str) -> dict[str, Any]:
        return dict(self.client().info(section))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive():
            assert self.proc is not None
            os.kill(self.proc.pid, sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                self.proc.wait(timeout=10)


class LocalRedisCluster:
    """``masters`` primaries and ``masters * replicas`` replicas on free loopback ports."""

    def __init__(self, directory: Path, masters: int = 3, replicas: int = 1, node_timeout_ms: int = 1000) -> None:
        self.dir = directory
        taken: set[int] = set()
        self.nodes = [ClusterNode(directory / f"node-{i}", node_timeout_ms, taken)
                      for i in range(masters * (1 + replicas))]
        self.masters, self.replicas = masters, replicas

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.nodes[0].port}/0"

    def url_of(self, node: ClusterNode) -> str:
        return f"redis://127.0.0.1:{node.port}/0"

    def start(self) -> None:
        for node in self.nodes:
            node.start()
        for node in self.nodes:
            node.wait_up()
        if self.masters >= 3:
            subprocess.run(["redis-cli", "--cluster", "create", *(n.address for n in self.nodes),
                            "--cluster-replicas", str(self.replicas), "--cluster-yes"],
                           check=True, capture_output=True, timeout=60)
        else:
            self._join_by_hand()
        self.wait_ok()

    def _join_by_hand(self) -> None:
        primaries = self.nodes[: self.masters]
        per = SLOTS // self.masters
        for i, node in enumerate(primaries):
            last = SLOTS - 1 if i == self.masters - 1 else (i + 1) * per - 1
            node.client().execute_command("CLUSTER", "ADDSLOTSRANGE", i * per, last)
        first = self.nodes[0]
        for node in self.nodes[1:]:
            node.client().execute_command("CLUSTER", "MEET", "127.0.0.1", first.port, first.bus_port)
        ids = [p.client().execute_command("CLUSTER", "MYID").decode() for p in primaries]
        deadline = time.time() + 20
        for j, node in enumerate(self.nodes[self.masters :]):
            master = ids[j % self.masters]
            while True:
                try:
                    node.client().execute_command("CLUSTER", "REPLICATE", master)
                    break
                except Exception:  # the replica has not yet heard of its master
                    if time.time() > deadline:
                        raise
                    time.sleep(0.1)

    def wait_ok(self, seconds: float = 60) -> None:
        """Until every live node says ``cluster_state:ok`` and knows every replica."""
        deadline = time.time() + seconds
        last: object = None
        while time.time() < deadline:
            try:
                live = [n for n in self.nodes if n.alive()]
                states = [n.client().execute_command("CLUSTER", "INFO") for n in live]
                text = [s.decode() if isinstance(s, bytes) else str(s) for s in states]
                if all("cluster_state:ok" in t for t in text) and self._replicas_synced(live):
                    return
                last = text
            except Exception as exc:  # a node still loading or electing
                last = exc
            time.sleep(0.1)
        raise RuntimeError(f"the Redis Cluster did not reach cluster_state:ok: {last!r}")

    def _replicas_synced(self, live: list[ClusterNode]) -> bool:
        for node in live:
            info = node.info("replication")
            if info.get("role") == "slave" and info.get("master_link_status") != "up":
                return False
            ranges = node.client().execute_command("CLUSTER", "SLOTS")  # every node knows every replica
            if sum(len(r) - 3 for r in ranges) < len(live) - self.masters:
                return False
        return True

    def primaries(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.alive() and n.info("replication").get("role") == "master"]

    def owner_port(self, slot: int) -> int | None:
        """The port of ``slot``'s primary as a live node sees it (None: none owns it)."""
        node = next(n for n in self.nodes if n.alive())
        for start, end, primary, *_ in node.client().execute_command("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return int(primary[1])
        return None

    def owner_of(self, slot: int) -> ClusterNode:
        port = self.owner_port(slot)
        return next(n for n in self.nodes if n.port == port)

    def node_id(self, node: ClusterNode) -> str:
        return node.client().execute_command("CLUSTER", "MYID").decode()

    def stop(self) -> None:
        for node in self.nodes:
            if node.alive():
                assert node.proc is not None
                os.kill(node.proc.pid, signal.SIGCONT)
            node.kill()
