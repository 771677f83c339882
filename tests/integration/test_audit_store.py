"""The audit chain contract, on every Store: a real SQLite file and a real Redis server."""

import dataclasses
import json

import msgpack
import numpy as np
import pytest

from memorybus import MemoryNode, Scope, VersionConflict
from memorybus.audit import Draft, decode_checkpoint, decode_entry, sign
from memorybus.audit.read import AuditQuery, query, verify_store
from memorybus.storage import WriteBatch
from memorybus.storage.base import AlreadyApplied
from memorybus.storage.redis import RedisStore
from memorybus.storage.sqlite import SqliteStore

pytestmark = pytest.mark.redis
KEY = b"k" * 32
_counter = iter(range(10**9))


@pytest.fixture(params=["sqlite", "redis"])
def stores(request, tmp_path, redis_server):
    """Two handles on one shard's store (as two processes would open it)."""
    if request.param == "sqlite":
        made = [SqliteStore(tmp_path / "s.sqlite") for _ in range(2)]
    else:
        ns = f"a{next(_counter)}"
        made = [RedisStore(redis_server.url, ns, "shard-0") for _ in range(2)]
    yield made
    made[0].clear()
    for s in made:
        s.close()


@pytest.fixture
def store(stores):
    return stores[0]


def mk(content, org="acme"):
    return MemoryNode(content=content, scope=Scope(org, "u1"), embedding=np.arange(4, dtype=np.float32),
                      version=1, created_at=1.0, last_accessed=1.0, valid_from=1.0)  # fmt: skip


def draft(org, *ids, op="put_many", who="acme/u1/a"):
    return Draft(org, 5.0, who, op, tuple(ids), tuple("h" for _ in ids))


def chain_of(store, org):
    return [decode_entry(b) for _, b in store.read_audit(org)]


def test_entries_commit_with_their_write_per_org(store):
    a, b = mk("a"), mk("b", "beta")
    store.commit(WriteBatch(puts=[a, b], audit=[draft("acme", a.id), draft("beta", b.id)]))
    store.commit(WriteBatch(deletes=[(a.id, None)], audit=[draft("acme", a.id, op="delete")]))
    assert [(e.seq, e.operation) for e in chain_of(store, "acme")] == [(1, "put_many"), (2, "delete")]
    assert [e.seq for e in chain_of(store, "beta")] == [1]
    assert store.audit_head("acme") == (2, chain_of(store, "acme")[-1].hash)
    assert all(r.ok for r in verify_store(store))


def test_a_refused_or_repeated_batch_appends_nothing(store):
    a = mk("a")
    store.commit(WriteBatch(puts=[a], op="op1", op_result=b"r", audit=[draft("acme", a.id)]))
    with pytest.raises(AlreadyApplied):
        store.commit(WriteBatch(puts=[a], op="op1", op_result=b"r", audit=[draft("acme", a.id)]))
    with pytest.raises(VersionConflict):
        store.commit(WriteBatch(updates=[(dataclasses.replace(a, version=3), 2)], audit=[draft("acme", a.id)]))
    assert len(chain_of(store, "acme")) == 1


def test_two_writers_on_one_store_keep_one_valid_chain(stores):
    first, second = stores
    for i in range(6):
        writer = stores[i % 2]
        n = mk(f"n{i}")
        writer.commit(WriteBatch(puts=[n], audit=[draft("acme", n.id)]))
        writer.append_audit([draft("acme", n.id, op="get")])
    assert [e.seq for e in chain_of(first, "acme")] == list(range(1, 13))
    assert all(r.ok for r in verify_store(second))


def test_checkpoints_are_kept_apart_and_an_emptied_chain_is_still_listed(store):
    n = mk("n")
    store.commit(WriteBatch(puts=[n], audit=[draft("acme", n.id)]))
    seq, digest = store.audit_head("acme")
    store.put_checkpoint(sign(KEY, "acme", seq, digest, 9.0))
    assert [decode_checkpoint(b).seq for b in store.checkpoints("acme")] == [1]
    assert store.read_audit("acme") and store.checkpoints("beta") == []
    assert query(store, "acme", AuditQuery(principal="acme/u1/a"))[0].ids == (n.id,)
    assert query(store, "acme", AuditQuery(since=6.0)) == []
    for seq in range(2, 106):
        store.put_checkpoint(sign(KEY, "acme", seq, digest, 9.0))
    assert [decode_checkpoint(b).seq for b in store.checkpoints("acme")] == list(range(6, 106))  # the newest 100


def test_tampering_with_redis_is_caught(redis_server):
    store = RedisStore(redis_server.url, f"a{next(_counter)}", "shard-0")
    try:
        for i in range(6):
            n = mk(f"n{i}")
            store.commit(WriteBatch(puts=[n], audit=[draft("acme", n.id)]))
        seq, digest = store.audit_head("acme")
        store.put_checkpoint(sign(KEY, "acme", seq, digest, 9.0))
        r, key = store.client, store.keys.audit("acme")
        original = r.lrange(key, 0, -1)

        def reset():
            r.delete(key)
            r.rpush(key, *original)

        def report():
            (rep,) = verify_store(store, KEY)
            return rep.bad_seq, rep.reason

        assert report() == (None, None)
        r.lrem(key, 1, original[2])
        assert report() == (3, "removed")
        reset()
        body, digest = msgpack.unpackb(original[3], raw=False)
        fields = msgpack.unpackb(body, raw=False)
        fields[6] = ["someone-else"]
        r.lset(key, 3, msgpack.packb([msgpack.packb(fields, use_bin_type=True), digest], use_bin_type=True))
        assert report() == (4, "edited")
        reset()
        r.lset(key, 1, original[4])
        r.lset(key, 4, original[1])
        assert report() == (2, "reordered")
        reset()
        r.ltrim(key, 0, 3)
        assert report() == (5, "truncated")
        r.delete(key)
        assert "acme" in store.audit_orgs() and report() == (1, "truncated")
    finally:
        store.clear()
        store.close()


def test_the_cli_verifies_and_exports_a_redis_bus(redis_server, capsys):
    from memorybus.cli import main

    ns = f"a{next(_counter)}"
    stores = [RedisStore(redis_server.url, ns, f"shard-{i}") for i in range(2)]
    try:
        for i, store in enumerate(stores):
            n = mk(f"n{i}")
            store.commit(WriteBatch(puts=[n], audit=[draft("acme", n.id)]))
            store.commit(WriteBatch(deletes=[(n.id, None)], audit=[draft("acme", n.id, op="delete", who="acme/u2")]))
        flags = ["--redis", redis_server.url, "--namespace", ns, "--shards", "2"]
        assert main(["audit", "verify", *flags]) == 0
        assert capsys.readouterr().out.count(": ok, 2 entries") == 2
        assert main(["audit", "export", *flags, "--principal", "acme/u2"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [(x["shard"], x["operation"]) for x in map(json.loads, lines)] == [
            ("shard-0", "delete"), ("shard-1", "delete")]
        stores[1].client.lpop(stores[1].keys.audit("acme"))  # the first entry of shard-1's chain
        assert main(["audit", "verify", *flags]) == 1
        assert "shard-1  acme: TAMPERED at seq 1: removed" in capsys.readouterr().out
    finally:
        for store in stores:
            store.clear()
            store.close()
