"""Small seeded simulations through the real bus: agents as Ray actors, the real model,
SQLite + Qdrant Edge files or a real Redis, and faults (actor kills, kill -9 of Redis).

What must hold in every run: no acknowledged write lost, no scope leak, every event a
live subscriber may see delivered, and agents sharing through the bus answer better
than each agent alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from redis.cluster import RedisCluster

from memorybus.simulation.runner import simulate
from memorybus.simulation.settings import SimConfig
from memorybus.storage.redis_client import open_redis

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(420)]


def _assert_integrity(result):
    i = result["integrity"]
    assert i["lost_acknowledged_writes"] == 0, i["lost_detail"]
    assert i["lost_detail"]["memories"]["checked"] > 20
    assert i["lost_detail"]["fact_histories"]["unreadable"] == 0
    assert i["scope_leaks"] == 0, i["leak_examples"]
    assert i["duplicate_fact_assertions"] == 0
    assert i["events_committed"] > 20
    assert i["events_delivered"] >= i["events_committed"] and i["events_missing"] == 0, i["missing_examples"]


def _accuracy(result, method):
    return result["accuracy"]["overall"][method]["top1"]


def test_the_readme_command_runs_a_small_seeded_simulation_and_loses_nothing(tmp_path, short_tmp):
    env = dict(os.environ, RAY_TMPDIR=short_tmp("mbsim"))
    out = tmp_path / "out"
    args = ["--agents", "4", "--users", "2", "--orgs", "1", "--days", "6", "--steps", "10", "--seed", "11",
            "--questions", "2", "--out", str(out)]
    proc = subprocess.run([sys.executable, "-m", "memorybus.cli", "simulate", *args], capture_output=True,
                          text=True, timeout=360, env=env, check=False, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "step 10/10" in proc.stdout  # the progress line (one every tenth of the run off a terminal)
    assert "integrity  lost acknowledged writes 0, scope leaks 0" in proc.stdout
    assert "all questions (recall)" in proc.stdout and "throughput" in proc.stdout
    written = sorted(p.name for p in out.iterdir())
    assert written == ["accuracy.png", "latency.png", "simulation.json", "staleness.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # its data directory is gone
    result = json.loads((out / "simulation.json").read_text())
    assert result["run"]["steps"] == 10 and result["config"]["seed"] == 11
    _assert_integrity(result)
    resolved = result["conflicts"].values()
    assert sum(c["resolved"] for c in resolved) > 0 and all(0 <= c["won"] <= c["resolved"] for c in resolved)
    bus, alone = _accuracy(result, "recall"), _accuracy(result, "no_bus")
    assert bus > alone + 0.25, (bus, alone)
    assert _accuracy(result, "current_fact") > alone
    assert result["accuracy"]["by_kind"]["finding"]["no_bus"]["top1"] == 0.0  # only another agent found it
    # maintenance ran on its schedule, at simulated time, while agents worked
    kinds = {(m["kind"], m["ok"]) for m in result["maintenance"]}
    assert {("decay", True), ("consolidation", True)} <= kinds
    assert result["faults"] == []
    for op in ("remember", "assert_fact", "recall", "current_fact"):
        assert result["latency_ms"][op]["n"] > 0 and result["latency_ms"][op]["p50"] > 0
    assert result["staleness"]["delivery"]["n"] == result["integrity"]["events_delivered"]
    # every strategy replayed on the same assertions, beside the oracle's ceiling
    truth = result["truth"]
    assert "truth      replayed on the acknowledged assertions" in proc.stdout
    replay = truth["replay"]
    assert set(replay) == {"evidence", "confidence_weighted", "recency", "authority", "oracle"}
    assert len({(r["resolved"], r["contested"]) for r in replay.values()}) == 1 and replay["oracle"]["resolved"] > 0
    # every change is either answered by a non-observer or has a reason it never was
    answered = result["staleness"]["first_correct_answer"]["n"]
    assert answered + sum(truth["never_answered"].values()) == result["world"]["changes"]


def test_chaos_with_redis_kills_actors_and_the_server_and_loses_nothing(ray_local, tmp_path):
    cfg = SimConfig(agents=4, users=2, orgs=1, days=6, steps=12, seed=3, chaos=True, backend="redis")
    result = simulate(cfg, None)
    faults = result["faults"]
    assert {f["kind"] for f in faults} == {"shard", "embedder", "hub", "redis"}
    assert all(f["ok"] for f in faults), faults
    _assert_integrity(result)
    assert _accuracy(result, "recall") > _accuracy(result, "no_bus") + 0.2


def test_a_run_against_a_redis_cluster_loses_nothing(ray_local, redis_cluster):
    """The bus on a Redis Cluster (three primaries): every shard, the hubs' state and the
    key ring live on it, each in its own slot; the run's checks all hold."""
    cfg = SimConfig(agents=4, users=2, orgs=1, days=6, steps=10, seed=11, shards=2, backend="redis",
                    redis_url=redis_cluster.url)
    result = simulate(cfg, None)
    _assert_integrity(result)
    assert _accuracy(result, "recall") > _accuracy(result, "no_bus") + 0.2
    client = open_redis(redis_cluster.url)
    assert isinstance(client, RedisCluster)
    holding, tags = set(), set()
    for node in client.get_primaries():
        keys = list(client.get_redis_connection(node).scan_iter(count=1000))
        if keys:
            holding.add(node.name)
        tags |= {k.decode()[k.decode().index("{") + 1 : k.decode().index("}")] for k in keys if b"{" in k}
    # the bus's keys sit in several slots (a tag per shard, the hubs' state, the key ring),
    # each on the primary that owns it: spread over the primaries as far as the run's
    # (random) namespace hashes them
    assert len(tags) >= 3, tags
    assert holding == {client.get_node_from_key("{" + tag + "}").name for tag in tags}
