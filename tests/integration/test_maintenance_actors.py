"""DecayActor and ConsolidationActor across every shard on a local Ray (injected time)."""

import time
import uuid

import pytest
import ray

import memorybus as mb
from memorybus import Config, Context, MemoryKind, MemoryStatus, actors
from memorybus.scopes import Router
from tests.unit.test_maintenance import PARAPHRASES

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]
DAY = 86400.0


@pytest.fixture(scope="module")
def bus(ray_local, tmp_path_factory):
    cfg = Config.embedded(tmp_path_factory.mktemp("maint"), num_shards=2, namespace=f"maint_{uuid.uuid4().hex[:6]}")
    b = mb.connect(cfg)
    yield b
    b.shutdown()


def test_decay_actor_sweeps_every_shard(bus):
    o = f"org{uuid.uuid4().hex[:6]}"
    ctxs = [Context(o, f"u{i}") for i in range(12)]
    then = time.time() - 90 * DAY  # untouched for 90 days
    low = [bus.remember(f"user {i} had toast at breakfast", c, importance=2, created_at=then)
           for i, c in enumerate(ctxs)]
    keep = [bus.remember(f"user {i} is allergic to penicillin", c, importance=9, created_at=then)
            for i, c in enumerate(ctxs)]
    assert len({Router(bus.config.num_shards).shard_for(n.scope.key) for n in low}) == 2
    status = bus.run_decay(Context(o))
    assert status["last_counts"]["archived"] >= 12 and status["runs"] == 1 and not status["errors"]
    for c, n, k in zip(ctxs, low, keep, strict=True):
        assert bus.get(n.id, c).status is MemoryStatus.ARCHIVED
        assert bus.get(k.id, c).status is MemoryStatus.ACTIVE
        assert n.id in {h.node.id for h in bus.recall("breakfast toast", c, k=3, include_archived=True)}
        assert n.id not in {h.node.id for h in bus.recall("breakfast toast", c, k=3)}
    assert bus.maintenance_status()["decay"]["totals"]["archived"] >= 12


@pytest.mark.slow
def test_consolidation_actor_killed_mid_run_then_rerun_yields_one(bus):
    o = f"org{uuid.uuid4().hex[:6]}"
    ctx = Context(o, "u1", "ops")
    bus.remember_many(PARAPHRASES, ctx)
    actor = actors.create_maintenance(bus.config, "consolidation")  # or the running one
    pending = actor.run_once.remote(None, None, bus._credential, pause_before_apply=30.0)
    time.sleep(8.0)  # planned and embedded, waiting to apply
    ray.kill(actor, no_restart=False)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(pending, timeout=60)
    semantic = bus.recall("deploy failed", ctx, k=50, kinds=["semantic"])
    assert semantic == []  # nothing was applied before the crash
    deadline = time.time() + 60
    while True:  # the restarted actor
        try:
            status = bus.run_consolidation(Context(o))
            break
        except mb.Unavailable:  # the actor restarting (ActorUnavailable), or its store
            assert time.time() < deadline
            time.sleep(0.5)
    assert status["last_counts"]["consolidated"] == 1
    again = bus.run_consolidation(Context(o))
    assert again["last_counts"]["consolidated"] == 0
    semantic = bus.recall("why did the production deploy fail?", ctx, k=50, kinds=[MemoryKind.SEMANTIC])
    assert len(semantic) == 1 and len(semantic[0].node.parents) == 20
    parents = semantic[0].node.parents
    assert all(bus.get(p, ctx).status is MemoryStatus.CONSOLIDATED for p in parents)


def test_a_summarizer_named_in_the_config_writes_the_summary(bus):
    """Config.consolidation.summarizer as an import path reaches the consolidation actor."""
    from dataclasses import replace

    from memorybus.actors.maintenance import ConsolidationActor

    o = f"org{uuid.uuid4().hex[:6]}"
    ctx = Context(o, "u1", "ops")
    bus.remember_many(PARAPHRASES, ctx)
    cfg = bus.config.with_(consolidation=replace(bus.config.consolidation, summarizer="tests.hooks:tagged_summary"))
    actor = ray.remote(ConsolidationActor).options(num_cpus=0.01).remote(cfg)
    try:
        status = ray.get(actor.run_once.remote(None, None, bus._credential, scopes=[ctx.scope.key]), timeout=120)
    finally:
        ray.kill(actor)
    assert status["last_counts"]["consolidated"] == 1
    (semantic,) = bus.recall("why did the production deploy fail?", ctx, k=50, kinds=[MemoryKind.SEMANTIC])
    assert semantic.content.startswith(f"Summary of {len(PARAPHRASES)} notes: ")


@pytest.mark.parametrize("hook", ["tests.hooks:broken_summary", "tests.hooks:garbage_summary"])
def test_a_summarizer_that_fails_is_hook_failed_and_applies_nothing(bus, hook):
    """A summarizer that raises TypeError, or returns no text, fails the run with
    HookFailed naming it (not a raw TypeError); no summary is written, no source changes."""
    from dataclasses import replace

    from memorybus.actors.maintenance import ConsolidationActor

    o = f"org{uuid.uuid4().hex[:6]}"
    ctx = Context(o, "u1", "ops")
    sources = bus.remember_many(PARAPHRASES, ctx)
    cfg = bus.config.with_(consolidation=replace(bus.config.consolidation, summarizer=hook))
    actor = ray.remote(ConsolidationActor).options(num_cpus=0.01).remote(cfg)
    try:
        with pytest.raises(mb.HookFailed, match=r"consolidation\.summarizer"):
            ray.get(actor.run_once.remote(None, None, bus._credential, scopes=[ctx.scope.key]), timeout=120)
    finally:
        ray.kill(actor)
    assert bus.recall("why did the production deploy fail?", ctx, k=50, kinds=[MemoryKind.SEMANTIC]) == []
    assert all(bus.get(n.id, ctx).status is MemoryStatus.ACTIVE and bus.get(n.id, ctx).version == 1 for n in sources)


