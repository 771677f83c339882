"""Concurrent single assertions group-committed in the plain Shard (real SQLite, Qdrant
Edge, the real model): every one lands, resolved as one assert_facts of the group
would resolve it, in fewer commits than calls; one call's error is its own."""

import sqlite3
import threading
import time
from dataclasses import replace

import pytest

from memorybus import Context, InvalidMemory, ManualClock, MemoryKind, MemoryNode, Scope, VersionConflict
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

pytestmark = pytest.mark.model
U1 = Context("acme", "u1", "planner", "s1")
USER = Scope("acme", "u1")
VALUES = ["tea", "coffee", "water", "juice"]


def make_shard(path, clock):
    return Shard("shard-0", SqliteStore(path / "r.sqlite"), EdgeVectorIndex(path / "v", 384), dim=384, clock=clock)


@pytest.fixture
def clock():
    return ManualClock(1_700_000_000.0)


def assertions(embedder, clock, n=16):
    """``n`` assertions over 4 keys; values repeat (reinforcements), confidences vary."""
    out = []
    for i in range(n):
        value = VALUES[(i * 3) % 4]
        node = MemoryNode(content=f"u1 drinks {value} at meeting {i % 4}", scope=USER, key=f"user:u1/drink{i % 4}",
                          kind=MemoryKind.SEMANTIC, confidence=0.3 + 0.04 * i, valid_from=clock.now() + i)
        out.append((node, embedder.encode([node.content])[0]))
    return out


def wait_for(test, what, timeout=30.0):
    deadline = time.time() + timeout
    while not test():
        assert time.time() < deadline, what
        time.sleep(0.01)


class Held:
    """SQLite's write lock held by another connection: a commit waits for it (the
    shard lets calls check and queue meanwhile), until :meth:`release`."""

    def __init__(self, shard):
        self.db = sqlite3.connect(shard.store.path, isolation_level=None)
        self.db.execute("BEGIN IMMEDIATE")

    def release(self):
        self.db.execute("ROLLBACK")
        self.db.close()


def run_threads(shard, calls):
    """Each call ``(node, vector, op)`` on a thread of its own; their answers or errors."""
    out = [None] * len(calls)

    def one(i, node, vector, op):
        try:
            out[i] = shard.assert_fact_grouped(U1, node, vector, op=op)
        except Exception as exc:  # the test checks which
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i, *c)) for i, c in enumerate(calls)]
    return threads, out


def queued(shard):
    return shard.fact_groups.queued()[1]


def leading(shard):
    return shard.fact_groups.queued()[0]


def test_concurrent_single_assertions_commit_in_groups_resolved_as_in_order(tmp_path, embedder, clock):
    (tmp_path / "g").mkdir()
    (tmp_path / "s").mkdir()
    shard = make_shard(tmp_path / "g", clock)
    try:
        items = assertions(embedder, clock)
        held = Held(shard)
        threads, out = run_threads(shard, [(n, v, f"op-{i}") for i, (n, v) in enumerate(items)])
        threads[0].start()  # it leads: its commit waits for the lock
        wait_for(lambda: leading(shard) and not queued(shard), "the first call leads")
        for t in threads[1:]:
            t.start()
        wait_for(lambda: len(queued(shard)) == 15, "the others queue behind it")
        order = queued(shard)
        held.release()
        for t in threads:
            t.join(60)
        assert all(not isinstance(r, Exception) and r is not None for r in out), out
        assert shard.fact_groups.counts() == {"calls": 16, "commits": 2}
        assert {r.outcome for r in out} >= {"created", "reinforced"}
        # the same assertions asserted in the same groups, in the same order, by assert_facts
        seq = make_shard(tmp_path / "s", clock)
        try:
            by_id = {n.id: (n, v) for n, v in items}
            expected = seq.assert_facts(U1, [items[0][0]], [items[0][1]])
            expected += seq.assert_facts(U1, [by_id[i][0] for i in order], [by_id[i][1] for i in order])
            got = {r.write_id: r for r in out}
            for e in expected:
                r = got[e.write_id]
                assert (r.outcome, r.current, r.previous, r.fact_seq, r.node.id) == (
                    e.outcome, e.current, e.previous, e.fact_seq, e.node.id)
            for k in range(4):
                key = f"user:u1/drink{k}"
                assert shard.current_fact(U1, key, USER).id == seq.current_fact(U1, key, USER).id
                mine = [(e.data["outcome"], e.data["fact_seq"], e.node.id) for e in shard.history(U1, key, USER)]
                theirs = [(e.data["outcome"], e.data["fact_seq"], e.node.id) for e in seq.history(U1, key, USER)]
                assert mine == theirs and len(mine) == 4
        finally:
            seq.close()
        # each call has its own operation record: a re-execution answers its first outcome
        again = shard.assert_fact_grouped(U1, items[5][0], items[5][1], op="op-5")
        assert (again.outcome, again.fact_seq) == (out[5].outcome, out[5].fact_seq)
        assert shard.store.count() == 16 - sum(r.outcome == "reinforced" for r in out)
    finally:
        shard.close()


def test_one_calls_error_is_its_own(tmp_path, embedder, clock):
    shard = make_shard(tmp_path, clock)
    try:
        items = assertions(embedder, clock, 8)
        first = shard.assert_fact_grouped(U1, *items[0], op="first")
        clash = replace(items[1][0], id=items[0][0].id)  # the id of a stored memory, another record
        held = Held(shard)
        threads, out = run_threads(shard, [items[2] + ("lead",), (clash, items[1][1], None),
                                           items[0] + ("first",)] + [(*c, None) for c in items[3:]])  # fmt: skip
        threads[0].start()
        wait_for(lambda: leading(shard) and not queued(shard), "the first call leads")
        for t in threads[1:]:
            t.start()
        wait_for(lambda: len(queued(shard)) == len(threads) - 1, "the others queue behind it")
        with pytest.raises(InvalidMemory):  # checked before it queues: it waits for nothing
            shard.assert_fact_grouped(U1, replace(items[3][0], key=None), items[3][1])
        held.release()
        for t in threads:
            t.join(60)
        assert isinstance(out[1], VersionConflict)
        assert out[2].outcome == first.outcome == "created" and out[2].node.id == first.node.id  # its record
        rest = [out[0], *out[3:]]
        assert all(not isinstance(r, Exception) for r in rest), rest
        for r in rest:
            assert r.write_id in {e.data["write"] for e in shard.history(U1, r.node.key, USER)}
        assert shard.get(U1, first.node.id).content == items[0][0].content  # the clash changed nothing
        assert [e.data["write"] for e in shard.history(U1, "user:u1/drink1", USER)] == [items[5][0].id]
    finally:
        shard.close()
