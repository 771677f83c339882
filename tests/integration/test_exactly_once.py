"""Exactly once under re-execution: every mutating call carries an operation id that
the store records in the same transaction as the call's effect, and a re-execution
(Ray's automatic retry after a shard dies right after its commit, or a client retry
with the same id) answers with the first outcome.

The plain Shard runs over a real SQLite file and a real Redis server; the last test
kills a real shard actor right after its commit is visible in the store.
"""

import sqlite3
import time
import uuid

import pytest
import ray

import memorybus as mb
from memorybus import Context, ManualClock, MemoryKind, MemoryNode, Scope, VersionConflict, actors
from memorybus.shard import Shard
from memorybus.storage.redis import RedisStore
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex
from tests.conftest import backend_config

pytestmark = [pytest.mark.redis, pytest.mark.model]
ALICE = Context("acme", "alice", "planner", "s1")
USER = Scope("acme", "alice")


@pytest.fixture(params=["sqlite", "redis"])
def shard(request, tmp_path, redis_server):
    if request.param == "sqlite":
        store = SqliteStore(tmp_path / "r.sqlite")
    else:
        store = RedisStore(redis_server.url, f"eo{uuid.uuid4().hex[:8]}", "shard-0")
    s = Shard("shard-0", store, EdgeVectorIndex(tmp_path / "v", 384), dim=384,
              clock=ManualClock(1_700_000_000.0))
    yield s
    if request.param == "redis":
        store.clear()
    s.close()


def fact(embedder, content, confidence=0.9, key="user:alice/editor"):
    node = MemoryNode(content=content, scope=USER, key=key, kind=MemoryKind.SEMANTIC, confidence=confidence)
    return node, embedder.encode([content])[0]


def test_reexecuted_assert_fact_answers_created_not_reinforced(shard, embedder):
    node, vec = fact(embedder, "Alice edits in Vim")
    first = shard.assert_fact(ALICE, node, vec, op="op-create")
    again = shard.assert_fact(ALICE, node, vec, op="op-create")  # what Ray's retry sends
    assert first.outcome == again.outcome == "created"
    assert again.node.id == first.node.id and again.node.version == first.node.version
    assert len(shard.history(ALICE, "user:alice/editor", USER)) == 1


def test_reexecuted_rejected_assert_answers_rejected_without_a_conflict(shard, embedder):
    shard.assert_fact(ALICE, *fact(embedder, "Alice edits in Vim", confidence=0.95))
    weak, vec = fact(embedder, "Alice edits in Emacs", confidence=0.2)
    first = shard.assert_fact(ALICE, weak, vec, op="op-weak")
    assert first.outcome == "rejected"
    again = shard.assert_fact(ALICE, weak, vec, op="op-weak")
    assert (again.outcome, again.node.id, again.current) == ("rejected", first.node.id, False)
    assert [e.data["outcome"] for e in shard.history(ALICE, "user:alice/editor", USER)] == ["created", "rejected"]


def test_reexecuted_assert_facts_and_remember_store_once(shard, embedder):
    nodes = [MemoryNode(content=f"key {i} holds value {i}", scope=USER, key=f"k{i}", kind=MemoryKind.SEMANTIC)
             for i in range(5)]
    vecs = embedder.encode([n.content for n in nodes])
    first = shard.assert_facts(ALICE, nodes, vecs, op="op-many")
    again = shard.assert_facts(ALICE, nodes, vecs, op="op-many")
    assert [r.outcome for r in again] == ["created"] * 5 == [r.outcome for r in first]
    assert sum(len(shard.history(ALICE, f"k{i}", USER)) for i in range(5)) == 5
    notes = [MemoryNode(content=f"episode {i} of the plan", scope=USER) for i in range(3)]
    nvecs = embedder.encode([n.content for n in notes])
    stored = shard.put_many(ALICE, notes, nvecs, op="op-notes")
    assert [n.id for n in shard.put_many(ALICE, notes, nvecs, op="op-notes")] == [n.id for n in stored]
    assert shard.store.count() == 8


def test_reexecuted_forget_answers_success(shard, embedder):
    (n,) = shard.put_many(ALICE, [MemoryNode(content="a note to forget", scope=USER)],
                          embedder.encode(["a note to forget"]))
    assert shard.delete(ALICE, n.id, op="op-forget") is True
    assert shard.delete(ALICE, n.id, op="op-forget") is True  # not "gone" after its own success
    assert shard.delete(ALICE, n.id, op="op-other") is False  # a different call: really gone


def test_reexecuted_update_answers_its_first_outcome(shard, embedder):
    (n,) = shard.put_many(ALICE, [MemoryNode(content="Alice likes tea", scope=USER)],
                          embedder.encode(["Alice likes tea"]))
    first = shard.update(ALICE, n.id, 1, {"importance": 9}, op="op-upd")
    again = shard.update(ALICE, n.id, 1, {"importance": 9}, op="op-upd")
    assert first.version == again.version == 2 and again.importance == 9
    shard.update(ALICE, n.id, 2, {"importance": 3}, op="op-upd2")
    assert shard.update(ALICE, n.id, 1, {"importance": 9}, op="op-upd").version == 2  # still the first answer
    assert shard.get(ALICE, n.id).importance == 3


