"""Redis Sentinel failover without a person: a real master, two replicas and three
sentinels on loopback; the replicas fall behind for 300 ms (SIGSTOP, link cut) and the master is
killed (SIGKILL) while stores write under load;
the sentinels promote a replica, the stores follow it, and every write that was
acknowledged is on the promoted master (0 lost). Writes that fail during the switch
surface as StoreUnavailable and are settled the way the shard settles them
(:meth:`Store.resolve` by operation id, then a fresh attempt), never dropped."""

from __future__ import annotations

import signal
import threading
import time
import uuid

import numpy as np
import pytest

from memorybus import Config
from memorybus.actors.hub import _kv
from memorybus.auth.keyring import open_keys
from memorybus.clock import ManualClock
from memorybus.errors import OutcomeUnknown, StoreUnavailable
from memorybus.memory.model import MemoryNode
from memorybus.scopes import Context, Scope
from memorybus.shard import Shard
from memorybus.storage.base import AlreadyApplied, WriteBatch
from memorybus.storage.factory import open_store
from memorybus.storage.kv import RedisKV
from memorybus.storage.redis import RedisStore
from memorybus.storage.vectors import EdgeVectorIndex
from tests.sentinel_set import MASTER_NAME, SentinelSet

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]
SCOPE = Scope("user", "acme", "u1")


@pytest.fixture(scope="module")
def sentinel_set(tmp_path_factory):
    s = SentinelSet(tmp_path_factory.mktemp("sentinel"))
    try:
        s.start()
        yield s
    finally:
        s.stop()


def node(i: str) -> MemoryNode:
    return MemoryNode(content=f"fact {i}", scope=SCOPE, embedding=np.zeros(4, dtype=np.float32), created_at=1.0,
                      last_accessed=1.0, valid_from=1.0, version=1, id=i)


def commit_settled(store: RedisStore, n: MemoryNode, deadline: float, errors: list[str]) -> bool:
    """Commit ``n`` as the shard does: on StoreUnavailable the outcome is unknown, so
    resolve the attempt by operation id (adopt it if applied, fence it off if not) and
    try again. True once the write is acknowledged."""
    op = uuid.uuid4().hex
    while time.time() < deadline:
        attempt = uuid.uuid4().hex[:16]
        try:
            store.commit(WriteBatch(puts=[n], op=op, op_result=b"ok", attempt=attempt))
            return True
        except AlreadyApplied:
            return True
        except StoreUnavailable as exc:
            errors.append(str(exc))
        while time.time() < deadline:  # settle before the next attempt
            try:
                if store.resolve(op, attempt) is not None:
                    return True
                break
            except StoreUnavailable as exc:
                errors.append(str(exc))
                time.sleep(0.05)
    return False


def test_master_killed_under_load_loses_no_acknowledged_write(sentinel_set):
    s = sentinel_set
    ns = f"fo{uuid.uuid4().hex[:6]}"
    cfg = Config.redis(s.url, namespace=ns, store_timeout=2.0, redis_wait_timeout=0.5)
    assert cfg.redis_replicas_to_wait() == 1  # a sentinel URL waits for a replica by default
    stores = [open_store(cfg, f"shard-{i}") for i in range(3)]
    assert all(isinstance(st, RedisStore) and st.durability == "config" and st.wait_replicas == 1 for st in stores)
    old_master = s.nodes[0]
    acked: dict[int, list[str]] = {i: [] for i in range(len(stores))}
    errors: list[str] = []
    stop = threading.Event()
    deadline = time.time() + 60

    def writer(i: int) -> None:
        k = 0
        while not stop.is_set():
            n = node(f"w{i}-{k}")
            if not commit_settled(stores[i], n, deadline, errors):
                return
            acked[i].append(n.id)
            k += 1

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    time.sleep(1.0)
    # the replicas fall behind: paused, and cut off from the master (what the kernel
    # already buffered for them they still get), so for 300 ms the master holds writes
    # no replica has; then it dies: without WAIT those writes were acknowledged and are gone
    for replica in s.nodes[1:]:
        replica.kill(signal.SIGSTOP)
    old_master.admin().client_kill_filter(_type="replica")
    time.sleep(0.3)
    before = sum(map(len, acked.values()))
    killed_at = time.time()
    old_master.kill(signal.SIGKILL)  # mid-load: commits are in flight on every store
    for replica in s.nodes[1:]:
        replica.kill(signal.SIGCONT)
    s.wait_until(lambda: s.master_port_seen(s.sentinel_ports[0]) not in (None, old_master.port), 20,
                 "no replica was promoted")
    promoted = s.node_on(s.master_port_seen(s.sentinel_ports[0]) or 0)
    # the other replica follows the new master, so WAIT 1 is met again and writes go on
    s.wait_until(lambda: s.replicas_online(promoted) >= 1, 20, "the other replica did not follow the new master")
    at_switch = sum(map(len, acked.values()))
    s.wait_until(lambda: sum(map(len, acked.values())) >= at_switch + 30, 20, "writes did not continue")
    stop.set()
    for t in threads:
        t.join(30)
    recovered = time.time() - killed_at
    total = sum(map(len, acked.values()))
    assert before > 0 and total > before + 30

    raw = promoted.admin()
    assert raw.info("replication")["role"] == "master"
    lost = []
    for i, ids in acked.items():
        present = {m.decode() for m in raw.smembers(f"mb:{{{ns}:shard-{i}}}:all")}
        lost += [x for x in ids if x not in present]
    assert lost == [], f"{len(lost)} acknowledged writes lost in the failover"
    for st in stores:  # the stores themselves read every write back from the new master
        assert st.count() == len(acked[stores.index(st)])
    assert errors, "the kill happened mid-load: some commits must have failed and been settled"
    assert not any(s.password in e or s.admin_password in e or s.sentinel_password in e for e in errors)
    print(f"\nfailover: {before} writes before the kill, {total} acknowledged in all, 0 lost; "
          f"{len(errors)} failed attempts settled; writes flowing again {recovered:.1f} s after the kill")
    for st in stores:
        st.close()


