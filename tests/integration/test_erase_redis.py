"""Erasure on the plain Shard over a real Redis server: after an erase, no Redis key
(its name or any part of its value) and no file in the server's directory (the
append-only files, once the rewrite the erase asks for is done) holds the erased
content; the other user's content is intact."""

from __future__ import annotations

import time

import pytest

from memorybus import ManualClock, MemoryNotFound, Scope
from memorybus.shard import Shard
from memorybus.shard.erase import Selector
from memorybus.storage.redis import RedisStore
from memorybus.storage.vectors import EdgeVectorIndex
from tests.unit.test_erase import ALICE, BOB, KEEP, MARK, hits_in_files, populate, put

pytestmark = [pytest.mark.redis, pytest.mark.model]


def open_shard(url: str, data, clock: ManualClock) -> Shard:
    return Shard("shard-0", RedisStore(url, "erase", "shard-0"), EdgeVectorIndex(data / "vectors", 384),
                 dim=384, clock=clock)  # fmt: skip


def keys_holding(client, marker: str) -> list[bytes]:
    """Every key whose name or value (each field, member, entry) holds ``marker``."""
    needle = marker.encode()
    found = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        if kind == "string":
            parts = [client.get(key)]
        elif kind == "hash":
            parts = [x for kv in client.hgetall(key).items() for x in kv]
        elif kind == "list":
            parts = client.lrange(key, 0, -1)
        elif kind == "set":
            parts = list(client.smembers(key))
        elif kind == "zset":
            parts = [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
        elif kind == "stream":
            parts = [x for _, fields in client.xrange(key) for kv in fields.items() for x in kv]
        else:
            pytest.fail(f"unexpected key type {kind}")
        if any(needle in key or needle in (p if isinstance(p, bytes) else str(p).encode()) for p in parts):
            found.append(key)
    return found


def wait_for_aof_rewrite(client, directory, marker: str, timeout: float = 20.0) -> list[str]:
    """The server's files holding ``marker`` once its AOF rewrite is over (old files
    are deleted after the rewrite, in the background)."""
    deadline = time.time() + timeout
    while True:
        info = client.info("persistence")
        done = not info["aof_rewrite_in_progress"] and not info["aof_rewrite_scheduled"]
        left = hits_in_files(directory, marker)
        if (done and not left) or time.time() > deadline:
            return left
        time.sleep(0.1)


def test_erase_user_on_redis_leaves_no_key_or_aof_byte(private_redis, tmp_path, embedder):
    clock = ManualClock()
    shard = open_shard(private_redis.url, tmp_path, clock)
    client = shard.store.client
    made = populate(shard, embedder, clock)
    shard.flush()
    assert keys_holding(client, MARK), "the scan must see the content before the erase"
    assert hits_in_files(private_redis.dir, MARK), "and so must the AOF"
    counts = shard.erase(Selector.of(org="acme", user="alice"))
    assert counts["memories"] == 6 and counts["events"] > 0 and counts["ops"] > 0
    assert keys_holding(client, MARK) == []
    assert keys_holding(client, KEEP)  # bob's records, events, op records
    assert wait_for_aof_rewrite(client, private_redis.dir, MARK) == []
    assert hits_in_files(private_redis.dir, KEEP)
    # bob's memory and fact still recallable; his fact history still readable
    assert shard.get(BOB, made["kept"].id).content.endswith(KEEP)
    history = shard.history(BOB, "favourite_colour", Scope("acme", "bob"))
    assert len(history) == 1 and KEEP in history[0].node.content
    with pytest.raises(MemoryNotFound):
        shard.get(ALICE, made["note"].id)
    shard.close()
    assert hits_in_files(tmp_path, MARK) == []  # the vector index's files
    # the rebuilt streams go on: a new write after the erase gets the next sequence number
    again = open_shard(private_redis.url, tmp_path, clock)
    before = again.store.last_seq(Scope("acme", "bob").key)
    put(again, embedder, BOB, [f"second note {KEEP}"], scope=Scope("acme", "bob"))
    assert again.store.last_seq(Scope("acme", "bob").key) == before + 1
    assert again.erase(Selector.of(org="acme", user="alice")) == dict.fromkeys(counts, 0)
    again.close()
