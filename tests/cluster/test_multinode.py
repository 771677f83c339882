"""Multi-node behaviour on one machine: ray.cluster_utils.Cluster with several raylets.

Records live in Redis (the shared deployment), so a shard actor that loses its
node restarts on another one and rebuilds its index from the store.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from tests.cluster.local_cluster import local_cluster

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.redis, pytest.mark.model, pytest.mark.timeout(600)]

os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="module")
def cluster():
    # 1 "head" for the embedder, the rest for tasks pinned to the head
    yield from local_cluster(1, {"head": 2}, [{f"node_{i}": 1, "shard_slot": 1} for i in range(2)])


def _node_of(handle):
    import ray

    return ray.get(handle.node_id.remote(), timeout=30)


def test_agents_on_many_nodes_share_memory_and_survive_node_loss(cluster, redis_server, tmp_path):
    import ray

    import memorybus as mb
    from memorybus import Config, Context, actors

    c, workers = cluster
    cfg = Config.redis(
        redis_server.url,
        data_dir=str(tmp_path / "d"),
        num_shards=2,
        namespace=f"mn_{uuid.uuid4().hex[:6]}",
        shard_resources={"shard_slot": 0.01},
        embedder_resources={"head": 1},
    )
    bus = mb.connect(cfg)
    try:
        org = "acme"

        @ray.remote(num_cpus=0)
        def agent(b, i):
            ctx = Context(org, f"u{i % 3}", f"agent{i}")
            stored = b.remember_many(
                [
                    {
                        "content": f"agent {i} finding {j}: valve {i}-{j} pressure is {i * 10 + j} bar",
                        "scope": "user",
                    }
                    for j in range(10)
                ],
                ctx,
            )
            return ray.get_runtime_context().get_node_id(), [n.id for n in stored]

        # two agents pinned to each worker node, writing at once
        refs = [agent.options(resources={f"node_{i % 2}": 0.1}).remote(bus.agent_handle(org, agent=f"agent{i}"), i) for i in range(4)]
        results = ray.get(refs, timeout=180)
        assert len({node for node, _ in results}) == 2
        ids = [i for _, group in results for i in group]
        assert len(set(ids)) == 40

        shards = actors.shard_handles(bus.config)
        shard_nodes = [ray.get(s.node_id.remote(), timeout=30) for s in shards]
        assert set(shard_nodes) <= {w.node_id for w in workers}  # placed by shard_resources
        victim_node = next(w for w in workers if w.node_id in shard_nodes)
        c.remove_node(victim_node)
        # the lost shard restarts on the surviving worker and rebuilds from Redis
        deadline = time.time() + 90
        while True:
            try:
                moved = [ray.get(s.node_id.remote(), timeout=10) for s in shards]
                if victim_node.node_id not in moved:
                    break
            except Exception:
                pass
            assert time.time() < deadline, "shard actor did not move off the removed node"
            time.sleep(0.5)
        assert bus.count() == 40
        for i in range(4):
            ctx = Context(org, f"u{i % 3}", "reader")
            hits = bus.recall(f"agent {i} finding 3 valve {i}-3 pressure", ctx, k=3)
            assert hits[0].node.content.startswith(f"agent {i} finding 3:")
        # a user never sees another user's findings, on any node
        hits = bus.recall("valve pressure", Context(org, "u1"), k=40)
        assert {h.node.scope.user for h in hits} == {"u1"}
    finally:
        bus.shutdown()


def test_shards_spread_over_nodes_and_a_node_lost_under_load_loses_no_acknowledged_write(cluster, redis_server,
                                                                                         tmp_path):
    """Config.placement="spread" (the default): 4 shards over the nodes that may hold
    shards use more than one of them. Writers on the head keep writing while a node
    holding shards is removed: calls caught by the loss may fail (nothing acknowledged),
    every acknowledged write is found afterwards, and the lost shards moved."""
    import ray

    import memorybus as mb
    from memorybus import Config, Context, actors

    c, _ = cluster
    for i in range(2):  # two more nodes that may hold shards
        c.add_node(num_cpus=1, resources={"shard_slot": 1, f"spare_{i}": 1})
    c.wait_for_nodes()
    cfg = Config.redis(redis_server.url, data_dir=str(tmp_path / "d"), num_shards=4,
                       namespace=f"sp_{uuid.uuid4().hex[:6]}", shard_resources={"shard_slot": 0.01},
                       embedder_resources={"head": 1})
    bus = mb.connect(cfg)
    try:
        shards = actors.shard_handles(bus.config)
        nodes = [_node_of(s) for s in shards]
        assert len(set(nodes)) >= 2, "4 shards packed on one node"
        victim = next(n for n in c.worker_nodes if n.node_id in nodes)

        @ray.remote(num_cpus=0, resources={"head": 0.01})
        def writer(b, w, seconds):
            b = b.with_timeout(30)  # a call caught by the loss gives up (unacknowledged) after 30 s
            ctx = Context("acme", f"u{w}", f"w{w}")
            acked, failed, i = [], 0, 0
            end = time.time() + seconds
            while time.time() < end:
                try:
                    acked.append(b.remember(f"writer {w} note {i}: gauge {w}-{i} reads {i * 7} units", ctx,
                                            scope="user").id)
                except mb.MemoryBusError:
                    failed += 1
                    time.sleep(0.2)
                i += 1
            return acked, failed

        refs = [writer.remote(bus.agent_handle("acme", f"u{w}", f"w{w}"), w, 25) for w in range(4)]
        time.sleep(5)
        c.remove_node(victim)
        results = ray.get(refs, timeout=420)
        acked = [(w, i) for w, (ids, _) in enumerate(results) for i in ids]
        assert len(acked) > 40
        for w, memory_id in acked:
            assert bus.get(memory_id, Context("acme", f"u{w}")) is not None
        moved = [_node_of(s) for s in shards]
        assert victim.node_id not in moved
    finally:
        bus.shutdown()
