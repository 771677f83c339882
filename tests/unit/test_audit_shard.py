"""The audit trail of a plain Shard over a real SQLite file: writes logged in their own
commit, reads buffered until the flush, no content in the log, tampering with the
file caught (by verify and by the ``memorybus audit`` CLI)."""

import dataclasses
import hashlib
import json
import os
import sqlite3

import msgpack
import numpy as np
import pytest

from memorybus import Context, ManualClock, MemoryNode, VersionConflict
from memorybus.audit import decode_checkpoint, decode_entry, encode_entry
from memorybus.audit.read import verify_store
from memorybus.cli import main
from memorybus.config import DecayPolicy
from memorybus.memory.events import Event
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

KEY = b"operator-key-0123456789abcdef"
U1 = Context("acme", "u1", "planner")
U2 = Context("acme", "u2", "coder")
B1 = Context("beta", "b1", "bot")
MARKER = "ZQX-MARKER-7731"
DIM = 8


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "bus"


def open_shard(data_dir, key=KEY):
    path = data_dir / "shard-0"
    return Shard("shard-0", SqliteStore(path / "records.sqlite"), EdgeVectorIndex(path / "vectors", DIM), dim=DIM,
                 clock=ManualClock(), audit_key=key)  # fmt: skip


@pytest.fixture
def shard(data_dir):
    s = open_shard(data_dir)
    yield s
    s.close()


_rng = np.random.default_rng(7)


def put(shard, ctx, *texts, op=None, nodes=None):
    nodes = nodes or [MemoryNode(content=t, scope=ctx.scope) for t in texts]
    return shard.put_many(ctx, nodes, _rng.normal(size=(len(nodes), DIM)).astype(np.float32), op=op)


def chain(shard, org="acme"):
    return [decode_entry(b) for _, b in shard.store.read_audit(org)]


def raw(data_dir):
    return sqlite3.connect(data_dir / "shard-0" / "records.sqlite", isolation_level=None)


def test_a_write_is_logged_in_its_own_commit_and_a_reexecution_is_not_logged_again(shard):
    given = [MemoryNode(content=t, scope=U1.scope) for t in ("first", "second")]
    a, b = put(shard, U1, nodes=given, op="op-1")
    log = chain(shard)  # no flush: the write's entry committed with the write
    assert [(e.seq, e.principal, e.operation, e.ids) for e in log] == [(1, "acme/u1/planner", "put_many",
                                                                       (a.id, b.id))]
    assert len(log[0].hashes) == 2 and all(len(h) == 32 for h in log[0].hashes)
    assert [n.id for n in put(shard, U1, nodes=given, op="op-1")] == [a.id, b.id]  # a re-execution
    assert len(chain(shard)) == 1
    with pytest.raises(VersionConflict):
        shard.update(U1, a.id, 7, {"importance": 9.0})  # refused: nothing committed, nothing logged
    assert len(chain(shard)) == 1
    shard.update(U1, a.id, 1, {"importance": 9.0})
    shard.delete(U1, b.id)
    assert [(e.operation, e.ids) for e in chain(shard)][1:] == [("update", (a.id,)), ("delete", (b.id,))]
    assert chain(shard)[2].hashes == log[0].hashes[1:]  # a delete keeps the hash of what it removed
    events = [Event.decode(blob, seq) for seq, blob in shard.store.read_events(U1.scope.key)]
    assert [e.data["principal"] for e in events] == ["acme/u1/planner"] * 4  # provenance names the writer


