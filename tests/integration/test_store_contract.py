"""One contract, every Store: a real SQLite file and a real Redis server."""

import signal
import threading
import time

import numpy as np
import pytest

from memorybus import MemoryNode, MemoryNotFound, Scope, StoreUnavailable, VersionConflict
from memorybus.storage import Scrub, SlotWrite, Store, WriteBatch
from memorybus.storage.redis import RedisStore
from memorybus.storage.sqlite import SqliteStore

pytestmark = pytest.mark.redis
S1, S2 = Scope("acme", "u1"), Scope("acme", "u2")
_counter = iter(range(10**9))


@pytest.fixture(params=["sqlite", "redis", "redis-cluster"])
def store(request, tmp_path, redis_server):
    if request.param == "sqlite":
        s = SqliteStore(tmp_path / "s.sqlite")
    elif request.param == "redis-cluster":  # three primaries with a replica each (tests/redis_cluster.py)
        s = RedisStore(request.getfixturevalue("redis_cluster").url, f"t{next(_counter)}", "shard-0")
        assert s.cluster
    else:
        s = RedisStore(redis_server.url, f"t{next(_counter)}", "shard-0")
        assert not s.cluster
    yield s
    s.clear()
    s.close()


def mk(content="c", scope=S1, **kw):
    kw.setdefault("version", 1)
    return MemoryNode(
        content=content,
        scope=scope,
        embedding=np.arange(4, dtype=np.float32),
        created_at=10.0,
        last_accessed=10.0,
        valid_from=10.0,
        **kw,
    )


def test_is_a_store(store):
    assert isinstance(store, Store)


def test_put_get_round_trip(store):
    n = mk("hello", key="user:u1/lang", structured={"a": [1, 2]}, tags=("x",))
    store.commit(WriteBatch(puts=[n]))
    got = store.get(n.id)
    assert got is not None and got.same_as(n)
    assert store.get("missing") is None
    assert store.count() == 1


def test_iter_all_and_get_many(store):
    nodes = [mk(f"n{i}") for i in range(2500)]
    store.commit(WriteBatch(puts=nodes))
    assert {n.id for n in store.iter_all(batch_size=300)} == {n.id for n in nodes}
    got = store.get_many([nodes[5].id, "missing", nodes[7].id])
    assert got[0].id == nodes[5].id and got[1] is None and got[2].id == nodes[7].id


def test_compare_and_set(store):
    n = mk("v1")
    store.commit(WriteBatch(puts=[n]))
    store.commit(WriteBatch(updates=[(n.copy(content="v2", version=2), 1)]))
    assert store.get(n.id).content == "v2" and store.get(n.id).version == 2
    with pytest.raises(VersionConflict) as exc:
        store.commit(WriteBatch(updates=[(n.copy(content="v2b", version=2), 1)]))
    assert (exc.value.expected, exc.value.actual) == (1, 2)
    assert store.get(n.id).content == "v2"
    with pytest.raises(MemoryNotFound):
        store.commit(WriteBatch(updates=[(mk("ghost", version=2), 1)]))


def test_batch_is_all_or_nothing(store):
    a, b = mk("a"), mk("b")
    store.commit(WriteBatch(puts=[a, b]))
    c = mk("c")
    with pytest.raises(VersionConflict):
        store.commit(
            WriteBatch(
                puts=[c], updates=[(a.copy(content="a2", version=2), 1), (b.copy(content="b2", version=2), 7)]
            )
        )
    assert store.get(c.id) is None
    assert store.get(a.id).content == "a" and store.get(b.id).content == "b"
    with pytest.raises(VersionConflict):  # same id, different record
        store.commit(WriteBatch(puts=[mk("x"), a.copy(content="other")]))
    assert store.count() == 2


def test_put_is_idempotent(store):
    a = mk("a")
    store.commit(WriteBatch(puts=[a]))
    store.commit(WriteBatch(puts=[a]))
    assert store.count() == 1


def test_large_batches_check_every_put_against_the_store_and_the_batch(store):
    """More puts than one id lookup takes (SQLite looks ids up in groups of 500): every
    stored one is still checked, and a repeat inside the batch counts like a stored one."""
    first = [mk(f"m{i}") for i in range(1200)]
    store.commit(WriteBatch(puts=first[:700]))
    store.commit(WriteBatch(puts=first))  # 700 retries, 500 new
    assert store.count() == 1200
    extra = mk("extra")
    store.commit(WriteBatch(puts=[extra, extra]))  # the same record twice: stored once
    assert store.count() == 1201
    late = mk("late")
    with pytest.raises(VersionConflict):  # a stored memory, past the first lookup group, with another record
        store.commit(WriteBatch(puts=[late, *first[:1100], first[1099].copy(content="changed")]))
    with pytest.raises(VersionConflict):  # a repeat inside the batch with another record
        store.commit(WriteBatch(puts=[late, late.copy(content="other")]))
    assert store.get(late.id) is None and store.count() == 1201
    assert store.get(first[1099].id).content == "m1099"


