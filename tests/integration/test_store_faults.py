"""Store faults seen through the bus: a hung Redis (SIGSTOP), a Redis that is down
while a shard restarts (kill -9), a corrupt derived index. Real Redis servers, real
Ray actors, real files."""

import signal
import time
import uuid

import pytest
import redis

import memorybus as mb
from memorybus import Config, Context, actors
from memorybus.scopes import Router
from tests.actor_restart import restart_actor

pytestmark = [pytest.mark.ray, pytest.mark.redis, pytest.mark.model, pytest.mark.timeout(300)]
#: two buses (the module's and a test's own) fit in the 2 CPUs of the local Ray
SMALL = {"embedder_num_cpus": 0.5}


def _members(raw, ns):
    return {m.decode() for m in raw.smembers(f"mb:{{{ns}:shard-0}}:all")}


def test_write_timed_out_on_a_hung_redis_is_adopted_never_hidden_nor_duplicated(ray_local, tmp_path, private_redis):
    """SIGSTOP: the commit times out and the caller is told the outcome is unknown. Either
    the paused server got the script and runs it on SIGCONT, and the shard then adopts the
    write by its operation id (visible, found by recall, a retry with the operation id
    answers that memory), or the call timed out before the script left (it needed a new
    connection, whose handshake the paused server never answered: seen under load, nothing
    applied), and the retry stores it once; the call may also fail plainly (seen once
    under load: the shard knows nothing was applied, a store call it needed before its
    commit timed out). In every case what Redis holds is what the bus shows and nothing is
    stored twice. Tried up to four times, until the first case has happened once (it is
    the usual one; the others alone would not test adoption)."""
    ns = f"hung_{uuid.uuid4().hex[:6]}"
    cfg = Config.redis(private_redis.url, data_dir=str(tmp_path / "data"), num_shards=1, namespace=ns,
                       store_timeout=1.0, **SMALL)
    bus = mb.connect(cfg)
    raw = redis.Redis.from_url(private_redis.url)
    try:
        ctx = Context("acme", "u1")
        bus.remember("The office opens at nine", ctx)
        adopted = 0
        for attempt in range(4):
            text = f"The launch code word is {('pineapple', 'mango', 'papaya', 'lychee')[attempt]}"
            before = _members(raw, ns)
            private_redis.kill(signal.SIGSTOP)
            try:
                with pytest.raises(mb.StoreUnavailable) as exc:
                    bus.remember(text, ctx)
            finally:
                private_redis.kill(signal.SIGCONT)
            # unknown: the commit was tried; plain StoreUnavailable: the shard knows nothing was
            # applied (a store call it needed before its commit timed out)
            unknown = isinstance(exc.value, mb.OutcomeUnknown)
            assert not unknown or exc.value.op_id
            in_redis = _members(raw, ns)
            new = in_redis - before
            assert before <= in_redis and len(new) <= int(unknown), repr(exc.value)
            assert {n.id for n in bus.list_memories(ctx).memories} == in_redis  # applied: shown; not: not shown
            if new:
                hits = bus.recall(text, ctx, k=1)
                assert hits[0].node.content == text and hits[0].node.id in new
            again = bus.remember(text, ctx, op_id=exc.value.op_id if unknown else None)
            assert again.content == text and (not new or again.id in new)
            assert _members(raw, ns) == before | {again.id} and bus.count() == len(before) + 1
            if new:
                adopted += 1
                break
        assert adopted == 1, "the paused server never got the script in four tries"
    finally:
        bus.shutdown()


@pytest.fixture(scope="module")
def sqlite_bus(ray_local, tmp_path_factory):
    """An embedded bus whose SQLite stores give up on a lock after 1 s."""
    data = tmp_path_factory.mktemp("faults")
    bus = mb.connect(Config.embedded(data, num_shards=2, namespace=f"faults_{uuid.uuid4().hex[:6]}",
                                     store_timeout=1.0, **SMALL))
    bus.data_dir = data
    yield bus
    bus.shutdown()


def split_context(bus):
    """A context whose user scope and org scope live on different shards."""
    for _ in range(100):
        ctx = Context(f"org{uuid.uuid4().hex[:8]}", "u1")
        user, org = (Router(bus.config.num_shards).shard_for(ctx.resolve_scope(s).key) for s in ("user", "org"))
        if user != org:
            return ctx, user, org
    raise AssertionError("no split found")


def visible(bus, ctx):
    return {n.id: n.content for n in bus.list_memories(ctx, limit=1000).memories}


def test_remember_many_across_shards_checks_every_part_before_any_shard_writes(sqlite_bus):
    bus = sqlite_bus
    ctx, _, _ = split_context(bus)
    taken = bus.remember("the user's original note", ctx, scope="user")
    before = visible(bus, ctx)
    with pytest.raises(mb.VersionConflict):
        bus.remember_many([{"content": f"org note {i}", "scope": "org"} for i in range(3)]
                          + [{"content": "another text under a taken id", "scope": "user", "id": taken.id}], ctx)
    assert visible(bus, ctx) == before  # the org shard's part was not written either