def test_a_write_no_replica_confirms_is_not_acknowledged(tmp_path):
    """WAIT is what keeps a write through a failover: with the only replica paused
    (SIGSTOP) a commit is applied on the master but not confirmed, so the store raises
    StoreUnavailable instead of acknowledging it; the write is settled once the replica
    is back (resolve finds it, and now the replica has it)."""
    s = SentinelSet(tmp_path, replicas=1)
    try:
        s.start()
        ns = f"w{uuid.uuid4().hex[:6]}"
        store = open_store(Config.redis(s.url, namespace=ns, store_timeout=2.0, redis_wait_timeout=0.3), "shard-0")
        store.commit(WriteBatch(puts=[node("a")], op="op-a", op_result=b"ok", attempt="1"))
        replica = s.nodes[1]
        replica.kill(signal.SIGSTOP)
        try:
            with pytest.raises(StoreUnavailable, match="0 of 1 replica"):
                store.commit(WriteBatch(puts=[node("b")], op="op-b", op_result=b"ok", attempt="1"))
            with pytest.raises(StoreUnavailable, match="0 of 1 replica"):
                store.resolve("op-b", "1")  # the record is there, but not confirmed: still not acknowledged
        finally:
            replica.kill(signal.SIGCONT)
        record = store.resolve("op-b", "1")
        assert record is not None and record.result == b"ok"
        assert replica.admin().hget(f"mb:{{{ns}:shard-0}}:n:b", "v") == b"1"  # the replica has it now
        assert store.op_record("op-a") is not None
        store.close()
    finally:
        s.stop()


def test_a_hub_write_no_replica_confirms_is_not_acknowledged(tmp_path):
    """The hubs' state (subscription records, acknowledged cursors) and the key ring follow
    the shards' WAIT policy: with the only replica paused, a write to either is applied on
    the master but not confirmed, so it raises StoreUnavailable instead of returning; once
    the replica is back the same (idempotent) write is acknowledged and the replica has it."""
    s = SentinelSet(tmp_path, replicas=1)
    try:
        s.start()
        ns = f"k{uuid.uuid4().hex[:6]}"
        cfg = Config.redis(s.url, namespace=ns, store_timeout=2.0, redis_wait_timeout=0.3)
        hub_kv, keys = _kv(cfg, 0), open_keys(cfg)
        assert isinstance(hub_kv, RedisKV) and hub_kv.wait_replicas == 1
        assert isinstance(keys, RedisKV) and keys.wait_replicas == 1
        hub_kv.put_many({"sub:a": b"1", "cur:a": b"1"})
        replica = s.nodes[1]
        replica.kill(signal.SIGSTOP)
        try:
            with pytest.raises(StoreUnavailable, match="0 of 1 replica"):
                hub_kv.put_many({"cur:a": b"2"})
            with pytest.raises(StoreUnavailable, match="0 of 1 replica"):
                hub_kv.delete("sub:a")
            with pytest.raises(StoreUnavailable, match="0 of 1 replica"):
                keys.put_many({"k": b"secret"})
        finally:
            replica.kill(signal.SIGCONT)
        hub_kv.put_many({"cur:a": b"3"})
        assert replica.admin().hget(f"mb:{{{ns}:bus-0}}:kv", "cur:a") == b"3"  # the replica has it now
        assert hub_kv.get("cur:a") == b"3" and hub_kv.get("sub:a") is None  # the unconfirmed delete did run
        hub_kv.close()
        keys.close()
        plain = RedisKV.for_config(cfg.with_(redis_wait_replicas=0), f"mb:{{{ns}:bus-1}}:kv")
        replica.kill(signal.SIGSTOP)  # without WAIT the same write is acknowledged at once
        try:
            plain.put_many({"cur:a": b"4"})
        finally:
            replica.kill(signal.SIGCONT)
        plain.close()
    finally:
        s.stop()