def test_reads_are_buffered_until_the_flush_then_chained(shard):
    (a,) = put(shard, U1, "the deploy runs on Thursdays")
    shard.get(U1, a.id)
    hits = shard.search(U1, _rng.normal(size=DIM).astype(np.float32), 5, query="deploy Thursdays")
    assert [h.node.id for h in hits] == [a.id]
    shard.list_memories(U1)
    shard.list_memories(None)  # the operator's view
    assert [e.operation for e in chain(shard)] == ["put_many"]
    shard.flush()
    log = chain(shard)
    assert [e.operation for e in log] == ["put_many", "get", "recall", "list", "list"]
    assert [e.principal for e in log][1:] == ["acme/u1/planner"] * 3 + ["operator"]
    assert all(e.ids == (a.id,) for e in log)
    report = verify_store(shard.store, KEY)
    assert [r.ok for r in report] == [True] and report[0].checkpoints >= 1


def test_each_org_has_its_own_chain_and_maintenance_names_the_system(shard):
    put(shard, U1, "acme memory")
    put(shard, B1, "beta memory")
    shard.flush()
    assert shard.store.audit_orgs() == ["acme", "beta"]
    assert [e.seq for e in chain(shard, "beta")] == [1]
    shard.clock.advance(10**8)
    counts = shard.decay_sweep(shard.clock.now(), DecayPolicy(archive_below=1.0, min_age_days=0))
    assert counts["archived"] == 2
    assert [(e.principal, e.operation) for e in chain(shard, "acme")][-1] == ("system", "decay")
    assert [(e.principal, e.operation) for e in chain(shard, "beta")][-1] == ("system", "decay")
    assert all(r.ok for r in verify_store(shard.store, KEY))


def test_the_log_holds_no_content(shard, data_dir):
    (a,) = put(shard, U1, f"the launch code is {MARKER}")
    shard.update(U1, a.id, 1, {"content": f"now {MARKER} again"}, _rng.normal(size=DIM).astype(np.float32))
    shard.search(U1, _rng.normal(size=DIM).astype(np.float32), 3, query=MARKER)
    shard.flush()
    with raw(data_dir) as db:
        rows = db.execute("SELECT blob FROM audit UNION ALL SELECT blob FROM audit_checkpoints").fetchall()
        heads = db.execute("SELECT org, hash FROM audit_heads").fetchall()
    assert len(rows) >= 4
    assert sum(MARKER.encode() in bytes(r[0]) for r in rows) == 0
    assert all(MARKER not in f"{o}{h}" for o, h in heads)


def _tamper(data_dir, how):
    with raw(data_dir) as db:
        rows = db.execute("SELECT seq, blob FROM audit WHERE org='acme' ORDER BY seq").fetchall()
        assert len(rows) == 6
        if how == "delete":
            db.execute("DELETE FROM audit WHERE org='acme' AND seq=3")
        elif how == "edit":
            body, digest = msgpack.unpackb(rows[3][1], raw=False)
            fields = msgpack.unpackb(body, raw=False)
            fields[6] = ["00000000-0000-0000-0000-000000000000"]  # the ids
            blob = msgpack.packb([msgpack.packb(fields, use_bin_type=True), digest], use_bin_type=True)
            db.execute("UPDATE audit SET blob=? WHERE org='acme' AND seq=4", (blob,))
        elif how == "reorder":
            db.execute("UPDATE audit SET blob=? WHERE org='acme' AND seq=2", (rows[4][1],))
            db.execute("UPDATE audit SET blob=? WHERE org='acme' AND seq=5", (rows[1][1],))
        elif how == "truncate":
            db.execute("DELETE FROM audit WHERE org='acme' AND seq>4")
            db.execute("UPDATE audit_heads SET seq=4, hash=? WHERE org='acme'", (decode_entry(rows[3][1]).hash,))
        elif how == "rehash":  # edit, then recompute the entry's own hash: its successor's link breaks
            forged = dataclasses.replace(decode_entry(rows[2][1]), principal="acme/u9/intruder")
            forged = dataclasses.replace(forged, hash=hashlib.sha256(forged.body()).hexdigest())
            db.execute("UPDATE audit SET blob=? WHERE org='acme' AND seq=3", (encode_entry(forged),))


