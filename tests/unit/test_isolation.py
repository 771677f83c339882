"""Isolation between orgs, driven on the plain classes (no Ray): what one org learns
about another's memories, ids and subscriptions."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from memorybus import Context, ManualClock, MemoryNode, ScopeViolation
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

DIM = 8
ALICE = Context("acme", "alice", "planner", "s1")
BOB = Context("initech", "bob", "spy")


@pytest.fixture
def shard(tmp_path):
    s = Shard("shard-0", SqliteStore(tmp_path / "r.sqlite"), EdgeVectorIndex(tmp_path / "v", DIM), dim=DIM,
              clock=ManualClock(), dedupe=False, detect_contradictions=False)
    yield s
    s.close()


def vec(seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(1, DIM)).astype(np.float32)
    return v / np.linalg.norm(v)


def test_scope_violation_says_only_that_access_is_refused(shard):
    secret = shard.put_many(ALICE, [MemoryNode(content="alice secret", scope=ALICE.scope)], vec())[0]
    calls = [
        lambda: shard.get(BOB, secret.id),
        lambda: shard.update(BOB, secret.id, 1, {"importance": 2.0}),
        lambda: shard.delete(BOB, secret.id),
        lambda: shard.broadcast_source(BOB, secret.id, "org"),
    ]
    for call in calls:
        with pytest.raises(ScopeViolation) as exc:
            call()
        err = exc.value
        for shown in (str(err), repr(err), repr(err.args), repr(vars(err)), repr(pickle.loads(pickle.dumps(err)))):
            for private in ("acme", "alice", "planner", "s1"):
                assert private not in shown, shown
        assert "access refused" in str(err)


def test_context_manages_its_own_and_narrower_scopes_only():
    from memorybus import Scope

    org, user = Context("acme"), Context("acme", "alice")
    assert org.manages(Scope("acme")) and org.manages(Scope("acme", "bob", "x", "s"))
    assert user.manages(Scope("acme", "alice")) and user.manages(Scope("acme", "alice", "planner", "s1"))
    assert not user.manages(Scope("acme")) and not user.manages(Scope("acme", "bob"))
    assert not org.manages(Scope("initech")) and not ALICE.manages(Scope("acme", "alice"))


def test_the_shard_sweeps_only_what_the_caller_manages(shard):
    from memorybus.maintenance import DecayPolicy

    old = 1_000.0  # untouched for decades: below any salience threshold
    nodes = {}
    for name, ctx in (("alice", ALICE), ("bob", BOB)):
        nodes[name] = shard.put_many(ctx, [MemoryNode(content=f"{name} old note", scope=ctx.scope, importance=2,
                                                      created_at=old)], vec())[0]
    now = shard.clock.now()
    assert shard.decay_sweep(now, DecayPolicy(), within=Context("acme"))["archived"] == 1
    assert shard.get(ALICE, nodes["alice"].id).status.value == "archived"
    assert shard.get(BOB, nodes["bob"].id).status.value == "active"
    with pytest.raises(ScopeViolation):
        shard.apply_consolidation([nodes["bob"].id], "summary", vec()[0], now, _policy(), within=Context("acme"))
    assert shard.get(BOB, nodes["bob"].id).version == 1


def _policy():
    from memorybus.maintenance import ConsolidationPolicy

    return ConsolidationPolicy(min_cluster=1)
