"""The plain Shard class over a real SQLite file, Qdrant Edge and the real model."""

from dataclasses import replace

import numpy as np
import pytest

from memorybus.clock import ManualClock
from memorybus.errors import InvalidMemory, InvalidRequest, MemoryNotFound, ScopeViolation, VersionConflict
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus
from memorybus.retrieval import RecallOptions
from memorybus.scopes import Context, Scope
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

pytestmark = pytest.mark.model

U1 = Context("acme", "u1", "planner", "s1")
U2 = Context("acme", "u2", "planner", "s2")


@pytest.fixture
def clock():
    return ManualClock()


def open_shard(tmp_path, clock, **kw):
    """A shard on r.sqlite and the vector directory v in ``tmp_path`` (reopens an existing one)."""
    return Shard("shard-0", SqliteStore(tmp_path / "r.sqlite"), EdgeVectorIndex(tmp_path / "v", 384), dim=384,
                 clock=clock, **kw)  # fmt: skip


@pytest.fixture
def shard(tmp_path, clock):
    s = open_shard(tmp_path, clock)
    yield s
    s.close()


def put(shard, embedder, ctx, texts, scope=None, **kw):
    nodes = [MemoryNode(content=t, scope=scope or ctx.scope, **kw) for t in texts]
    return shard.put_many(ctx, nodes, embedder.encode(texts))


def state(shard):
    return sorted(
        (n.id, n.version, n.content, n.status.value) for n in shard.store.iter_all()
    ), shard.index.count()


def test_put_search_get(shard, embedder):
    stored = put(shard, embedder, U1, ["The user codes in Rust", "Lunch was pasta", "Meeting at 3pm"])
    assert all(n.version == 1 for n in stored)
    hits = shard.search(U1, embedder.encode(["which programming language"])[0], 2)
    assert [h.node.content for h in hits] == ["The user codes in Rust"]  # the others do not match
    everything = shard.search(U1, embedder.encode(["which programming language"])[0], 3,
                              options=RecallOptions(min_relevance=0.0))  # fmt: skip
    assert everything[0].node.content == "The user codes in Rust" and len(everything) == 3
    assert everything[0].score > everything[1].score >= everything[2].score
    got = shard.get(U1, stored[0].id)
    assert got.content == "The user codes in Rust" and got.embedding is None
    assert shard.get(U1, stored[0].id, with_embedding=True).embedding.shape == (384,)


def test_visibility_enforced_in_the_shard(shard, embedder):
    mine = put(shard, embedder, U1, ["u1 private note about salaries"], scope=Scope("acme", "u1"))
    put(shard, embedder, U2, ["u2 session secret about salaries"])
    put(shard, embedder, U1, ["org wide: salaries are paid monthly"], scope=Scope("acme"))
    hits = shard.search(U2, embedder.encode(["salaries"])[0], 10)
    contents = {h.node.content for h in hits}
    assert "u1 private note about salaries" not in contents
    assert contents == {"u2 session secret about salaries", "org wide: salaries are paid monthly"}
    with pytest.raises(ScopeViolation):
        shard.get(U2, mine[0].id)
    with pytest.raises(ScopeViolation):
        shard.update(U2, mine[0].id, 1, {"importance": 9})
    with pytest.raises(ScopeViolation):
        shard.delete(U2, mine[0].id)
    with pytest.raises(ScopeViolation):  # writing into someone else's scope
        put(shard, embedder, U2, ["sneaky"], scope=Scope("acme", "u1"))


def test_update_is_compare_and_set(shard, embedder):
    (n,) = put(shard, embedder, U1, ["User prefers tea"])
    vec = embedder.encode(["User prefers coffee"])[0]
    u = shard.update(U1, n.id, 1, {"content": "User prefers coffee"}, vec, op="op-1")
    assert u.version == 2 and u.content == "User prefers coffee"
    with pytest.raises(VersionConflict) as exc:
        shard.update(U1, n.id, 1, {"importance": 9})
    assert (exc.value.expected, exc.value.actual) == (1, 2)
    with pytest.raises(VersionConflict):  # the same change by another call: one winner per version
        shard.update(U1, n.id, 1, {"content": "User prefers coffee"}, vec)
    # a re-executed update that already committed (same operation id) answers as it did
    again = shard.update(U1, n.id, 1, {"content": "User prefers coffee"}, vec, op="op-1")
    assert again.version == 2
    hits = shard.search(U1, embedder.encode(["coffee"])[0], 1)
    assert hits[0].node.id == n.id and hits[0].node.content == "User prefers coffee"
    with pytest.raises(InvalidRequest):
        shard.update(U1, n.id, 2, {"content": "no vector given"})
    with pytest.raises(InvalidRequest):
        shard.update(U1, n.id, 2, {"scope": Scope("acme")})
    with pytest.raises(MemoryNotFound):
        shard.update(U1, "00000000-0000-0000-0000-000000000000", 1, {"importance": 2})


