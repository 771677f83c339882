"""Erasure through the bus on Ray: ``bus.erase`` reaches every shard (a broadcast copy
on another shard included); a shard actor killed while it erases completes the job
when it restarts; a job recorded just before a crash is completed when the bus
starts again; after restarting every actor no file of the data directory holds a byte
of the erased content, and the other user's memories are intact and recallable."""

from __future__ import annotations

import time
import uuid

import msgpack
import pytest
import ray

import memorybus as mb
from memorybus import Config, Context, InvalidRequest, actors
from memorybus.shard.erase import Selector
from memorybus.storage.sqlite import SqliteStore
from tests.actor_restart import restart_actor
from tests.unit.test_erase import hits_in_files

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]

ALICE = Context("acme", "alice", "planner", "s1")
BOB = Context("acme", "bob", "helper", "s2")
CAROL = Context("acme", "carol", "scribe", "s3")
MARK, KEEP, CAROL_MARK = "zqxraymarkalice", "zqxraykeepbob", "zqxraymarkcarol"


def test_erase_through_ray_survives_a_kill_and_a_crash_and_leaves_no_byte(ray_local, tmp_path):
    data = tmp_path / "data"
    cfg = Config.embedded(data, num_shards=2, namespace=f"erase_{uuid.uuid4().hex[:6]}")
    bus = mb.connect(cfg)
    try:
        notes = [bus.remember(f"Alice's note {i}: the vault code is {i}{i} {MARK}", ALICE, scope="session")
                 for i in range(6)]  # fmt: skip
        mine = bus.remember(f"Alice prefers window seats {MARK}", ALICE, scope="user")
        bus.update(notes[0].id, ALICE, expected_version=1, content=f"Alice's vault code changed {MARK}x")
        bus.forget(notes[1].id, ALICE)
        bus.assert_fact("seat", f"window {MARK}", ALICE, scope="user")
        bus.assert_fact("seat", f"aisle {MARK}", ALICE, scope="user")
        shared = bus.broadcast(mine.id, "org", ALICE)
        kept = bus.remember(f"Bob's desk is by the printer {KEEP}", BOB, scope="user")
        bus.remember(f"Carol's badge number is 5512 {CAROL_MARK}", CAROL, scope="user")
        with pytest.raises(InvalidRequest):
            bus.erase(user="alice")  # no org: refused before anything
        dry = bus.erase(org="acme", user="alice", dry_run=True)  # 5 notes left, 1 user memory, 2 fact values
        assert dry["memories"] == 8 and dry["copies"] == 1 and dry["events"] > 0 and dry["ops"] > 0
        assert dry["subscriptions"] == 0
        assert bus.get(shared.id, BOB).content.endswith(MARK)  # the dry run changed nothing

        # a shard killed while the erase runs: Ray re-runs the call on the restarted actor,
        # whose open completes the recorded job first
        @ray.remote(num_cpus=0)
        def eraser(b):
            return b.erase(org="acme", user="alice")

        pending = eraser.remote(bus.as_agent(bus.issue_credential(operator=True, ttl=600)))  # another operator
        time.sleep(0.2)
        restart_actor(actors.shard_handles(bus.config)[0])
        ray.get(pending, timeout=180)
        assert bus.erase(org="acme", user="alice") == dict.fromkeys(dry, 0)
        assert bus.history("seat", ALICE, scope="user") == []
        assert not [h for h in bus.recall(f"vault code {MARK}", ALICE, k=10) if MARK in h.node.content]
        assert not [h for h in bus.recall(f"window seats {MARK}", BOB, k=10) if MARK in h.node.content]
        assert bus.recall(f"where is Bob's desk {KEEP}", BOB, k=3)[0].node.id == kept.id
        bus.export(tmp_path / "after.export")  # an export made afterwards holds none of it
        exported = (tmp_path / "after.export").read_bytes()
        assert MARK.encode() not in exported and KEEP.encode() in exported
    finally:
        bus.shutdown()
    assert hits_in_files(data, MARK) == []
    assert hits_in_files(data, KEEP) and hits_in_files(data, CAROL_MARK)

    # a crash right after carol's erase job was recorded on every shard (nothing else done)
    for path in data.rglob("records.sqlite"):
        store = SqliteStore(path)
        store.set_erase_job(msgpack.packb([Selector.of(org="acme", user="carol").pack(), []]))
        store.close()
    bus = mb.connect(cfg)  # every actor starts again; each shard completes the job on opening
    try:
        assert bus.get(kept.id, BOB).content.endswith(KEEP)
        assert bus.list_memories(CAROL).memories == []
        assert bus.erase(org="acme", user="carol") == dict.fromkeys(dry, 0)
    finally:
        bus.shutdown()
    assert hits_in_files(data, MARK) == [] and hits_in_files(data, CAROL_MARK) == []
    assert hits_in_files(data, KEEP)


def test_erase_on_redis_through_ray_leaves_no_key_no_file_byte_after_every_actor_restarts(
    ray_local, tmp_path, private_redis
):
    import redis

    from tests.integration.test_erase_redis import keys_holding, wait_for_aof_rewrite

    data = tmp_path / "data"
    cfg = Config.redis(private_redis.url, data_dir=str(data), num_shards=2, namespace=f"erx_{uuid.uuid4().hex[:6]}")
    bus = mb.connect(cfg)
    try:
        alice = bus.agent_handle("acme", "alice", "planner")
        for i in range(4):
            alice.remember(f"Alice's note {i}: {MARK}", ALICE, scope="session")
        alice.assert_fact("seat", f"window {MARK}", ALICE, scope="user")
        alice.assert_fact("seat", f"aisle {MARK}", ALICE, scope="user")
        kept = bus.remember(f"Bob's desk is by the printer {KEEP}", BOB, scope="user")
        assert bus.erase(org="acme", user="alice")["memories"] >= 5
    finally:
        bus.shutdown()  # every actor stops
    bus = mb.connect(cfg)  # and starts again, on the same stores
    try:
        assert bus.erase(org="acme", user="alice")["memories"] == 0
        assert bus.recall(f"where is Bob's desk {KEEP}", BOB, k=3)[0].node.id == kept.id
        assert bus.history("seat", ALICE, scope="user") == []
    finally:
        bus.shutdown()
    client = redis.Redis.from_url(private_redis.url)
    assert keys_holding(client, MARK) == []
    assert keys_holding(client, KEEP)  # bob's memory is still there
    assert wait_for_aof_rewrite(client, private_redis.dir, MARK) == []
    assert hits_in_files(data, MARK) == []
