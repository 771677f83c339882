from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    """A private local Ray instance for one test module (2 CPUs, loopback)."""
    import ray

    # address="local": a new instance even when RAY_ADDRESS is set (a cluster test left it)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A private Redis Cluster shared by the session (3 primaries, a replica each;
    :class:`tests.redis_cluster.LocalRedisCluster`). Tests that kill nodes or move
    slots start their own."""
    from tests.redis_cluster import LocalRedisCluster

    cluster = LocalRedisCluster(tmp_path_factory.mktemp("redis-cluster"), masters=3, replicas=1)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
