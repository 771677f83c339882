"""The bus's metrics as Prometheus scrapes them from Ray's metrics agent (Ray 2.60).

A real local Ray (the tests' shared one: every Ray node's agent serves Prometheus on its
metrics export port, which ``ray.nodes()`` names), a real bus in a namespace of its own:
writes, a recall, a full export (a backup), a shard killed and restarted by Ray. The
scrape must hold every name the alert rules and the dashboard rely on, under Ray's
export naming, labelled with this bus's namespace (other buses of the shared Ray report
there too), with the restart labelled, the export's time as the backup time, and the
gauges still there after the bus has been idle longer than Ray's gauge expiry (20 s)."""

from __future__ import annotations

import re
import time
import urllib.request
import uuid

import pytest
import ray

import memorybus as mb
from memorybus import Config, Context
from memorybus.actors import fleet
from tests.unit.test_monitoring_rules import ROOT, exported_names

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]



@pytest.fixture(scope="module")
def port(ray_local) -> int:
    """The metrics export port of the shared Ray's one node."""
    (node,) = [n for n in ray.nodes() if n["Alive"]]
    return int(node["MetricsExportPort"])


def scrape(port: int) -> list[tuple[str, dict[str, str], float]]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = []
    for line in body.splitlines():
        m = re.match(r"^(ray_memorybus_\w+)\{(.*)\} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def wait_for(port: int, check, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(port)
        if check(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(2)


def has(samples, name, **labels) -> bool:
    return any(n == name and all(lab.get(k) == v for k, v in labels.items()) for n, lab, _ in samples)


def test_scraped_names_match_the_rules_naming_and_survive_restart_and_idle(port, tmp_path):
    ns = f"metrics_{uuid.uuid4().hex[:8]}"
    cfg = Config.embedded(tmp_path / "data", num_shards=1, namespace=ns)
    ctx = Context("acme", "u1", "a1")
    with mb.connect(cfg) as bus:
        bus.remember("The launch is on March 14", ctx)
        bus.remember("Alice owns the billing service", ctx)
        assert bus.recall("when is the launch?", ctx, k=1)
        before = time.time()
        bus.export(tmp_path / "all.mbx")
        handle = bus._shard_handles()[0]
        pid = ray.get(handle.pid.remote(), timeout=60)
        fleet.kill_bus_actor(cfg, "shard", 0)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if ray.get(handle.pid.remote(), timeout=10) != pid:
                    break
            except ray.exceptions.RayError:
                time.sleep(0.5)
        assert bus.recall("who owns billing?", ctx, k=1)  # the restarted shard opens its store on a call
        wanted = [
            ("ray_memorybus_shard_writes_total", {"namespace": ns, "shard": "shard-0"}),
            ("ray_memorybus_shard_memories", {"namespace": ns, "shard": "shard-0"}),
            ("ray_memorybus_shard_starts_total", {"namespace": ns, "restart": "0"}),
            ("ray_memorybus_shard_starts_total", {"namespace": ns, "restart": "1"}),
            ("ray_memorybus_shard_recall_seconds_bucket", {"namespace": ns}),
            ("ray_memorybus_delivery_oldest_undelivered_seconds", {"namespace": ns, "partition": "0"}),
            ("ray_memorybus_delivery_queued_events", {"namespace": ns, "partition": "0"}),
            ("ray_memorybus_backup_last_success_timestamp_seconds", {"namespace": ns, "kind": "export"}),
        ]
        samples = wait_for(port, lambda s: all(has(s, n, **lab) for n, lab in wanted))
        missing = [(n, lab) for n, lab in wanted if not has(samples, n, **lab)]
        assert missing == [], sorted({n for n, _, _ in samples})
        ours = [(n, v) for n, lab, v in samples if lab.get("namespace") == ns]
        backup = [v for n, v in ours if n == "ray_memorybus_backup_last_success_timestamp_seconds"]
        assert backup and all(before - 1 <= v <= time.time() for v in backup)
        memories = [v for n, v in ours if n == "ray_memorybus_shard_memories"]
        assert 2.0 in memories  # the restarted shard reopened its store and reports what it holds
        # every scraped memorybus metric is one the rules' checker knows (scan == reality)
        assert {n for n, _, _ in samples} <= exported_names(ROOT / "memorybus")
        # idle past Ray's gauge expiry: the timers keep the gauges there
        time.sleep(25)
        idle = scrape(port)
        assert has(idle, "ray_memorybus_shard_memories", namespace=ns, shard="shard-0")
        assert has(idle, "ray_memorybus_delivery_queued_events", namespace=ns, partition="0")
