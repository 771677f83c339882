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
    from memorybus.config import DecayPolicy

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
    from memorybus.config import ConsolidationPolicy

    return ConsolidationPolicy(min_cluster=1)


def test_an_id_carries_its_scope_and_routes_to_its_scopes_shard():
    from memorybus import Scope, derived_id, new_id
    from memorybus.memory.ids import fits
    from memorybus.scopes import Router

    scopes = [Scope(f"org{i}", f"u{i % 7}", "a" if i % 2 else "", "s" if i % 3 else "") for i in range(300)]
    for n in range(1, 8):
        router = Router(n)
        for s in scopes:
            i = new_id(s)
            assert fits(i, s) and router.shard_for_id(i) == router.shard_for(s.key)
    s = scopes[0]
    assert derived_id(s, "k") == derived_id(s, "k") != derived_id(s, "k2")
    assert fits(derived_id(s, "k"), s) and not fits(derived_id(s, "k"), scopes[1])
    assert MemoryNode(content="x", scope=s).id != MemoryNode(content="x", scope=s).id
    assert fits(MemoryNode(content="x", scope=s).id, s)
    legacy = "9b2f6e4e-7c7e-4c57-9c53-3c1b0e1c2f11"  # a UUID4: written before ids carried buckets
    assert Router(3).shard_for_id(legacy) is None and not fits(legacy, s)


def test_a_shard_refuses_ids_of_other_scopes_and_scopes_routed_elsewhere(tmp_path):
    from memorybus import InvalidMemory, InvalidRequest, new_id
    from memorybus.scopes import Router

    router = Router(2)
    mine = next(Context("acme", f"u{i}") for i in range(100) if router.shard_for(Context("acme", f"u{i}").scope.key) == 0)
    other = next(Context("acme", f"u{i}") for i in range(100) if router.shard_for(Context("acme", f"u{i}").scope.key) == 1)
    s = Shard("shard-0", SqliteStore(tmp_path / "r.sqlite"), EdgeVectorIndex(tmp_path / "v", DIM), dim=DIM,
              clock=ManualClock(), dedupe=False, detect_contradictions=False,
              owns=lambda key: router.shard_for(key) == 0)
    with pytest.raises(InvalidRequest):  # a memory of a scope this shard does not own
        s.put_many(other, [MemoryNode(content="misrouted", scope=other.scope)], vec())
    with pytest.raises(InvalidMemory):  # an id of another scope
        s.put_many(mine, [MemoryNode(content="x", scope=mine.scope, id=new_id(other.scope))], vec())
    with pytest.raises(InvalidMemory):  # an id that carries no scope at all
        s.put_many(mine, [MemoryNode(content="x", scope=mine.scope, id="9b2f6e4e-7c7e-4c57-9c53-3c1b0e1c2f11")], vec())
    assert s.count() == 0 and s.store.count() == 0
    s.close()


def test_a_reused_id_reveals_neither_owner_nor_version(shard):
    """Even a scope of another org built to share the id's routing bucket (so both land on
    one shard) cannot take the id, and learns no version or owner from the refusal."""
    from memorybus import Scope, VersionConflict
    from memorybus.scopes.routing import bucket_of

    secret = shard.put_many(ALICE, [MemoryNode(content="alice secret", scope=ALICE.scope)], vec())[0]
    shard.update(ALICE, secret.id, 1, {"importance": 7.0})  # version 2
    want = bucket_of(ALICE.scope.key)
    twin = next(Context(f"initech{i}", "bob") for i in range(1_000_000)
                if bucket_of(Scope(f"initech{i}", "bob").key) == want)
    with pytest.raises(ScopeViolation) as exc:
        shard.put_many(twin, [MemoryNode(content="bob's", scope=twin.scope, id=secret.id)], vec(1))
    assert "2" not in str(exc.value) and "acme" not in repr(vars(exc.value))
    assert not isinstance(exc.value, VersionConflict)
    with pytest.raises(ScopeViolation):  # the pre-flight check of a cross-shard batch says the same
        shard.check_puts(twin, [MemoryNode(content="bob's", scope=twin.scope, id=secret.id)])
    assert shard.get(ALICE, secret.id).content == "alice secret" and shard.count() == 1