def test_two_writers_with_identical_changes_have_one_winner(shard, embedder):
    (n,) = shard.put_many(ALICE, [MemoryNode(content="The release is on Friday", scope=USER)],
                          embedder.encode(["The release is on Friday"]))
    vec = embedder.encode(["The release is on Monday"])[0]
    won = shard.update(ALICE, n.id, 1, {"content": "The release is on Monday"}, vec)
    assert won.version == 2
    with pytest.raises(VersionConflict) as exc:  # another writer, same change, same expected version
        shard.update(ALICE, n.id, 1, {"content": "The release is on Monday"}, vec)
    assert (exc.value.expected, exc.value.actual) == (1, 2)


def test_an_operation_id_answers_only_its_own_caller(shard, embedder):
    """Another context replaying someone's operation id gets no part of their answer."""
    (n,) = shard.put_many(ALICE, [MemoryNode(content="alice private plan", scope=USER)],
                          embedder.encode(["alice private plan"]), op="shared-op")
    bob = Context("acme", "bob")
    (b,) = shard.put_many(bob, [MemoryNode(content="bob note", scope=bob.scope)], embedder.encode(["bob note"]),
                          op="shared-op")
    assert b.id != n.id and b.content == "bob note"


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["embedded", "redis"])
def test_shard_killed_right_after_commit_reexecutes_without_reinforcing(ray_local, tmp_path, redis_server, backend):
    """Ray re-runs a call whose actor died before replying; the shard answers the re-run
    with the first outcome: every fact "created", one history row each."""
    ns = f"eo_{backend}_{uuid.uuid4().hex[:6]}"
    cfg = backend_config(backend, tmp_path, redis_server, num_shards=1, namespace=ns)
    bus = mb.connect(cfg)
    try:
        ctx = Context("acme", "u1")
        bus.remember("warm up the embedder", ctx)
        n = 400
        items = [{"key": f"k{i}", "content": f"setting {i} is set to value {i * 3}"} for i in range(n)]
        shard = actors.shard_handles(bus.config)[0]

        @ray.remote(num_cpus=0)
        def writer(b):
            return [r.outcome for r in b.assert_facts(items, ctx)]

        if backend == "embedded":
            db = sqlite3.connect(f"file:{tmp_path / 'data' / 'shard-0' / 'records.sqlite'}?mode=ro", uri=True)

            def committed():
                return db.execute("SELECT count(*) FROM fact_events").fetchone()[0]
        else:
            import redis

            r = redis.Redis.from_url(redis_server.url)
            prefix = f"mb:{{{ns}:shard-0}}"

            def committed():
                return r.scard(f"{prefix}:all")

        pending = writer.remote(bus.agent_handle("acme", "u1"))
        deadline = time.time() + 120
        while committed() < n:  # the commit is durable; the actor still indexes before replying
            assert time.time() < deadline
            time.sleep(0.002)
        ray.kill(shard, no_restart=False)
        outcomes = ray.get(pending, timeout=180)
        assert outcomes == ["created"] * n
        assert sum(len(bus.history(f"k{i}", ctx)) for i in range(0, n, 40)) == n // 40
        assert bus.count() == n + 1
    finally:
        bus.shutdown()


def test_reexecuted_decay_sweep_answers_its_first_counts_and_resumes_a_cut_short_one(shard, embedder):
    """A decay sweep commits chunk by chunk; a re-run of a finished sweep answers its
    first counts, and a re-run of one cut short after its first chunk finishes it,
    counting both parts."""
    from memorybus.config import DecayPolicy

    texts = [f"a minor note number {i} about lunch" for i in range(5)]
    shard.put_many(ALICE, [MemoryNode(content=t, scope=USER, importance=1) for t in texts], embedder.encode(texts))
    later = shard.clock.now() + 400 * 86400.0
    first = shard.decay_sweep(later, DecayPolicy(), chunk=2, op="sweep-1")
    assert first["archived"] == 5
    assert shard.decay_sweep(later, DecayPolicy(), chunk=2, op="sweep-1") == first  # not {"archived": 0}
    more = [f"another minor note {i} about coffee" for i in range(5)]
    shard.put_many(ALICE, [MemoryNode(content=t, scope=USER, importance=1) for t in more], embedder.encode(more))
    # sweep-2 commits its first chunk (recorded as operation "sweep-2/0"), then dies
    part = shard.decay_sweep(later, DecayPolicy(), chunk=5, op="sweep-2/0")
    assert part["archived"] == 5
    again = shard.decay_sweep(later, DecayPolicy(), chunk=2, op="sweep-2")  # Ray's re-run of sweep-2
    assert again["archived"] == 5 and again["expired"] == 0