def test_bad_input_changes_nothing(shard, embedder):
    put(shard, embedder, U1, ["baseline memory"])
    before = state(shard)
    good = MemoryNode(content="fine", scope=U1.scope)
    vecs = embedder.encode(["fine", "x"])
    bads = [
        [good, MemoryNode(content="", scope=U1.scope)],
        [good, MemoryNode(content="x", scope=U1.scope, confidence=2.0)],
        [good, MemoryNode(content="x", scope=Scope("acme", "u2"))],
        [good, MemoryNode(content="x", scope=U1.scope, kind="dream")],
    ]
    for batch in bads:
        with pytest.raises((InvalidMemory, ScopeViolation)):
            shard.put_many(U1, batch, vecs)
        assert state(shard) == before
    with pytest.raises(InvalidMemory):
        shard.put_many(U1, [good], np.full((1, 384), np.nan, dtype=np.float32))
    with pytest.raises(InvalidMemory):
        shard.put_many(U1, [good], np.ones((1, 12), dtype=np.float32))
    with pytest.raises(InvalidRequest):
        shard.search(U1, np.ones(5, dtype=np.float32), 3)
    with pytest.raises(InvalidRequest):
        shard.search(U1, vecs[0], 0)
    with pytest.raises(InvalidRequest):
        shard.put_many("not a context", [good], vecs[:1])
    assert state(shard) == before


def test_retried_put_is_idempotent(shard, embedder):
    node = MemoryNode(content="retry me", scope=U1.scope).stamped(1000.0)
    vec = embedder.encode(["retry me"])
    first = shard.put_many(U1, [node], vec)
    second = shard.put_many(U1, [node], vec)
    assert first[0].id == second[0].id
    assert shard.store.count() == 1 and shard.index.count() == 1
    with pytest.raises(VersionConflict):
        shard.put_many(U1, [replace(node, content="different")], vec)


def test_rebuild_from_store_restores_index(tmp_path, embedder, clock):
    s = open_shard(tmp_path, clock)
    put(s, embedder, U1, [f"fact number {i} about topic {i}" for i in range(25)])
    s.close()
    # the index directory is thrown away entirely: it is derived data
    import shutil

    shutil.rmtree(tmp_path / "v")
    s2 = open_shard(tmp_path, clock)
    assert s2.count() == 25 and s2.index.count() == 25
    hits = s2.search(U1, embedder.encode(["fact number 7 about topic 7"])[0], 1)
    assert hits[0].node.content == "fact number 7 about topic 7"
    s2.close()


def test_recall_counts_access_and_flushes(shard, embedder, clock):
    (n,) = put(shard, embedder, U1, ["remember the milk"])
    q = embedder.encode(["milk"])[0]
    clock.advance(days=1)
    shard.search(U1, q, 1)
    shard.search(U1, q, 1)
    assert shard.get(U1, n.id).access_count == 2
    shard.flush()
    stored = shard.store.get(n.id)
    assert stored.access_count == 2 and stored.last_accessed == pytest.approx(clock.now())
    assert stored.version == 1  # access is not a versioned write


def test_pending_access_statistics_are_due_by_age_and_written_on_close(tmp_path, embedder, clock):
    import time

    s = open_shard(tmp_path, clock, touch_flush_seconds=2.0)
    (n,) = put(s, embedder, U1, ["remember the milk"])
    assert not s.touches_due()  # nothing pending
    s.search(U1, embedder.encode(["milk"])[0], 1)
    assert not s.touches_due()  # pending, but young
    time.sleep(1.05)
    assert s.touches_due()  # half the period old: the shard actor's timer queues a flush now
    assert s.store.get(n.id).access_count == 0
    s.close()  # shutdown: pending statistics are written
    again = SqliteStore(tmp_path / "r.sqlite")
    assert again.get(n.id).access_count == 1
    again.close()


def test_salience_and_status_shape_ranking(shard, embedder, clock):
    put(shard, embedder, U1, ["project deadline is friday"], importance=1, decay_rate=0.2)
    clock.advance(days=60)
    put(shard, embedder, U1, ["project deadline is monday"], importance=5)
    hits = shard.search(U1, embedder.encode(["project deadline"])[0], 2)
    assert hits[0].node.content == "project deadline is monday"  # fresh beats faded
    archived = put(shard, embedder, U1, ["archived deadline note"])
    shard.update(U1, archived[0].id, 1, {"status": MemoryStatus.ARCHIVED})
    ids = {h.node.id for h in shard.search(U1, embedder.encode(["archived deadline note"])[0], 5)}
    assert archived[0].id not in ids
    ids = {
        h.node.id
        for h in shard.search(
            U1, embedder.encode(["archived deadline note"])[0], 5, statuses=[MemoryStatus.ARCHIVED]
        )
    }
    assert ids == {archived[0].id}


