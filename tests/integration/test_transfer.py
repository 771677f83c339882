"""Export and import (issue 14): a round trip into the other backend keeps ids, versions,
access counts, histories and facts; a corrupted, truncated, foreign or conflicting file
is refused whole with nothing written; the operator commands (ls, show, stats, export,
import, top) work on a running bus."""

from __future__ import annotations

import json
import os
import uuid

import pytest

import memorybus as mb
from memorybus import Config, Context, Scope
from memorybus.cli import main as cli
from memorybus.memory.codec import NODE, encode, encode_node, node_to_dict
from memorybus.memory.model import evolve as replace
from memorybus.transfer import ExportWriter, read_export

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.redis, pytest.mark.timeout(300)]
ALL = ["active", "consolidated", "deprecated", "archived"]
SMALL = {"embedder_num_cpus": 0.4}  # two buses at a time share the two CPUs of the test Ray
KEY = "user:u1/backend_language"
SEAL = b"operator-export-key-0123456789"  # the operator's export key


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("transfer")


@pytest.fixture(scope="module")
def source(ray_local, folder):
    """An embedded bus with a bit of everything: episodes, a fact with a history,
    an update, a broadcast, accesses and a forgotten memory."""
    with mb.connect(Config.embedded(folder / "src", num_shards=2, namespace="tr_src", touch_flush_seconds=0.0, **SMALL)) as bus:
        org = f"org{uuid.uuid4().hex[:6]}"
        ctx = Context(org, "u1", "planner", "s1")
        bus.remember_many(["Lunch was a burrito", "The deploy went fine", "Ticket 42 was closed"], ctx)
        bus.assert_fact(KEY, "User writes Python", ctx, scope="user", confidence=0.6)
        bus.assert_fact(KEY, "User switched to Rust", ctx, scope="user", confidence=0.9)
        bus.assert_fact(KEY, "User writes Python", ctx, scope="user", confidence=0.3)  # rejected
        bus.assert_fact(KEY, "User switched to Rust", ctx, scope="user")  # reinforced
        node = bus.remember("Customer data stays in the EU region", ctx, importance=9)
        bus.update(node.id, ctx, expected_version=1, importance=10)
        bus.broadcast(node.id, "org", ctx)
        bus.recall("where is customer data kept?", ctx, k=3)  # access counts
        gone = bus.remember("A memory that will be forgotten", ctx)
        bus.forget(gone.id, ctx)
        Context(org, "u2", "writer")  # another user, another scope
        bus.remember("The other user likes tea", Context(org, "u2", "writer"))
        bus.flush()
        yield bus, ctx


def everything(bus):
    nodes = bus.list_memories(None, statuses=ALL, limit=1000).memories
    return {n.id: node_to_dict(n, with_embedding=False) for n in nodes}


def exported(path):
    data = read_export(path, key=SEAL)
    nodes = {n.id: node_to_dict(n) for n in data.nodes}
    return nodes, data.events, sorted(data.slots)


def test_round_trip_into_redis_and_back_keeps_everything(source, folder, redis_server):
    bus, ctx = source
    first = folder / "all.mbx"
    counts = bus.export(first, key=SEAL)
    assert counts["nodes"] == len(everything(bus)) == 9 and counts["slots"] == 1
    redis_cfg = Config.redis(redis_server.url, data_dir=str(folder / "r"), num_shards=3, namespace=f"tr_redis_{uuid.uuid4().hex[:8]}", **SMALL)
    with mb.connect(redis_cfg) as target:
        assert target.import_(first, key=SEAL) == counts
        assert everything(target) == everything(bus)  # ids, versions, access counts, every field
        assert [(e.kind, e.data, e.node.content) for e in target.history(KEY, ctx, scope="user")] == [
            (e.kind, e.data, e.node.content) for e in bus.history(KEY, ctx, scope="user")
        ]
        assert target.current_fact(KEY, ctx, scope="user").content == "User switched to Rust"
        hit = target.recall("where is customer data kept?", ctx, k=1, options=mb.RecallOptions(touch=False))[0]
        assert hit.node.content.startswith("Customer data")
        assert target.import_(first, key=SEAL) == {"nodes": 0, "events": 0, "slots": 0}  # rerun: nothing new
        second = folder / "from-redis.mbx"
        target.export(second, key=SEAL)
    # and back into a fresh embedded store: the same records, events and fact heads
    with mb.connect(Config.embedded(folder / "back", num_shards=1, namespace="tr_back", **SMALL)) as back:
        back.import_(second, key=SEAL)
        assert everything(back) == everything(bus)
    assert exported(second) == exported(first)


