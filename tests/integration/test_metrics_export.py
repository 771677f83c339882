"""The bus's metrics as Prometheus scrapes them from Ray's metrics agent (Ray 2.60).

A real local Ray with a metrics export port, a real bus: writes, a recall, a full
export (a backup), a shard killed and restarted by Ray. The scrape must hold every
name the alert rules and the dashboard rely on, under Ray's export naming, with the
restart labelled, the export's time as the backup time, and the gauges still there
after the bus has been idle longer than Ray's gauge expiry (20 s)."""

from __future__ import annotations

import re
import time
import urllib.request

import pytest
import ray

import memorybus as mb
from memorybus import Config, Context
from memorybus.actors import fleet
from tests.conftest import free_port
from tests.unit.test_monitoring_rules import ROOT, exported_names

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]

PORT = free_port()


@pytest.fixture(scope="module")
def ray_metrics():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             _metrics_export_port=PORT)  # fmt: skip
    yield
    ray.shutdown()


def scrape() -> list[tuple[str, dict[str, str], float]]:
    body = urllib.request.urlopen(f"http://127.0.0.1:{PORT}/metrics", timeout=10).read().decode()
    out = []
    for line in body.splitlines():
        m = re.match(r"^(ray_memorybus_\w+)\{(.*)\} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def wait_for(check, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape()
        if check(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(2)


def has(samples, name, **labels) -> bool:
    return any(n == name and all(lab.get(k) == v for k, v in labels.items()) for n, lab, _ in samples)


def test_scraped_names_match_the_rules_naming_and_survive_restart_and_idle(ray_metrics, tmp_path):
    cfg = Config.embedded(tmp_path / "data", num_shards=1, namespace="metrics")
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
            ("ray_memorybus_shard_writes_total", {"namespace": "metrics", "shard": "shard-0"}),
            ("ray_memorybus_shard_memories", {"namespace": "metrics", "shard": "shard-0"}),
            ("ray_memorybus_shard_starts_total", {"restart": "0"}),
            ("ray_memorybus_shard_starts_total", {"restart": "1"}),
            ("ray_memorybus_shard_recall_seconds_bucket", {"namespace": "metrics"}),
            ("ray_memorybus_delivery_oldest_undelivered_seconds", {"partition": "0"}),
            ("ray_memorybus_delivery_queued_events", {"partition": "0"}),
            ("ray_memorybus_backup_last_success_timestamp_seconds", {"kind": "export"}),
        ]
        samples = wait_for(lambda s: all(has(s, n, **lab) for n, lab in wanted))
        missing = [(n, lab) for n, lab in wanted if not has(samples, n, **lab)]
        assert missing == [], sorted({n for n, _, _ in samples})
        backup = [v for n, lab, v in samples if n == "ray_memorybus_backup_last_success_timestamp_seconds"]
        assert all(before - 1 <= v <= time.time() for v in backup)
        memories = [v for n, lab, v in samples if n == "ray_memorybus_shard_memories"]
        assert 2.0 in memories  # the restarted shard reopened its store and reports what it holds
        # every scraped memorybus metric is one the rules' checker knows (scan == reality)
        assert {n for n, _, _ in samples} <= exported_names(ROOT / "memorybus")
        # idle past Ray's gauge expiry: the timers keep the gauges there
        time.sleep(25)
        idle = scrape()
        assert has(idle, "ray_memorybus_shard_memories", shard="shard-0")
        assert has(idle, "ray_memorybus_delivery_queued_events", partition="0")