def test_expired_working_memory_not_recalled(shard, embedder, clock):
    put(
        shard,
        embedder,
        U1,
        ["scratch: current step is 3"],
        kind=MemoryKind.WORKING,
        expires_at=clock.now() + 60,
    )
    q = embedder.encode(["current step"])[0]
    assert shard.search(U1, q, 1)[0].node.content == "scratch: current step is 3"
    clock.advance(120)
    assert all(h.node.kind is not MemoryKind.WORKING for h in shard.search(U1, q, 5))


def test_delete(shard, embedder):
    (n,) = put(shard, embedder, U1, ["forget me"])
    assert shard.delete(U1, n.id) is True
    assert shard.delete(U1, n.id) is False
    assert shard.store.get(n.id) is None and shard.index.count() == 0
    with pytest.raises(MemoryNotFound):
        shard.get(U1, n.id)


def test_a_callers_pipelined_calls_keep_the_order_it_sent_them_in():
    """Calls that embed run side by side; one naming the call sent before it waits for
    that call's step (CallOrder), however their embeddings come back."""
    import threading
    import time

    from memorybus.shard.gate import CallOrder

    order, steps = CallOrder(), []

    def second():
        assert order.wait("first", "done", 30)
        steps.append("second")

    waiter = threading.Thread(target=second)
    waiter.start()
    time.sleep(0.2)
    assert steps == []  # its embedding is back, its predecessor's write is not
    steps.append("first")
    order.reach("first", "done")
    waiter.join(30)
    assert steps == ["first", "second"]
    assert order.wait(None, "done", 0)  # the first call of a caller waits for nothing
    assert not order.wait("never-sent", "done", 0.05)  # bounded: the caller's timeout decides
    small = CallOrder(remember=2)
    for op in ("a", "b", "c"):
        small.reach(op, "done")
    assert not small.wait("a", "done", 0) and small.wait("c", "done", 0)


def test_a_call_whose_predecessor_never_reaches_the_restarted_actor_goes_on(shard, tmp_path):
    """After a shard actor restarts, the call a caller sent before this one may never
    arrive (it failed before the restart and left no record): this call waits a short
    while for it, not the whole write timeout. A predecessor that has arrived is still
    waited for until it is over."""
    import threading
    import time

    from memorybus import Config
    from memorybus.actors.ingest import Ingest

    ingest = Ingest(Config.embedded(tmp_path / "cfg", num_shards=1, write_timeout=120.0))
    ingest.ARRIVAL = 0.3
    t0 = time.monotonic()
    assert ingest.run(shard, lambda s: [], lambda v: "written", order=(U1, "op-2", "op-1")) == "written"
    assert time.monotonic() - t0 < 5.0  # not the 120 s write timeout

    steps: list[str] = []
    ingest.order.reach("op-3", "arrived")  # the predecessor is here, its write not over
    ingest.order.reach("op-3", "decided")
    runner = threading.Thread(
        target=lambda: steps.append(ingest.run(shard, lambda s: [], lambda v: "op-4", order=(U1, "op-4", "op-3")))
    )
    runner.start()
    time.sleep(1.0)  # longer than ARRIVAL: an arrived predecessor is waited for
    assert steps == []
    steps.append("op-3")
    ingest.order.reach("op-3", "done")
    runner.join(30)
    assert steps == ["op-3", "op-4"]


def test_a_flush_lets_recalls_count_while_it_writes_and_keeps_what_it_could_not_store(shard, embedder, clock):
    """The shard actor's timer writes statistics with readers let in (``outside``): an
    access counted during that write waits for the next flush; a write that fails keeps
    its statistics for the next flush; with ``flush_inline`` off a recall never writes."""
    import contextlib

    from memorybus import StoreUnavailable

    (a, b) = put(shard, embedder, U1, ["remember the milk", "call the plumber"])
    records = shard.core.records
    records.flush_inline = False
    qa, qb = embedder.encode(["milk", "plumber"])
    records._last_flush -= 3600  # long overdue: a recall would have written it inline
    shard.search(U1, qa, 1)
    assert shard.store.get(a.id).access_count == 0  # not written by the recall

    @contextlib.contextmanager
    def meanwhile():
        shard.search(U1, qb, 1)  # a recall while the store write runs
        yield

    assert shard.flush(outside=meanwhile) == 1
    assert shard.store.get(a.id).access_count == 1 and shard.store.get(b.id).access_count == 0
    real = shard.store.touch

    def down(*args, **kwargs):
        raise StoreUnavailable("sqlite", "disk gone")

    shard.store.touch = down
    with pytest.raises(StoreUnavailable):
        shard.flush()
    shard.store.touch = real
    assert shard.flush() == 1  # kept, written now
    assert shard.store.get(b.id).access_count == 1
