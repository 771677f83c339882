"""Acknowledged writes survive a ShardActor being killed and restarted (both stores)."""

import time
import uuid

import pytest
import ray

import memorybus as mb
from memorybus import Config, Context, actors
from memorybus.scopes import Router
from tests.actor_restart import restart_actor
from tests.conftest import backend_config

pytestmark = [pytest.mark.ray, pytest.mark.redis, pytest.mark.model, pytest.mark.timeout(300)]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["embedded", "redis"])
def test_killed_shard_recovers_every_acknowledged_write(ray_local, tmp_path, redis_server, backend):
    ns = f"dur_{backend}_{uuid.uuid4().hex[:6]}"
    cfg = backend_config(backend, tmp_path, redis_server, num_shards=2, namespace=ns)
    bus = mb.connect(cfg)
    try:
        ctx = Context("acme", "u1", "agent", "s1")
        acked = []
        for i in range(20):
            acked.append(
                bus.remember(f"observation {i}: the sensor in room {i} reads {i * 7} degrees", ctx, scope="session")
            )
        acked += bus.remember_many(
            [
                {"content": f"org fact {i}: building {i} opens at {i % 12 + 1} am", "scope": "org"}
                for i in range(20)
            ],
            ctx,
        )
        shards = actors.shard_handles(bus.config)
        used = {Router(bus.config.num_shards).shard_for(n.scope.key) for n in acked}
        assert len(used) == 2, "both shards must hold data for this test to mean something"
        for i in sorted(used):
            restart_actor(shards[i])
        assert bus.count() == 40
        for n in acked:
            assert bus.get(n.id, ctx).content == n.content
            hits = bus.recall(n.content, ctx, k=3)
            assert n.id in {h.node.id for h in hits}, n.content
    finally:
        bus.shutdown()


@pytest.mark.slow
def test_write_in_flight_during_kill_is_applied_exactly_once(ray_local, tmp_path):
    cfg = Config.embedded(tmp_path / "data", num_shards=1, namespace=f"dur_once_{uuid.uuid4().hex[:6]}")
    bus = mb.connect(cfg)
    try:
        ctx = Context("acme", "u1")
        items = [f"batch item {i} about the quarterly plan" for i in range(300)]
        shard = actors.shard_handles(bus.config)[0]
        old = ray.get(shard.pid.remote(), timeout=30)
        ref_bus = bus.agent_handle("acme", "u1")  # the call below retries on the restarted actor (max_task_retries=-1)

        @ray.remote(num_cpus=0)
        def writer(b):
            return [n.id for n in b.remember_many(items, ctx)]

        pending = writer.remote(ref_bus)
        time.sleep(0.5)
        restart_actor(shard, old)
        ids = ray.get(pending, timeout=180)
        assert len(set(ids)) == 300
        assert bus.count() == 300
    finally:
        bus.shutdown()


def test_shutdown_checkpoints_the_wal_and_a_main_file_copy_is_a_full_backup(ray_local, tmp_path):
    """shutdown() closes every store: no acknowledged write is left only in a -wal file,
    so copying the data directory's *.sqlite files (what the README says a backup
    copies once the bus is shut down) restores everything."""
    import shutil
    import sqlite3

    data = tmp_path / "data"
    cfg = Config.embedded(data, num_shards=2, namespace=f"dur_wal_{uuid.uuid4().hex[:6]}")
    bus = mb.connect(cfg)
    ctx = Context("acme", "u1", "agent", "s1")
    bus.remember_many([f"note {i}: the meeting room {i} has {i + 2} chairs" for i in range(30)], ctx)
    bus.remember_many([{"content": f"org rule {i}: badge colour {i}", "scope": "org"} for i in range(10)], ctx)
    bus.assert_fact("team/lead", "Dana leads the team", ctx, scope="org")
    bus.shutdown()
    wal = [p for p in data.rglob("*-wal") if p.stat().st_size > 0]
    assert wal == [], f"acknowledged writes left only in WAL files: {wal}"
    backup = tmp_path / "backup"
    for p in data.rglob("*.sqlite"):  # the main files alone, no -wal/-shm
        dest = backup / p.relative_to(data)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dest)
    rows = 0
    for p in backup.rglob("records.sqlite"):
        with sqlite3.connect(p) as db:
            rows += db.execute("SELECT count(*) FROM nodes").fetchone()[0]
    assert rows == 41