def test_an_event_no_replica_has_is_not_served_to_subscriptions(tmp_path):
    """A failover loses a write no replica has and gives its event's sequence number to
    the next write of the scope, so a subscription that had counted the lost event would
    skip the new one. The master serves such an event (it holds it), but the shard's log
    reads (replay pages, the starting cursors) confirm with WAIT first: while the only
    replica is paused they raise StoreUnavailable; once it is back they serve it."""
    s = SentinelSet(tmp_path, replicas=1)
    try:
        s.start()
        store = open_store(Config.redis(s.url, namespace=f"r{uuid.uuid4().hex[:6]}", store_timeout=2.0,
                                        redis_wait_timeout=0.3), "shard-0")
        shard = Shard("shard-0", store, EdgeVectorIndex(tmp_path / "v", 4), dim=4, clock=ManualClock(),
                      dedupe=False, detect_contradictions=False)
        ctx = Context("acme", "u1", "writer")
        scope = Scope("acme", "u1")
        vec = np.ones((1, 4), dtype=np.float32)
        shard.put_many(ctx, [MemoryNode(content="first", scope=scope)], vec)
        events, cursors, _ = shard.read_events_page(ctx, {})
        assert [e.node.content for e in events] == ["first"] and shard.last_seqs(ctx)[scope.key] == 1
        replica = s.nodes[1]
        replica.kill(signal.SIGSTOP)
        try:
            with pytest.raises(OutcomeUnknown):
                shard.put_many(ctx, [MemoryNode(content="second", scope=scope)], vec)
            assert [seq for seq, _ in store.read_events(scope.key)] == [1, 2]  # on the master, unconfirmed
            with pytest.raises(StoreUnavailable, match="0 of 1 replica"):
                shard.read_events_page(ctx, cursors)
            with pytest.raises(StoreUnavailable, match="0 of 1 replica"):
                shard.last_seqs(ctx)
        finally:
            replica.kill(signal.SIGCONT)
        events, _, _ = shard.read_events_page(ctx, cursors)
        assert [(e.seq, e.node.content) for e in events] == [(2, "second")]  # replicated now: served
        shard.close()
    finally:
        s.stop()


def test_wait_off_by_default_for_one_server_and_on_request(private_redis):
    cfg = Config.redis(private_redis.url, namespace="w0")
    assert cfg.redis_replicas_to_wait() == 0
    store = open_store(cfg.with_(redis_wait_replicas=1, redis_wait_timeout=0.2), "shard-0")
    with pytest.raises(StoreUnavailable, match="0 of 1 replica"):  # a lone server has no replica to confirm
        store.commit(WriteBatch(puts=[node("x")], op="op-x", op_result=b"ok", attempt="1"))
    store.close()


def test_wrong_password_and_unknown_master_fail_without_echoing_secrets(sentinel_set):
    s = sentinel_set
    bad = s.url.replace(s.password, "not-the-password-123")
    with pytest.raises(StoreUnavailable) as exc:
        RedisStore(bad, "x", "shard-0")
    assert "not-the-password-123" not in str(exc.value) and s.sentinel_password not in str(exc.value)
    with pytest.raises(StoreUnavailable, match="No master found for 'nosuch'") as exc:
        RedisStore(s.url.replace(f"/{MASTER_NAME}/", "/nosuch/"), "x", "shard-0", socket_timeout=1.0)
    assert s.password not in str(exc.value) and s.sentinel_password not in str(exc.value)
    wrong_sentinel_pw = s.url.replace(s.sentinel_password, "wrong-sentinel-pw")
    with pytest.raises(StoreUnavailable) as exc:
        RedisStore(wrong_sentinel_pw, "x", "shard-0", socket_timeout=1.0)
    assert "wrong-sentinel-pw" not in str(exc.value) and s.password not in str(exc.value)