def test_delete(store):
    a = mk("a", key="k")
    store.commit(WriteBatch(puts=[a]))
    with pytest.raises(VersionConflict):
        store.commit(WriteBatch(deletes=[(a.id, 5)]))
    store.commit(WriteBatch(deletes=[(a.id, 1)]))
    assert store.get(a.id) is None and store.count() == 0
    assert list(store.iter_all()) == []
    with pytest.raises(MemoryNotFound):
        store.commit(WriteBatch(deletes=[(a.id, None)]))


def test_touch_is_unversioned(store):
    a = mk("a")
    store.commit(WriteBatch(puts=[a]))
    store.touch({a.id: (3, 99.5), "missing": (1, 5.0)})
    store.touch({a.id: (1, 50.0)})
    got = store.get(a.id)
    assert got.access_count == 4 and got.last_accessed == 99.5 and got.version == 1
    assert store.get("missing") is None


def test_concurrent_cas_never_loses_an_update(store):
    n = mk("0")
    store.commit(WriteBatch(puts=[n]))
    wins = []

    def worker():
        for _ in range(30):
            while True:
                cur = store.get(n.id)
                try:
                    store.commit(
                        WriteBatch(
                            updates=[
                                (
                                    cur.copy(content=str(int(cur.content) + 1), version=cur.version + 1),
                                    cur.version,
                                )
                            ]
                        )
                    )
                    wins.append(1)
                    break
                except VersionConflict:
                    continue

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    final = store.get(n.id)
    assert final.content == "120" and final.version == 121 and len(wins) == 120


def test_redis_errors_become_store_unavailable(private_redis):
    s = RedisStore(private_redis.url, "t", "shard-0", socket_timeout=0.5)
    s.commit(WriteBatch(puts=[mk("a")]))
    private_redis.kill(signal.SIGSTOP)  # a hung server
    try:
        with pytest.raises(StoreUnavailable):
            s.commit(WriteBatch(puts=[mk("b")]))
    finally:
        private_redis.stop()
    with pytest.raises(StoreUnavailable):
        RedisStore("redis://127.0.0.1:1/0", "t", "shard-0", socket_timeout=0.5)


def test_redis_acknowledged_writes_survive_kill_9(private_redis):
    s = RedisStore(private_redis.url, "t", "shard-0")
    nodes = [mk(f"n{i}") for i in range(200)]
    for n in nodes:
        s.commit(WriteBatch(puts=[n]))
    private_redis.kill(signal.SIGKILL)
    private_redis.start()
    s2 = RedisStore(private_redis.url, "t", "shard-0")
    assert {n.id for n in s2.iter_all()} == {n.id for n in nodes}


def test_sqlite_unusable_path_is_store_unavailable(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreUnavailable):
        SqliteStore(tmp_path / "file" / "db.sqlite")


def test_fact_slot_compare_and_set(store):
    a, b = mk("python", key="lang"), mk("rust", key="lang")
    assert store.slot(S1.key, "lang") == (None, 0)
    store.commit(WriteBatch(puts=[a], slots=[SlotWrite(S1.key, "lang", 0, a.id)]))
    assert store.slot(S1.key, "lang") == (a.id, 1)
    with pytest.raises(VersionConflict) as exc:  # a writer that read the slot before a's write
        store.commit(WriteBatch(puts=[b], slots=[SlotWrite(S1.key, "lang", 0, b.id)]))
    assert (exc.value.expected, exc.value.actual) == (0, 1)
    assert store.get(b.id) is None  # nothing of the losing batch was applied
    store.commit(WriteBatch(puts=[b], slots=[SlotWrite(S1.key, "lang", 1, b.id)]))
    assert store.slot(S1.key, "lang") == (b.id, 2)
    assert store.slot(S2.key, "lang") == (None, 0)