@pytest.mark.parametrize(("how", "seq", "reason"), [
    ("delete", 3, "removed"), ("edit", 4, "edited"), ("reorder", 2, "reordered"), ("truncate", 5, "truncated"),
    ("rehash", 3, "edited"),
])  # fmt: skip
def test_tampering_with_the_file_is_caught_and_the_cli_exits_1(data_dir, how, seq, reason, capsys):
    shard = open_shard(data_dir)
    try:
        for i in range(6):
            put(shard, U1 if i % 2 else U2, f"memory {i}")
        shard.flush()  # signs the head: seq 6
    finally:
        shard.close()
    args = ["audit", "verify", "--data-dir", str(data_dir)]
    key_file = data_dir / "key"
    key_file.write_bytes(KEY)
    assert main([*args, "--key-file", str(key_file)]) == 0
    assert "all 1 chains intact" in capsys.readouterr().err
    _tamper(data_dir, how)
    store = SqliteStore(data_dir / "shard-0" / "records.sqlite")
    try:
        (report,) = verify_store(store, KEY)
        assert [decode_checkpoint(b).seq for b in store.checkpoints("acme")] == [6]
    finally:
        store.close()
    assert (report.ok, report.bad_seq, report.reason) == (False, seq, reason), report
    assert main([*args, "--key-file", str(key_file), "--json"]) == 1
    out = json.loads(capsys.readouterr().out.splitlines()[0])
    assert (out["shard"], out["org"], out["bad_seq"], out["reason"]) == ("shard-0", "acme", seq, reason)
    assert main(args) == 1  # without the key too: the checkpoint's seq and hash are still compared


def test_the_cli_exports_json_lines_and_refuses_bad_input(shard, data_dir, capsys, tmp_path):
    put(shard, U1, "one")
    put(shard, U2, "two")
    shard.flush()
    out = tmp_path / "audit.jsonl"
    assert main(["audit", "export", "--data-dir", str(data_dir), "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(x["seq"], x["principal"]) for x in lines] == [(1, "acme/u1/planner"), (2, "acme/u2/coder")]
    capsys.readouterr()
    assert main(["audit", "export", "--data-dir", str(data_dir), "--principal", "acme/u2/coder"]) == 0
    assert [json.loads(x)["seq"] for x in capsys.readouterr().out.splitlines()] == [2]
    assert main(["audit", "verify", "--data-dir", str(tmp_path / "nothing")]) == 2
    short = tmp_path / "short"
    short.write_bytes(b"abc")
    assert main(["audit", "verify", "--data-dir", str(data_dir), "--key-file", str(short)]) == 2
    assert os.path.exists(data_dir / "shard-0" / "records.sqlite")


def test_read_entries_a_busy_store_refused_are_kept_for_the_next_flush(shard):
    (a,) = put(shard, U1, "x")
    shard.get(U1, a.id)
    with shard.store._lock:  # another write holds the store: a timer flush gives up, keeps them
        import threading

        t = threading.Thread(target=lambda: shard.core.flush(wait=False))
        t.start()
        t.join()
    assert [e.operation for e in chain(shard)] == ["put_many"]
    shard.flush()
    assert [e.operation for e in chain(shard)] == ["put_many", "get"]


def test_checkpoints_are_signed_at_most_once_a_period_and_on_close(data_dir):
    shard = open_shard(data_dir)
    shard._audit.checkpoint_seconds = 3600.0
    put(shard, U1, "one")
    shard.flush()
    put(shard, U1, "two")
    shard.flush()  # within the period: not signed again
    assert [decode_checkpoint(b).seq for b in shard.store.checkpoints("acme")] == [1]
    assert not shard.touches_due()
    shard.close()  # signs the head as it is
    store = SqliteStore(data_dir / "shard-0" / "records.sqlite")
    try:
        assert [decode_checkpoint(b).seq for b in store.checkpoints("acme")] == [1, 2]
        assert all(r.ok for r in verify_store(store, KEY))
    finally:
        store.close()