def test_export_of_one_scope_holds_that_scope_and_the_ones_inside(source, folder):
    bus, ctx = source
    path = folder / "u1.mbx"
    bus.export(path, within=Scope(ctx.org, "u1"))  # unsealed: read as trusted
    data = read_export(path, trusted=True)
    assert data.nodes and all(n.scope.user == "u1" for n in data.nodes)
    assert {n.content for n in data.nodes} >= {"Lunch was a burrito", "User switched to Rust"}
    assert "The other user likes tea" not in {n.content for n in data.nodes}
    assert all(Scope.from_key(k).user == "u1" for k in data.events)


def _stored_state(bus):
    return everything(bus), bus.stats()["events"], bus.stats()["facts"]


def test_a_bad_or_conflicting_file_is_refused_and_nothing_is_written(source, folder):
    bus, ctx = source
    good = folder / "good.mbx"
    bus.export(good, key=SEAL)
    blob = good.read_bytes()
    corrupted = folder / "corrupted.mbx"
    corrupted.write_bytes(blob[: len(blob) // 2] + bytes([blob[len(blob) // 2] ^ 0xFF]) + blob[len(blob) // 2 + 1 :])
    truncated = folder / "truncated.mbx"
    truncated.write_bytes(blob[: len(blob) - 40])
    foreign = folder / "foreign.json"
    foreign.write_text(json.dumps({"memories": []}))
    with mb.connect(Config.embedded(folder / "victim", num_shards=2, namespace="tr_victim", **SMALL)) as victim:
        victim.remember("Already here", Context(ctx.org, "u9"))
        before = _stored_state(victim)
        for path, reason in ((corrupted, "seal does not match|corrupted|unreadable|invalid record"), (truncated, "truncated|unreadable"),
                             (foreign, "not a memorybus export|unreadable")):
            with pytest.raises(mb.InvalidRequest, match=reason):
                victim.import_(path, key=SEAL)
            assert _stored_state(victim) == before
        # a memory of the file exists here with another version: the whole file is refused
        victim.import_(good, key=SEAL)
        node = next(n for n in victim.list_memories(None, limit=100).memories if n.content == "Lunch was a burrito")
        victim.update(node.id, ctx, expected_version=node.version, importance=2)
        changed = _stored_state(victim)
        with pytest.raises(mb.InvalidRequest, match="another content or version"):
            victim.import_(good, key=SEAL)
        assert _stored_state(victim) == changed
    with pytest.raises(mb.InvalidRequest, match="384-dimensional embedding, this bus uses 512"):
        read_export(good, dim=512, key=SEAL)


def _rewrite(path, data, *, key=None, nodes=None, slots=None):
    """``data`` written again as someone without the export key can: edited, digested
    again, unsealed (or sealed with their own key)."""
    header = {k: v for k, v in data.header.items() if k not in ("format", "version", "created_at", "seal")}
    writer = ExportWriter(path, header, key=key)
    for node in data.nodes if nodes is None else nodes:
        writer.node(node if isinstance(node, bytes) else encode_node(node))
    for scope_key, log in data.events.items():
        for seq, blob in log:
            writer.event(scope_key, seq, blob)
    for slot in data.slots if slots is None else slots:
        writer.slot(*slot)
    writer.finish()
    return path


def test_an_import_trusts_nothing_in_the_file(source, folder):
    """Issue 27: an edited file re-digested, a file sealed with another key, a fact head
    in one user's scope naming another user's memory, and an empty id are refused whole
    with nothing written; importing the good file twice writes it once."""
    bus, ctx = source
    good = folder / "sealed.mbx"
    counts = bus.export(good, key=SEAL)
    data = read_export(good, key=SEAL)
    fact = next(n for n in data.nodes if n.key == KEY and n.content == "User switched to Rust")
    u2 = Scope(ctx.org, "u2")
    edited = _rewrite(folder / "edited.mbx", data,
                      nodes=[replace(n, content="Customer data may leave the EU") if n.importance == 10 else n
                             for n in data.nodes])  # fmt: skip
    other_key = _rewrite(folder / "other-key.mbx", data, key=b"someone-elses-key-0123456789")
    foreign = _rewrite(folder / "foreign-slot.mbx", data, slots=[*data.slots, (u2.key, KEY, fact.id, 1)])
    empty = _rewrite(folder / "empty-id.mbx", data,
                     nodes=[*data.nodes, encode(NODE, dict(node_to_dict(data.nodes[0]), id=""))])  # fmt: skip
    with mb.connect(Config.embedded(folder / "trust", num_shards=2, namespace="tr_trust", **SMALL)) as victim:
        victim.remember("Already here", Context(ctx.org, "u9"))
        before = _stored_state(victim)
        refusals = [
            (edited, {"key": SEAL}, "not sealed"),  # re-digested without the key: the seal is gone
            (other_key, {"key": SEAL}, "does not match this key"),
            (good, {"key": b"a-wrong-key-0123456789abcdef"}, "does not match this key"),
            (good, {}, "does not match this key"),  # no key: the victim bus's own export key
            (foreign, {"trusted": True}, "its head"),  # refused even from a file the caller vouches for
            (empty, {"trusted": True}, "non-empty id"),
        ]
        for path, how, reason in refusals:
            with pytest.raises(mb.InvalidRequest, match=reason):
                victim.import_(path, **how)
            assert _stored_state(victim) == before, path
        assert victim.current_fact(KEY, Context(ctx.org, "u2"), scope="user") is None
        assert victim.import_(good, key=SEAL) == counts
        once = _stored_state(victim)
        for _ in range(2):
            assert victim.import_(good, key=SEAL) == {"nodes": 0, "events": 0, "slots": 0}
            assert _stored_state(victim) == once
        assert set(everything(bus)) <= set(once[0]) and len(once[0]) == len(before[0]) + counts["nodes"]
    with pytest.raises(mb.InvalidRequest, match="at least 16"):
        bus.export(folder / "weak.mbx", key=b"short")


def test_operator_commands_on_a_running_bus(source, folder, capsys):
    bus, ctx = source
    flags = ["--data-dir", str(folder / "src"), "--namespace", "tr_src", "--shards", "2"]
    assert cli(["ls", *flags, "--org", ctx.org, "--user", "u1", "--kind", "semantic", "--status", "all"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and all(" semantic " in line for line in out)  # the fact: created, superseded, rejected
    assert cli(["ls", *flags, "--json", "--key-prefix", "user:u1/", "--since", "1d", "--limit", "1", "--all"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["content"] for r in rows] == ["User switched to Rust"]  # active only, by default
    fact = bus.current_fact(KEY, ctx, scope="user")
    assert cli(["show", fact.id, *flags]) == 0
    shown = capsys.readouterr().out
    assert "asserted" in shown and "outcome=reinforced" in shown and "contradicts" in shown
    assert cli(["stats", *flags, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["memories"] == 9 and len(stats["shards"]) == 2
    path = folder / "cli.mbx"
    assert cli(["export", str(path), *flags, "--org", ctx.org, "--user", "u2"]) == 0
    assert [n.content for n in read_export(path, trusted=True).nodes] == ["The other user likes tea"]
    assert cli(["top", *flags, "--iterations", "1"]) == 0
    assert "memories" in capsys.readouterr().out
    # a bad file never reaches a bus; the bus is still running afterwards
    bad = folder / "bad.mbx"
    bad.write_bytes(b"\x93not an export")
    assert cli(["import", str(bad), *flags, "--trusted"]) == 2
    assert "nothing was imported" in capsys.readouterr().err
    assert bus.count() == 9 and os.path.exists(path)