def test_remember_many_reports_per_item_when_a_shard_fails_after_the_checks(sqlite_bus):
    """One shard's store is locked by another process: its part fails after 1 s, the
    other shard's part commits. The caller learns exactly which items are stored, and
    a retry with the operation id finishes the batch without a copy."""
    import sqlite3

    bus = sqlite_bus
    ctx, user_shard, _ = split_context(bus)
    items = [{"content": f"user note {i} about the roadmap", "scope": "user"} for i in range(3)]
    items += [{"content": f"org note {i} about the budget", "scope": "org"} for i in range(3)]
    lock = sqlite3.connect(bus.data_dir / f"shard-{user_shard}" / "records.sqlite", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with pytest.raises(mb.PartialWrite) as exc:
            bus.remember_many(items, ctx)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    err = exc.value
    assert [n is not None for n in err.stored] == [False] * 3 + [True] * 3
    assert sorted(err.errors) == [0, 1, 2] and all(isinstance(e, mb.StoreUnavailable) for e in err.errors.values())
    assert sorted(visible(bus, ctx).values()) == sorted(f"org note {i} about the budget" for i in range(3))
    done = bus.remember_many(items, ctx, op_id=err.op_id)
    assert [n.id for n in done[3:]] == [n.id for n in err.stored[3:]]  # the stored part answers from its record
    assert sorted(visible(bus, ctx).values()) == sorted(i["content"] for i in items)


def test_shard_restarted_while_redis_is_down_serves_again_once_it_is_back(ray_local, tmp_path, private_redis):
    cfg = Config.redis(private_redis.url, data_dir=str(tmp_path / "data"), num_shards=1,
                       namespace=f"down_{uuid.uuid4().hex[:6]}", store_timeout=1.0, **SMALL)
    bus = mb.connect(cfg)
    try:
        ctx = Context("acme", "u1")
        bus.remember_many([f"fact {i}: the blue door is on floor {i}" for i in range(3)], ctx)
        private_redis.kill(signal.SIGKILL)
        restart_actor(actors.shard_handles(bus.config)[0], timeout=45.0, call_timeout=5.0)  # its restart finds no store: it must not die of it
        with pytest.raises(mb.StoreUnavailable):
            bus.count()
        private_redis.start()
        deadline = time.time() + 30
        while True:
            try:
                if bus.count() == 3:
                    break
            except mb.Unavailable:
                assert time.time() < deadline, "the shard never served again"
                time.sleep(0.3)
        again = mb.connect(cfg)  # a new client finds the same, living shard
        assert again.count() == 3
        hits = again.recall("which floor is the blue door on?", ctx, k=3)
        assert sorted(h.node.content for h in hits) == [f"fact {i}: the blue door is on floor {i}" for i in range(3)]
    finally:
        bus.shutdown()


def test_corrupt_vector_index_is_rebuilt_from_the_store(sqlite_bus):
    bus = sqlite_bus
    ctx, user_shard, _ = split_context(bus)
    stored = bus.remember_many([f"memo {i}: the green key opens locker {i}" for i in range(4)], ctx)
    vectors = bus.data_dir / f"shard-{user_shard}" / "vectors"
    files = [p for p in vectors.rglob("*") if p.is_file()]
    assert files
    for p in files:  # garbage over every file of the derived index
        p.write_bytes(b"\x00garbage\xff" * 7)
    restart_actor(actors.shard_handles(bus.config)[user_shard], timeout=45.0, call_timeout=5.0)
    hits = bus.recall("which locker does the green key open?", ctx, k=4)
    assert {h.node.id for h in hits} == {n.id for n in stored}


def test_connect_replaces_a_shard_actor_that_died_in_its_constructor(ray_local, tmp_path):
    """A named actor whose constructor raised stays dead and keeps its name; connect must
    not hand it back."""
    import ray

    cfg = Config.embedded(tmp_path / "data", num_shards=1, namespace=f"dead_{uuid.uuid4().hex[:6]}", **SMALL)

    class Broken:
        def __init__(self) -> None:
            raise RuntimeError("the store was unreachable while this shard started")

        def pid(self) -> int:
            return 0

    dead = ray.remote(Broken).options(name=actors.shard_actor_name(cfg, 0), namespace=cfg.namespace,
                                      num_cpus=0.01, max_restarts=0).remote()
    with pytest.raises(ray.exceptions.ActorDiedError):
        ray.get(dead.pid.remote(), timeout=30)
    bus = mb.connect(cfg)
    try:
        ctx = Context("acme", "u1")
        bus.remember("the shard is alive again", ctx)
        assert bus.count() == 1
    finally:
        bus.shutdown()


def test_reads_do_not_wait_for_a_blocked_write_and_every_call_has_a_timeout(ray_local, tmp_path):
    """Another process holds the SQLite write lock: a write waits for it, a read does
    not; a call past its timeout raises OperationTimeout naming its operation id, and
    the retry with that id finds the write applied once."""
    import sqlite3
    import threading

    cfg = Config.embedded(tmp_path / "data", num_shards=1, namespace=f"slow_{uuid.uuid4().hex[:6]}",
                          store_timeout=20.0, **SMALL)
    bus = mb.connect(cfg)
    try:
        ctx = Context("acme", "u1")
        first = bus.remember("the standup is at ten", ctx)
        bus.recall("warm up the query encoder", ctx, k=1)
        lock = sqlite3.connect(tmp_path / "data" / "shard-0" / "records.sqlite", isolation_level=None)
        lock.execute("BEGIN IMMEDIATE")
        blocked: list = []
        writer = threading.Thread(target=lambda: blocked.append(bus.remember("the retro is on friday", ctx)))
        try:
            writer.start()
            time.sleep(1.0)  # the write is waiting for the lock inside the shard
            started = time.monotonic()
            assert bus.get(first.id, ctx).content == "the standup is at ten"
            assert bus.recall("when is the standup?", ctx, k=1)[0].node.id == first.id
            assert time.monotonic() - started < 4.0, "a read waited for the blocked write"
            with pytest.raises(mb.OperationTimeout) as exc:
                bus.with_timeout(1.0).remember("the demo is on monday", ctx)
            assert exc.value.op_id
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        writer.join(timeout=60)
        assert blocked and blocked[0].content == "the retro is on friday"
        again = bus.remember("the demo is on monday", ctx, op_id=exc.value.op_id)
        assert again.content == "the demo is on monday"
        assert bus.count() == 3
    finally:
        bus.shutdown()
