"""connect() on a Ray too small for the bus fails fast, saying what to change
(instead of waiting minutes for actors Ray can never place)."""

from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def ray_one_cpu():
    import ray

    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_one_cpu_fails_fast_then_a_smaller_embedder_fits(ray_one_cpu, tmp_path):
    import memorybus as mb

    cfg = mb.Config.embedded(tmp_path / "d", namespace="cap1", num_shards=1)
    t0 = time.monotonic()
    with pytest.raises(mb.ConfigError) as err:
        mb.connect(cfg)
    assert time.monotonic() - t0 < 30
    text = str(err.value)
    assert "Ray offers 1 CPU(s), the bus reserves 1.1" in text
    assert "num_cpus=2" in text and "embedder_num_cpus" in text
    assert not (tmp_path / "d").exists()  # nothing was created

    bus = mb.connect(cfg.with_(embedder_num_cpus=0.5, query_encoder="embedder"))  # one model load, not two
    try:
        ctx = mb.Context("acme", "u1", "a1")
        bus.remember("The staging database lives in Frankfurt", ctx, scope="user")
        assert bus.recall("where is the staging database?", ctx, k=1)[0].node.content.endswith("Frankfurt")
    finally:
        bus.shutdown()


def test_resources_no_node_has_are_named(ray_one_cpu, tmp_path):
    import memorybus as mb

    cfg = mb.Config.embedded(tmp_path / "d", namespace="cap2", embedder_num_cpus=0.5,
                             shard_resources={"gpu_box": 1})
    with pytest.raises(mb.ConfigError, match=r"no Ray node has 0.05 CPU and resources \{'gpu_box': 1\} for the shard"):
        mb.connect(cfg)


def test_a_gpu_embedder_where_no_node_has_a_gpu_is_refused_fast(ray_one_cpu, tmp_path):
    """embedder_num_gpus on a Ray without GPUs: the embedder could never be placed, so
    connect says so at once instead of waiting on an infeasible actor."""
    import memorybus as mb

    cfg = mb.Config.embedded(tmp_path / "d", namespace="cap3", embedder_num_cpus=0.5, embedder_num_gpus=1)
    t0 = time.monotonic()
    with pytest.raises(mb.ConfigError, match=r"resources \{'GPU': 1.0\} for the embedder actor"):
        mb.connect(cfg)
    assert time.monotonic() - t0 < 30
    assert not (tmp_path / "d").exists()
