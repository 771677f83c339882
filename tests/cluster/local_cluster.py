"""A several-raylet ``ray.cluster_utils.Cluster`` on this machine for the cluster tests:
a head and worker nodes, nodes declared dead within about 2 s of losing their raylet,
and this process's Ray connected to it until the fixture ends."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def local_cluster(
    head_cpus: int, head_resources: dict[str, float], worker_resources: list[dict[str, float]]
) -> Iterator[tuple[Any, list[Any]]]:
    """A fixture's body: yields ``(cluster, worker nodes)``, one worker of 1 CPU per entry
    of ``worker_resources`` (its custom resources); shuts Ray and the cluster down after."""
    import ray
    from ray.cluster_utils import Cluster

    c = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": head_cpus,
            "resources": head_resources,
            "_system_config": {
                "health_check_initial_delay_ms": 0,
                "health_check_period_ms": 500,
                "health_check_timeout_ms": 500,
                "health_check_failure_threshold": 3,
            },
        },
    )
    workers = [c.add_node(num_cpus=1, resources=resources) for resources in worker_resources]
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False, configure_logging=False)
    yield c, workers
    ray.shutdown()
    c.shutdown()
