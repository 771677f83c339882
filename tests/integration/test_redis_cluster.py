"""A shard's store on a real Redis Cluster (three primaries, a replica each, on loopback):
its slot moved to another primary by ``redis-cli --cluster reshard`` while a writer
commits, and its primary killed (kill -9) so that its replica takes over, lose no
acknowledged write; a bus run (the simulation, ``backend="redis"``) against the
cluster loses nothing either. The foundation contract itself runs over the cluster in
test_store_contract.py."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.crc import key_slot

from memorybus import ConfigError, Scope, StoreUnavailable
from memorybus.storage import AlreadyApplied, WriteBatch
from memorybus.storage.redis import RedisStore
from memorybus.storage.redis_keys import RedisKeys
from tests.integration.test_store_contract import mk
from tests.redis_cluster import LocalRedisCluster

pytestmark = [pytest.mark.redis, pytest.mark.timeout(180)]
SCOPE = Scope("acme", "u1")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalRedisCluster]:
    """A private cluster this test may reshape."""
    c = LocalRedisCluster(tmp_path / "cluster", masters=3, replicas=1)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def namespace_on_first_slot_of(cluster: LocalRedisCluster) -> tuple[str, int]:
    """A namespace whose shard-0 keys hash to the lowest slot some primary owns (what
    ``redis-cli --cluster reshard --cluster-slots 1`` takes from it first)."""
    firsts = set()
    for node in cluster.primaries():
        for start, *_ in node.client().execute_command("CLUSTER", "SLOTS"):
            firsts.add(int(start))
    for i in range(1_000_000):
        slot = key_slot(RedisKeys(f"r{i}", "shard-0").all().encode())
        if slot in firsts:
            return f"r{i}", slot
    raise AssertionError("no namespace found")


class Writer(threading.Thread):
    """Commits batches (two new memories and an event, with an operation id) until
    stopped; a batch is acknowledged when commit returns (or says it already was);
    StoreUnavailable is retried with the same operation id."""

    def __init__(self, store: RedisStore) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.acked: list[str] = []
        self.events = 0
        self.retries = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        i = 0
        try:
            while not self.stop.is_set():
                nodes = [mk(f"w{i}-a"), mk(f"w{i}-b")]
                batch = WriteBatch(puts=nodes, events=[(SCOPE.key, f"e{i}".encode())], op=f"op-{i}",
                                   op_result=b"ok", attempt=f"op-{i}")
                deadline = time.monotonic() + 60
                while True:
                    try:
                        self.store.commit(batch)
                        break
                    except AlreadyApplied:
                        break
                    except StoreUnavailable:
                        self.retries += 1
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)
                self.acked += [n.id for n in nodes]
                self.events += 1
                i += 1
        except BaseException as exc:
            self.error = exc


def _check_nothing_lost(store: RedisStore, writer: Writer, before: int = 0) -> None:
    assert writer.error is None, writer.error
    got = store.get_many(writer.acked)
    missing = [mid for mid, node in zip(writer.acked, got, strict=True) if node is None]
    assert missing == [], f"{len(missing)} of {len(writer.acked)} acknowledged memories lost"
    assert store.count() == before + len(writer.acked)  # and none twice (retries found their operation)
    assert store.last_seq(SCOPE.key) == writer.events == len(store.read_events(SCOPE.key, 0, 10**6))


def test_a_cluster_url_opens_a_cluster_client_and_a_non_durable_node_is_refused(cluster):
    store = RedisStore(cluster.url_of(cluster.nodes[4]), "probe", "shard-0")  # a replica's URL works too
    try:
        assert store.cluster and store.durability == "config"
        store.commit(WriteBatch(puts=[mk("x")]))
        assert store.count() == 1
    finally:
        store.clear()
        store.close()
    cluster.nodes[5].client().config_set("appendfsync", "everysec")  # one replica of six
    with pytest.raises(ConfigError, match="appendfsync everysec"):
        RedisStore(cluster.url, "probe", "shard-0")


def test_resharding_moves_the_shards_slot_while_it_writes_and_loses_nothing(cluster):
    namespace, slot = namespace_on_first_slot_of(cluster)
    source = cluster.owner_of(slot)
    target = next(n for n in cluster.primaries() if n.port != source.port)
    store = RedisStore(cluster.url, namespace, "shard-0")
    store.commit(WriteBatch(puts=[mk(f"pre{i}") for i in range(3000)]))  # keys to move: the move takes a while
    writer = Writer(store)
    writer.start()
    try:
        time.sleep(0.3)
        before = len(writer.acked)
        subprocess.run(["redis-cli", "--cluster", "reshard", source.address, "--cluster-from",
                        cluster.node_id(source), "--cluster-to", cluster.node_id(target), "--cluster-slots", "1",
                        "--cluster-yes", "--cluster-pipeline", "10"], check=True, capture_output=True, timeout=120)
        assert cluster.owner_of(slot).port == target.port  # the shard's slot did move
        time.sleep(0.3)
        assert len(writer.acked) > before  # it wrote during and after the move
    finally:
        writer.stop.set()
        writer.join(30)
    assert source.client().execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 0
    _check_nothing_lost(store, writer, before=3000)
    store.close()


def test_a_killed_primary_fails_over_to_its_replica_with_no_acknowledged_write_lost(cluster):
    namespace, slot = "failover", key_slot(RedisKeys("failover", "shard-0").all().encode())
    store = RedisStore(cluster.url, namespace, "shard-0", wait_replicas=1, wait_timeout=2.0)
    writer = Writer(store)
    writer.start()
    try:
        time.sleep(0.5)
        primary = cluster.owner_of(slot)
        at_kill = len(writer.acked)
        primary.kill()  # kill -9
        deadline = time.monotonic() + 60
        while cluster.owner_port(slot) in (None, primary.port) and time.monotonic() < deadline:
            time.sleep(0.1)
        promoted = cluster.owner_of(slot)
        assert promoted.port != primary.port
        # the new primary has no replica, so WAIT 1 acknowledges nothing until the old
        # one, restarted on its data (as its supervisor would), follows it
        primary.start()
        while len(writer.acked) < at_kill + 20 and time.monotonic() < deadline:  # writes go on on the new primary
            time.sleep(0.1)
    finally:
        writer.stop.set()
        writer.join(60)
    assert at_kill > 0 and len(writer.acked) >= at_kill + 20
    _check_nothing_lost(store, writer)
    store.close()


def test_wait_for_more_replicas_than_there_are_is_not_an_acknowledgement(redis_cluster):
    store = RedisStore(redis_cluster.url, "waitmore", "shard-0", wait_replicas=2, wait_timeout=0.2)
    try:
        with pytest.raises(StoreUnavailable, match=r"only [01] of 2 replica"):
            store.commit(WriteBatch(puts=[mk("w")]))
        with pytest.raises(StoreUnavailable, match=r"only 1 of 2 replica"):  # a marker on the slot's primary
            store.confirm_reads()
    finally:
        store.clear()
        store.close()
    one = RedisStore(redis_cluster.url, "waitmore", "shard-0", wait_replicas=1, wait_timeout=2.0)
    try:
        one.confirm_reads()  # its one replica confirms the marker
    finally:
        one.clear()
        one.close()


@pytest.mark.parametrize("wait", [0, 1])
def test_hub_state_and_the_key_ring_live_on_the_cluster(redis_cluster, wait):
    """With ``wait`` each write is confirmed by the slot's replica (WAIT on its primary)."""
    from memorybus.storage.kv import RedisKV

    kv = RedisKV(redis_cluster.url, "mb:{kvtest:bus-0}:kv", wait_replicas=wait)
    try:
        kv.put_many({"sub:a": b"1", "cur:a": b"7", "sub:b": b"2"})
        kv.delete("sub:b")
        assert kv.get("cur:a") == b"7" and kv.scan("sub:") == [("sub:a", b"1")]
        if wait:  # acknowledged, so the slot's replica already holds it
            held = []
            for node in redis_cluster.nodes:
                if node.info("replication")["role"] != "slave":
                    continue
                pipe = node.client().pipeline(transaction=False)  # READONLY: this connection reads a replica
                pipe.execute_command("READONLY")
                pipe.hgetall("mb:{kvtest:bus-0}:kv")
                reply = pipe.execute(raise_on_error=False)[1]
                if not isinstance(reply, Exception):  # the other replicas answer MOVED
                    held.append(reply)
            assert held == [{b"sub:a": b"1", b"cur:a": b"7"}]
    finally:
        kv.delete("sub:a")
        kv.delete("cur:a")
        kv.close()