def test_fact_evidence_moves_with_its_slot_or_not_at_all(store):
    """The evidence of a keyed fact is written in the slot's own compare-and-set: a
    conflicting batch leaves both as they were; None keeps what is stored."""
    a, b = mk("a", key="lang"), mk("b", key="lang")
    assert store.fact_slot(S1.key, "lang") == (None, 0, None)
    store.commit(WriteBatch(puts=[a], slots=[SlotWrite(S1.key, "lang", 0, a.id, 1, b"ev-1")]))
    assert store.fact_slot(S1.key, "lang") == (a.id, 1, b"ev-1")
    with pytest.raises(VersionConflict):
        store.commit(WriteBatch(puts=[b], slots=[SlotWrite(S1.key, "lang", 0, b.id, 1, b"ev-lost")]))
    assert store.fact_slot(S1.key, "lang") == (a.id, 1, b"ev-1")
    store.commit(WriteBatch(puts=[b], slots=[SlotWrite(S1.key, "lang", 1, b.id)]))  # no evidence given
    assert store.fact_slot(S1.key, "lang") == (b.id, 2, b"ev-1")
    store.commit(WriteBatch(slots=[SlotWrite(S2.key, "odd*key\x1fpart", 0, "x", 1, b"ev-2")]))
    assert store.all_evidence() == [(S1.key, "lang", b"ev-1"), (S2.key, "odd*key\x1fpart", b"ev-2")]
    store.scrub(Scrub(slots=[(S1.key, "lang")]))  # an erased fact's evidence goes with its slot
    assert store.fact_slot(S1.key, "lang") == (None, 0, None)
    assert store.all_evidence() == [(S2.key, "odd*key\x1fpart", b"ev-2")]


def test_event_log_sequences_per_scope_atomically(store):
    seqs = store.commit(WriteBatch(puts=[mk("a")], events=[(S1.key, b"e1"), (S2.key, b"x1"), (S1.key, b"e2")]))
    assert seqs == [1, 1, 2]
    assert store.commit(WriteBatch(events=[(S1.key, b"e3")])) == [3]
    assert store.read_events(S1.key) == [(1, b"e1"), (2, b"e2"), (3, b"e3")]
    assert store.read_events(S1.key, after=1, limit=1) == [(2, b"e2")]
    assert store.read_events(S2.key) == [(1, b"x1")]
    assert store.last_seq(S1.key) == 3
    assert store.last_seq("nope") == 0
    # a failed batch appends no event
    with pytest.raises(MemoryNotFound):
        store.commit(WriteBatch(updates=[(mk("ghost", version=2), 1)], events=[(S1.key, b"lost")]))
    assert store.last_seq(S1.key) == 3
    assert [s for s, _ in store.read_events(S1.key)] == [1, 2, 3]


def test_fact_events_are_indexed_by_key(store):
    """A keyed fact's events are read by key, in order, without the scope's other events;
    a failed batch indexes nothing."""
    store.commit(WriteBatch(events=[(S1.key, b"other"), (S1.key, b"lang-1"), (S1.key, b"city-1")],
                            event_keys=[None, "lang", "city"]))
    store.commit(WriteBatch(events=[(S1.key, b"lang-2"), (S2.key, b"lang-elsewhere")], event_keys=["lang", "lang"]))
    with pytest.raises(MemoryNotFound):
        store.commit(WriteBatch(updates=[(mk("ghost", version=2), 1)], events=[(S1.key, b"lang-lost")],
                                event_keys=["lang"]))
    assert store.fact_events(S1.key, "lang") == [(2, b"lang-1"), (4, b"lang-2")]
    assert store.fact_events(S1.key, "city") == [(3, b"city-1")]
    assert store.fact_events(S2.key, "lang") == [(1, b"lang-elsewhere")]
    assert store.fact_events(S1.key, "nope") == []


@pytest.fixture(params=["sqlite", "redis", "redis-cluster"])
def short_store(request, tmp_path, redis_server):
    """A store keeping operation records 0.3 s."""
    if request.param == "sqlite":
        s = SqliteStore(tmp_path / "s.sqlite", op_retention=0.3)
    elif request.param == "redis-cluster":
        s = RedisStore(request.getfixturevalue("redis_cluster").url, f"t{next(_counter)}", "shard-0",
                       op_retention=0.3)
    else:
        s = RedisStore(redis_server.url, f"t{next(_counter)}", "shard-0", op_retention=0.3)
    yield s
    s.clear()
    s.close()


