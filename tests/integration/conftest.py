from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ray_local() -> Iterator[None]:
    """A local Ray (2 CPUs, loopback) for the module, shared with the other modules that ask
    for one unless a module leaves actors alive (tests/shared_ray.py)."""
    from tests import shared_ray

    shared_ray.start()
    yield
    shared_ray.end_module()


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
