"""A simulation on a 3-node ray.cluster_utils.Cluster with the Redis backend: a worker
node holding shards is removed mid-run (its raylet killed, as ``memorybus simulate
--address ... --chaos`` does) and nothing acknowledged is lost or leaked.
"""

from __future__ import annotations

import os

import pytest

from tests.cluster.local_cluster import local_cluster

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.redis, pytest.mark.model, pytest.mark.timeout(420)]

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="module")
def cluster():
    yield from local_cluster(2, {"head": 1}, [{"shard_slot": 1}] * 2)


def test_simulation_survives_the_loss_of_a_worker_node(cluster):
    import ray

    from memorybus.simulation.runner import simulate
    from memorybus.simulation.settings import SimConfig

    c, workers = cluster
    cfg = SimConfig(agents=4, users=2, orgs=1, days=6, steps=12, seed=5, chaos=True, backend="redis",
                    address=c.address, faults=("node",))
    result = simulate(cfg, None, overrides={"shard_resources": {"shard_slot": 0.01},
                                            "embedder_resources": {"head": 1}})
    (fault,) = result["faults"]
    assert fault["kind"] == "node" and fault["ok"], fault
    removed = fault["target"].split()[-1]
    assert removed in {w.node_id for w in workers}
    assert not any(n["NodeID"] == removed and n["Alive"] for n in ray.nodes())
    i = result["integrity"]
    assert i["lost_acknowledged_writes"] == 0, i["lost_detail"]
    assert i["lost_detail"]["memories"]["checked"] > 20
    assert i["scope_leaks"] == 0, i["leak_examples"]
    assert i["events_committed"] > 20 and i["events_missing"] == 0, i["missing_examples"]
    assert i["events_delivered"] >= i["events_committed"]
    acc = result["accuracy"]["overall"]
    assert acc["recall"]["top1"] > acc["no_bus"]["top1"] + 0.2