def test_maintenance_is_scoped_to_what_the_caller_manages(bus):
    """run_decay/run_consolidation touch only the scopes the caller manages (its org, or
    its user's scopes), and refuse a ``now`` far in the future (issue 10, item 4)."""
    a, b = f"orgA{uuid.uuid4().hex[:6]}", f"orgB{uuid.uuid4().hex[:6]}"
    then = time.time() - 400 * DAY

    def populate(o):
        stale = {u: bus.remember(f"{u} of {o} had toast long ago", Context(o, u), importance=2, created_at=then)
                 for u in ("u0", "u1", "u2")}
        stale["org"] = bus.remember(f"{o} moved offices long ago", Context(o), importance=2, created_at=then)
        temp = bus.remember(f"{o} scratch note", Context(o, "u0"), kind="working", ttl=0.5)
        return stale, temp

    (a_stale, a_temp), (b_stale, b_temp) = populate(a), populate(b)
    time.sleep(1.0)  # the working memories are past their TTL

    def state(o, stale, temp):
        out = {k: (bus.get(n.id, Context(o, k if k != "org" else "")).status.value) for k, n in stale.items()}
        try:
            bus.get(temp.id, Context(o, "u0"))
            out["temp"] = "present"
        except mb.MemoryNotFound:
            out["temp"] = "gone"
        return out

    fresh = {"u0": "active", "u1": "active", "u2": "active", "org": "active", "temp": "present"}
    with pytest.raises(mb.InvalidRequest):
        bus.run_decay(Context(a), now=time.time() + 10 * 365 * DAY)
    for bad in ("abc", float("nan"), float("inf"), -1.0):
        with pytest.raises(mb.InvalidRequest):
            bus.run_decay(Context(a), now=bad)
    with pytest.raises(mb.InvalidRequest):  # the actor refuses it too, whoever calls it
        ray.get(actors.handle(bus.config, "decay").run_once.remote(time.time() + 10 * 365 * DAY,
                                                                  Context(a, credential=bus._credential)))
    with pytest.raises(mb.InvalidRequest):
        bus.run_decay("not a context")
    assert state(a, a_stale, a_temp) == fresh and state(b, b_stale, b_temp) == fresh

    # a user manages only its own scopes
    status = bus.run_decay(Context(b, "u1"))
    assert status["last_counts"]["archived"] == 1 and status["runs"] == 1
    assert state(b, b_stale, b_temp) == {**fresh, "u1": "archived"}
    # an org manages its whole org, and nothing of another
    status = bus.run_decay(Context(a))
    assert status["last_counts"] == {"scanned": 5, "archived": 4, "expired": 1}
    assert state(a, a_stale, a_temp) == {"u0": "archived", "u1": "archived", "u2": "archived",
                                         "org": "archived", "temp": "gone"}
    assert state(b, b_stale, b_temp) == {**fresh, "u1": "archived"}
    with pytest.raises(mb.ScopeViolation):
        bus.run_consolidation(Context(a, "u1"), scopes=[mb.Scope(b).key])
    with pytest.raises(mb.ScopeViolation):
        bus.run_consolidation(Context(a, "u1"), scopes=[mb.Scope(a).key])  # the org is not the user's
    assert bus.run_consolidation(Context(a, "u1"), scopes=[mb.Scope(a, "u1").key])["runs"] == 1


def test_the_consolidation_actor_has_every_shard_build_its_vector_index_while_it_serves(bus):
    """The HNSW build is a maintenance step (memorybus.shard.indexbuild): through Ray, every
    shard copies its index, a process of its own builds it, the shard swaps it in; recall
    answers before and after, and an agent's credential cannot ask for it."""
    o = f"org{uuid.uuid4().hex[:6]}"
    ctx = Context(o, "u1", "ops")
    bus.remember_many([f"the build note number {i} about the blue pipeline" for i in range(20)], ctx)
    actor = actors.create_maintenance(bus.config, "consolidation")  # or the running one
    with pytest.raises(ray.exceptions.RayTaskError):
        ray.get(actor.build_indexes.remote("not the operator", 0), timeout=60)
    builds = ray.get(actor.build_indexes.remote(bus._credential, 0), timeout=240)
    assert len(builds) == bus.config.num_shards
    assert all(b["built"] and b["reason"] in {"optimized", "unchanged"} for b in builds), builds
    assert bus.maintenance_status()["consolidation"]["index_builds"] == builds
    hits = bus.recall("blue pipeline build note", ctx, k=5)
    assert len(hits) == 5 and all("blue pipeline" in h.node.content for h in hits)
    again = ray.get(actor.build_indexes.remote(bus._credential, 0), timeout=240)
    assert all(not b["built"] and b["reason"] == "not due" for b in again)  # nothing changed since