def test_compaction_rewrites_the_append_only_file_of_every_node(redis_cluster):
    store = RedisStore(redis_cluster.url, "compact", "shard-0")
    before = {n.port: n.info("persistence")["aof_rewrites"] for n in redis_cluster.nodes}
    store.compact()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        after = {n.port: n.info("persistence") for n in redis_cluster.nodes}
        if all(a["aof_rewrites"] > before[p] and not a["aof_rewrite_in_progress"] for p, a in after.items()):
            break
        time.sleep(0.1)
    assert all(n.info("persistence")["aof_rewrites"] > before[n.port] for n in redis_cluster.nodes)
    store.close()


def test_reads_and_writes_while_half_of_the_shards_keys_have_moved(cluster):
    """The slot stopped half-way through a move (what reshard does key batch by key
    batch): reads find every memory on either node, a commit is refused whole or
    applied whole (never half), and once the move ends both go on."""
    namespace, slot = "halfway", key_slot(RedisKeys("halfway", "shard-0").all().encode())
    store = RedisStore(cluster.url, namespace, "shard-0")
    nodes = [mk(f"h{i}") for i in range(200)]
    store.commit(WriteBatch(puts=nodes))
    source = cluster.owner_of(slot)
    target = next(n for n in cluster.primaries() if n.port != source.port)
    src, dst = source.client(), target.client()
    dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", cluster.node_id(source))
    src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", cluster.node_id(target))
    keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 10_000)
    half = keys[: len(keys) // 2]
    src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *half)
    got = store.get_many([n.id for n in nodes])
    assert [g.id for g in got if g is not None] == [n.id for n in nodes]
    late = mk("late")
    try:
        store.commit(WriteBatch(puts=[late], events=[(SCOPE.key, b"late")]))
        applied = True
    except StoreUnavailable:  # TRYAGAIN until the move ends: refused whole
        applied = False
    rest = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 10_000)
    if rest:
        src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *rest)
    for node in cluster.primaries():
        node.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", cluster.node_id(target))
    assert (store.get(late.id) is not None) == applied and store.last_seq(SCOPE.key) == int(applied)
    store.commit(WriteBatch(puts=[late], events=[(SCOPE.key, b"late")]) if not applied else WriteBatch())
    assert store.count() == 201 and store.last_seq(SCOPE.key) == 1
    assert cluster.owner_of(slot).port == target.port
    store.close()