def test_operation_id_is_recorded_with_the_batch_and_answers_a_rerun(short_store):
    from memorybus.storage import AlreadyApplied

    store = short_store
    a = mk("a")
    seqs = store.commit(WriteBatch(puts=[a], events=[(S1.key, b"e1")], op="op-1", op_result=b"answer-1"))
    assert store.op_record("op-1") == (b"answer-1", seqs) and store.op_record("op-2") is None
    with pytest.raises(AlreadyApplied) as exc:  # a re-run, even one that would now conflict
        store.commit(WriteBatch(puts=[a.copy(content="changed")], events=[(S1.key, b"e2")], op="op-1",
                                op_result=b"other"))
    assert exc.value.record == (b"answer-1", seqs)
    assert store.get(a.id).content == "a" and store.last_seq(S1.key) == 1  # nothing applied
    with pytest.raises(VersionConflict):  # a failed batch records no operation
        store.commit(WriteBatch(puts=[a.copy(content="changed")], op="op-3", op_result=b"x"))
    assert store.op_record("op-3") is None
    assert store.resolve("op-1", "any") == (b"answer-1", seqs)
    time.sleep(0.5)  # past the retention: the record goes, the effect stays
    store.commit(WriteBatch(puts=[mk("b")], op="op-4", op_result=b"y"))
    assert store.op_record("op-1") is None and store.get(a.id).content == "a"


def test_redis_resolve_fences_off_an_attempt_still_on_its_way(redis_server):
    """resolve() of an attempt that has not committed makes sure it never does: a
    script the server runs after the resolve applies nothing."""
    store = RedisStore(redis_server.url, f"t{next(_counter)}", "shard-0")
    try:
        assert store.resolve("op-9", "attempt-1") is None
        with pytest.raises(StoreUnavailable):
            store.commit(WriteBatch(puts=[mk("late")], op="op-9", op_result=b"r", attempt="attempt-1"))
        assert store.count() == 0 and store.op_record("op-9") is None
        # a new attempt of the same operation (the caller's retry) commits once
        store.commit(WriteBatch(puts=[mk("retry")], op="op-9", op_result=b"r2", attempt="attempt-2"))
        assert store.count() == 1 and store.resolve("op-9", "attempt-3") is not None
    finally:
        store.clear()
        store.close()


def test_event_scopes_and_all_slots_list_what_an_export_needs(store):
    from memorybus.storage import SlotWrite

    assert store.event_scopes() == [] and store.all_slots() == []
    a, b = mk("a", key="user:u1/lang"), mk("b", scope=S2)
    store.commit(WriteBatch(puts=[a, b], slots=[SlotWrite(S1.key, "user:u1/lang", 0, a.id)],
                            events=[(S1.key, b"e1"), (S2.key, b"e2"), (S1.key, b"e3")]))
    store.commit(WriteBatch(slots=[SlotWrite(S1.key, "odd*key\x1fpart", 0, b.id, 3)]))
    assert store.event_scopes() == sorted([S1.key, S2.key])
    assert store.all_slots() == sorted([(S1.key, "user:u1/lang", a.id, 1), (S1.key, "odd*key\x1fpart", b.id, 3)])


def test_scrub_rewrites_payloads_in_place_and_drops_slots(store):
    store.commit(WriteBatch(slots=[SlotWrite(S1.key, "lang", 0, "id-1")],
                            events=[(S1.key, b"secret-1"), (S1.key, b"keep-2"), (S1.key, b"secret-3")],
                            event_keys=["lang", None, "lang"], op="op-s", op_result=b"secret-answer"))
    store.commit(WriteBatch(slots=[SlotWrite(S2.key, "lang", 0, "id-2")], events=[(S2.key, b"other")],
                            event_keys=["lang"]))
    assert dict(store.op_results())["op-s"] == b"secret-answer"
    scrub = Scrub(events={S1.key: {1: b"bare-1", 3: b"bare-3"}}, ops={"op-s": b"bare-answer"},
                  slots=[(S1.key, "lang")])
    store.scrub(scrub)
    store.scrub(scrub)  # idempotent
    assert store.read_events(S1.key) == [(1, b"bare-1"), (2, b"keep-2"), (3, b"bare-3")]
    assert store.op_record("op-s").result == b"bare-answer" and store.op_record("op-s").seqs == [1, 2, 3]
    assert store.slot(S1.key, "lang") == (None, 0) and store.fact_events(S1.key, "lang") == []
    assert store.slot(S2.key, "lang") == ("id-2", 1) and store.fact_events(S2.key, "lang") == [(1, b"other")]
    assert store.commit(WriteBatch(events=[(S1.key, b"next")])) == [4]  # the log goes on after a rewrite
    store.compact()
    assert store.read_events(S1.key, 3) == [(4, b"next")]


def test_erase_job_is_recorded_and_cleared(store):
    assert store.erase_job() is None
    store.set_erase_job(b"job-1")
    assert store.erase_job() == b"job-1"
    store.set_erase_job(None)
    assert store.erase_job() is None
    assert store.meta() == {}  # the job is no part of the store's identity
