"""The evidence of keyed facts through erasure and export/import (issue 30): erasing an
agent takes its assertions out of its org's evidence and its learned reliability with
them (another org's untouched); erasing a user drops the evidence of their facts and
the grades learned on them; an export carries every fact's evidence, so after an
import the facts resolve as before. The plain Shard over real SQLite (and Redis) and
Qdrant Edge files, fixed 4-dimensional vectors (no model, no Ray)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from memorybus import Context, ManualClock, MemoryNode, Scope
from memorybus.bus.evidence import KeyEvidence
from memorybus.shard import Shard
from memorybus.shard.erase import Selector
from memorybus.storage.redis import RedisStore
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex
from memorybus.transfer import ExportWriter, read_export

VEC = (np.ones(4) / 2).astype(np.float32)
ACME, GLOBEX = Scope("acme"), Scope("globex")
ALICE = Scope("acme", "alice")
KEY = b"operator-key-0123456789abcdef"
LIAR = "agent:liar"


def ctx(org: str, agent: str) -> Context:
    return Context(org, "alice" if org == "acme" else "zed", agent)


def open_shard(folder, clock, backend="sqlite", ns=None, url=None):
    store = SqliteStore(folder / "r.sqlite") if backend == "sqlite" else RedisStore(url, ns, "shard-0")
    return Shard("shard-0", store, EdgeVectorIndex(folder / "v", 4), dim=4, clock=clock)


def say(shard, org, agent, scope, key, value, confidence, at):
    node = MemoryNode(content=f"{key} is {value}", scope=scope, key=key, confidence=confidence, valid_from=at,
                      source=f"agent:{agent}")  # what the client writes for an agent's context
    return shard.assert_fact(ctx(org, agent), node, VEC)


def populate(shard, t0):
    """Two honest agents and a liar in acme (org facts and one of alice's), the liar and a
    helper agreeing in globex."""
    at = t0
    for k in range(6):
        for agent, value, conf in (("honest1", f"T{k}", 0.8), ("honest2", f"T{k}", 0.8), ("liar", f"W{k}", 0.9)):
            at += 600
            say(shard, "acme", agent, ACME, f"org:k{k}", value, conf, at)
    for agent, value, conf in (("honest1", "Lyon", 0.8), ("honest2", "Lyon", 0.8), ("liar", "Oslo", 0.9)):
        at += 600
        say(shard, "acme", agent, ALICE, "user:alice/city", value, conf, at)
    for agent, value in (("liar", "A"), ("helper", "A")):
        at += 600
        say(shard, "globex", agent, GLOBEX, "org:g", value, 0.8, at)
    return at


def evidence(shard):
    return {(s, k): KeyEvidence.decode(b) for s, k, b in shard.store.all_evidence()}


def heads(shard):
    return {(s, k): shard.store.get(h).content for s, k, h, _ in shard.store.all_slots()}


def learned(shard, org):
    return shard.source_reliability(ctx(org, "honest1"))


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request):
    if request.param == "redis":
        return "redis", f"ev{uuid.uuid4().hex[:6]}", request.getfixturevalue("redis_server").url
    return "sqlite", None, None


def test_erasing_an_agent_takes_its_assertions_and_reliability_out_of_its_orgs_evidence(tmp_path, backend):
    clock = ManualClock(1_700_000_000.0)
    shard = open_shard(tmp_path, clock, *backend)
    populate(shard, clock.now())
    before_heads = heads(shard)
    assert learned(shard, "acme")[LIAR]["disagree"] > 0 and LIAR in learned(shard, "globex")
    counts = shard.erase(Selector.of(org="acme", agent="liar"))
    assert counts["evidence"] == 7  # six org facts and alice's held its claims
    after = evidence(shard)
    for (scope_key, _), ev in after.items():
        liar = [c for c in ev.claims if c.source == LIAR]
        if Scope.from_key(scope_key).org == "acme":
            assert not liar and LIAR not in ev.tally
        else:
            assert liar  # another org's evidence is not this erasure's
    assert heads(shard) == before_heads  # the facts' values are their histories': unchanged
    assert LIAR not in learned(shard, "acme") and "agent:honest1" in learned(shard, "acme")
    assert LIAR in learned(shard, "globex")
    # the table in memory is the one the evidence left gives (a restart would build the same)
    snapshot = learned(shard, "acme")
    shard.close()
    again = open_shard(tmp_path, clock, *backend)
    assert learned(again, "acme") == snapshot
    assert again.erase(Selector.of(org="acme", agent="liar"))["evidence"] == 0  # a second erase: nothing
    again.close()


def test_erasing_a_user_drops_their_facts_evidence_and_the_grades_learned_on_them(tmp_path):
    clock = ManualClock(1_700_000_000.0)
    shard = open_shard(tmp_path, clock)
    populate(shard, clock.now())
    graded = learned(shard, "acme")["agent:honest1"]["agree"]
    shard.erase(Selector.of(org="acme", user="alice"))
    assert not [k for s, k in evidence(shard) if s == ALICE.key]
    snapshot = learned(shard, "acme")
    assert snapshot["agent:honest1"]["agree"] < graded
    shard.close()
    again = open_shard(tmp_path, clock)
    assert learned(again, "acme") == snapshot
    again.close()


def export(shard, path):
    writer = ExportWriter(path, {"namespace": "t", "embedding_dim": 4, "within": None}, key=KEY)
    after = None
    while True:
        blobs, after = shard.export_nodes(None, after, 100)
        for blob in blobs:
            writer.node(blob)
        if after is None:
            break
    position = (None, 0)
    while position is not None:
        events, position = shard.export_events(None, position[0], position[1], 100)
        for scope_key, seq, blob in events:
            writer.event(scope_key, seq, blob)
    for slot in shard.export_slots(None):
        writer.slot(*slot)
    writer.finish()
    return path


def test_export_then_import_carries_the_evidence_so_facts_resolve_as_before(tmp_path, backend):
    clock = ManualClock(1_700_000_000.0)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    source = open_shard(tmp_path / "a", clock)
    at = populate(source, clock.now())
    data = read_export(export(source, tmp_path / "x.mbx"), key=KEY)
    assert len(data.evidence) == len(source.store.all_evidence()) == 8
    target = open_shard(tmp_path / "b", clock, *backend)
    written = target.import_records(data.nodes, [(s, q, b) for s, log in data.events.items() for q, b in log],
                                    data.slots, data.evidence)
    assert written["slots"] == 8
    assert evidence(target) == evidence(source)
    for org in ("acme", "globex"):
        assert learned(target, org) == learned(source, org)
    # the same new assertions resolve the same way on both: the liar, believed less now,
    # loses where a newcomer stating the same would win against one honest report
    for key, value, agent in (("org:k0", "W0", "liar"), ("org:k1", "N1", "newcomer"), ("org:new", "X", "liar")):
        at += 600
        a = say(source, "acme", agent, ACME, key, value, 0.9, at)
        b = say(target, "acme", agent, ACME, key, value, 0.9, at)
        assert (a.outcome, a.current) == (b.outcome, b.current), key
    assert heads(target) == heads(source) and evidence(target) == evidence(source)
    # without the evidence (an export from before it was carried) the import forgets what was learned
    (tmp_path / "c").mkdir()
    bare = open_shard(tmp_path / "c", clock)
    bare.import_records(data.nodes, [(s, q, b) for s, log in data.events.items() for q, b in log], data.slots)
    assert learned(bare, "acme") == {}
    for s in (source, target, bare):
        s.close()
