"""A shared embedder pool (``Config.embedder_pool``): the buses of one Ray that name it
embed on one set of replicas; a bus closing leaves them running for the others; a bus of
another model never gets them; without a pool a bus's embedder is its own and stops with it."""

from __future__ import annotations

import uuid

import pytest
import ray

import memorybus as mb
from memorybus import Config, Context, actors
from memorybus.errors import ConfigError

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]

SMALL = {"embedder_num_cpus": 0.25, "num_shards": 1}


def pid(config: Config) -> int:
    return int(ray.get(actors.handle(config, "embedder").pid.remote(), timeout=60))


def alive(config: Config) -> bool:
    try:
        pid(config)
    except (ValueError, ray.exceptions.RayError):
        return False
    return True


@pytest.mark.slow
def test_buses_naming_a_pool_share_its_replica_and_it_outlives_each_of_them(ray_local, tmp_path, monkeypatch):
    monkeypatch.delenv("MEMORYBUS_EMBEDDER_POOL", raising=False)
    pool = f"p{uuid.uuid4().hex[:6]}"
    first = mb.connect(Config.embedded(tmp_path / "a", namespace=f"{pool}a", embedder_pool=pool, **SMALL))
    try:
        second = mb.connect(Config.embedded(tmp_path / "b", namespace=f"{pool}b", embedder_pool=pool, **SMALL))
        try:
            assert first.config.embedder_pool == second.config.embedder_pool == pool
            shared = pid(first.config)
            assert pid(second.config) == shared  # one model load for both
            a, b = Context("orga", "u1"), Context("orgb", "u1")
            first.remember("the deploy key rotates every Monday", a)
            first.close()  # the pool is not the first bus's to stop
            assert alive(second.config) and pid(second.config) == shared
            second.remember("the staging database lives in Frankfurt", b)
            hits = second.recall("where is the staging database?", b, k=1)
            assert [h.content for h in hits] == ["the staging database lives in Frankfurt"]
            assert second.recall("deploy key rotation", b, k=5) == []  # nothing of the other bus
            assert actors.stop_embedder_pool(second.config) == 1
            assert not alive(second.config)
        finally:
            second.close()
        # the next bus that names the pool starts it again
        third = mb.connect(Config.embedded(tmp_path / "a", namespace=f"{pool}a", embedder_pool=pool, **SMALL))
        try:
            assert alive(third.config) and pid(third.config) != shared
            assert [h.content for h in third.recall("when does the deploy key rotate?", a, k=1)] == [
                "the deploy key rotates every Monday"]
        finally:
            third.close()
            actors.stop_embedder_pool(third.config)
    finally:
        first.close()


def test_the_environment_names_the_pool_of_a_config_that_names_none(ray_local, tmp_path, monkeypatch):
    pool = f"env{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("MEMORYBUS_EMBEDDER_POOL", pool)
    with mb.connect(Config.embedded(tmp_path / "d", namespace=f"{pool}d", **SMALL)) as bus:
        assert bus.config.embedder_pool == pool
        assert actors.embedder_namespace(bus.config) == "memorybus-embedders"
        config = bus.config
    assert alive(config)
    assert actors.stop_embedder_pool(config) == 1


@pytest.mark.slow
def test_without_a_pool_the_bus_embedder_is_its_own_and_stops_with_it(ray_local, tmp_path, monkeypatch):
    monkeypatch.delenv("MEMORYBUS_EMBEDDER_POOL", raising=False)
    with mb.connect(Config.embedded(tmp_path / "own", namespace="own_embedder", **SMALL)) as bus:
        config = bus.config
        assert config.embedder_pool is None and actors.embedder_namespace(config) == "own_embedder"
        assert alive(config)
        with pytest.raises(ConfigError, match="embedder_pool"):
            actors.stop_embedder_pool(config)
    assert not alive(config)
