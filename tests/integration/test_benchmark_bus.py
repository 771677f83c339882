"""benchmarks/bus.py runs as its README line says, on a small scale: the fan-out in both
protocols (taking turns with the plain fan-out, and the older poll-after-each one) with
every delivery counted on both sides, and the fact writers as Ray tasks, which must be
handed agents' handles (the operator's handle refuses to leave its process), with no
acknowledged write missing from the fact's history."""

from __future__ import annotations

import argparse

import pytest

import memorybus as mb
from benchmarks import bus as bench

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def bus(ray_local, tmp_path_factory):
    cfg = mb.Config.embedded(tmp_path_factory.mktemp("benchbus"), num_shards=2, namespace="bench_bus_t",
                             embedder_num_cpus=0.5)
    b = mb.connect(cfg)
    yield b
    b.shutdown()


@pytest.mark.parametrize("pause", [0.2, 0.0])
def test_fanout_counts_every_delivery_on_both_sides(bus, pause):
    args = argparse.Namespace(subscribers=3, events=3, pause=pause, gap=0.05)
    out = bench.fanout(bus, args)
    assert out["deliveries"] == out["expected_deliveries"] == 9
    assert out["p99_ms"] >= out["p50_ms"] > 0 and out["plain_ray_p99_ms"] >= out["plain_ray_p50_ms"] > 0
    assert out["ratio_p99"] == pytest.approx(out["p99_ms"] / out["plain_ray_p99_ms"])


def test_fact_writers_lose_nothing(bus):
    args = argparse.Namespace(writers=2, orgs=1, asserts=4, batch=2)
    out = bench.resolved_asserts(bus, args)
    for run in ("assert_fact", "assert_facts_batched", "assert_fact_cached_values"):
        assert out[run]["assertions"] == 8 and out[run]["lost_updates"] == 0 and out[run]["resolved_per_s"] > 0
