"""The bus through the public API on a local Ray: keyed facts under 16 concurrent
writers, subscriptions that survive a subscriber's restart, broadcast, as-of recall."""

import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import pytest
import ray

import memorybus as mb
from memorybus import Config, Context, Inbox, Scope, actors
from memorybus.bus.conflicts import Strategy, resolve
from memorybus.bus.routing import partition_of
from memorybus.scopes import Router

pytestmark = [pytest.mark.ray, pytest.mark.redis, pytest.mark.model, pytest.mark.timeout(300)]
DAY = 86400.0
WEEK = 7 * DAY


@pytest.fixture(scope="module", params=["embedded", "redis"])
def bus(request, ray_local, tmp_path_factory, redis_server):
    ns = f"bus_{request.param}_{uuid.uuid4().hex[:6]}"
    data = tmp_path_factory.mktemp("bus")
    if request.param == "embedded":
        cfg = Config.embedded(data, num_shards=2, namespace=ns)
    else:
        cfg = Config.redis(redis_server.url, data_dir=str(data), num_shards=2, namespace=ns)
    b = mb.connect(cfg)
    yield b
    b.shutdown()


def org():
    return f"org{uuid.uuid4().hex[:8]}"


#: assertions per writer: 16 x 40 interleave on one key as densely as 16 x 200 did (every
#: writer's calls overlap the others' from first to last; the test checks they interleave)
PER_WRITER = 40


def test_sixteen_concurrent_writers_lose_no_update(bus):
    o = org()
    key = "team/deploy_target"
    values = [f"The team deploys to {x}" for x in ("AWS", "GCP", "Azure", "bare metal", "Fly", "Hetzner")]

    def writer(b, w):
        ctx = Context(o, agent=f"writer{w}")
        out = []
        for i in range(PER_WRITER):
            r = b.assert_fact(key, values[(w + i) % len(values)], ctx, scope="org",
                              confidence=0.3 + 0.07 * ((w * 13 + i) % 10), valid_from=1_700_000_000 + i,
                              strategy="confidence_weighted")
            out.append(r.write_id)
        return out

    # 16 threads, each with its own handle and credential, each call its own Ray call: the
    # shard sees 16 callers at once as it would 16 processes' (a Ray task each cost 16 worker
    # processes' start here and no more concurrency at the shard)
    writers = [bus.agent_handle(o, agent=f"writer{w}") for w in range(16)]
    with ThreadPoolExecutor(16) as pool:
        writes = [i for ws in pool.map(writer, writers, range(16), timeout=240) for i in ws]
    total = 16 * PER_WRITER
    assert len(writes) == total and len(set(writes)) == total
    reader = Context(o)
    hist = bus.history(key, reader, scope="org")
    assert len(hist) == total
    assert sorted(e.data["write"] for e in hist) == sorted(writes)  # each write exactly once
    assert [e.data["fact_seq"] for e in hist] == list(range(1, total + 1))
    # the writers overlapped: their assertions interleave in the fact's history (one
    # writer after another would change writer 15 times)
    sources = [e.node.source for e in hist]
    assert len(set(sources)) == 16
    switches = sum(a != b for a, b in pairwise(sources))
    assert switches >= total // 4, switches
    # the current value is the one the strategy selects, replaying the history in order
    current = None
    for e in hist:
        if e.data["outcome"] == "reinforced":
            assert current.content == e.node.content
            current = e.node  # a reinforcement may raise the current value's confidence
            continue
        wins = resolve(current, e.node, Strategy.CONFIDENCE_WEIGHTED).new_wins
        assert wins == (e.data["outcome"] in ("created", "superseded"))
        current = e.node if wins else current
    assert bus.current_fact(key, reader, scope="org").id == current.id


def test_superseded_fact_and_as_of_recall(bus):
    o = org()
    ctx = Context(o, "u1", "assistant")
    t0 = time.time() - 30 * DAY
    key = "user:u1/backend_language"
    bus.assert_fact(key, "User writes Python", ctx, scope="user", valid_from=t0 + WEEK, confidence=0.9)
    bus.assert_fact(key, "User switched to Rust", ctx, scope="user", valid_from=t0 + 3 * WEEK, confidence=0.9)
    now_hits = bus.recall("which programming language does the user write?", ctx, k=5)
    assert [h.node.content for h in now_hits] == ["User switched to Rust"]
    then = bus.recall("which programming language does the user write?", ctx, k=5, as_of=t0 + 2 * WEEK)
    assert [h.node.content for h in then] == ["User writes Python"]
    hist = bus.history(key, ctx, scope="user")
    assert [e.node.content for e in hist] == ["User writes Python", "User switched to Rust"]
    assert bus.current_fact(key, ctx, scope="user").content == "User switched to Rust"
    # the superseded version is still there for whoever asks for it (no relevance floor:
    # "programming language" names neither value, so only the floor could hide one)
    both = bus.recall("programming language", ctx, k=5, include_deprecated=True, min_relevance=0.0)
    assert sorted(h.node.content for h in both) == ["User switched to Rust", "User writes Python"]
    assert [h.node.content for h in bus.recall("programming language", ctx, k=5, min_relevance=0.0)] == [
        "User switched to Rust"
    ]


def test_broadcast_is_owned_and_idempotent(bus):
    o = org()
    owner = Context(o, "u1", "researcher")
    note = bus.remember("The staging database runs on port 5433", owner, confidence=0.8)
    copy = bus.broadcast(note.id, "org", owner)
    again = bus.broadcast(note.id, "org", owner)
    assert copy.id == again.id and copy.scope == Scope(o)
    assert copy.parents == (note.id,) and copy.confidence == pytest.approx(0.72)
    assert copy.source == "broadcast:researcher"
    colleague = Context(o, "u2", "planner")
    hits = bus.recall("staging database port", colleague, k=3)
    assert hits[0].node.id == copy.id
    with pytest.raises(mb.InvalidRequest):
        bus.broadcast(copy.id, "org", colleague)  # already org-wide: nothing to widen
    with pytest.raises(mb.ScopeViolation):
        bus.broadcast(note.id, "org", colleague)  # cannot even see it


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
class Listener:
    def __init__(self, bus, name, ctx):
        self.inbox = Inbox(bus.subscription_cursors(name, ctx))
        self.got = []

    def on_events(self, batch):
        for e in self.inbox.accept(batch):
            self.got.append((e.scope_key, e.seq, e.kind.value, e.node.content))

    def received(self):
        return list(self.got)

    def pid(self):
        import os

        return os.getpid()


def _process_alive(pid):
    try:
        os.kill(pid, 0)  # a local Ray here: the actor's process is on this machine
    except ProcessLookupError:
        return False
    return True


def _wait(fn, timeout=120.0):  # generous: an actor restart on a loaded 2-core machine is slow
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if fn():
                return
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError):
            pass
        time.sleep(0.2)
    raise AssertionError("timed out")


def _subscribed_listener(bus, ctx, prefix):
    """A Listener actor acting as ``ctx``'s agent, subscribed as ``ctx`` under a fresh name."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    listener = Listener.remote(bus.agent_handle(ctx.org, ctx.user, ctx.agent), name, ctx)
    bus.subscribe(ctx, target=listener, name=name)
    return listener, name


@pytest.mark.slow
def test_subscriber_restarted_gets_every_missed_event_once_in_order(bus):
    o = org()
    ctx = Context(o, "u1", "listener")
    writer = Context(o, "u1", "writer")
    listener, name = _subscribed_listener(bus, ctx, "listener")
    for i in range(20):
        bus.remember(f"org update number {i}", writer, scope="org")
    _wait(lambda: len(ray.get(listener.received.remote(), timeout=10)) == 20)
    _wait(lambda: bus.subscription_cursors(name, ctx).get(Scope(o)) == 20)  # keyed by Scope
    before = ray.get(listener.received.remote(), timeout=10)
    old_pid = ray.get(listener.pid.remote(), timeout=10)
    ray.kill(listener, no_restart=False)
    # ray.kill returns before the process is gone: an event delivered to the dying process
    # in between is acknowledged by it and lost with it (it was the subscriber's), so the
    # writes below wait until the old process is really down
    _wait(lambda: not _process_alive(old_pid))
    for i in range(20, 50):  # written while the subscriber is down or restarting
        bus.remember(f"org update number {i}", writer, scope="org")
    _wait(lambda: ray.get(listener.pid.remote(), timeout=10) != old_pid)
    _wait(lambda: len(ray.get(listener.received.remote(), timeout=10)) >= 30)
    time.sleep(0.5)
    after = ray.get(listener.received.remote(), timeout=10)
    everything = before + after
    assert [c for _, _, _, c in everything] == [f"org update number {i}" for i in range(50)]
    assert [s for _, s, _, _ in everything] == list(range(1, 51))  # in order, none twice
    ray.kill(listener)


def test_events_never_reach_a_subscriber_that_cannot_see_them(bus):
    o = org()
    u1 = Context(o, "u1", "a")
    u2 = Context(o, "u2", "b")
    spy, _ = _subscribed_listener(bus, u2, "spy")
    got_cb = []
    sub = bus.subscribe(u2, callback=got_cb.extend)
    for i in range(5):
        bus.remember(f"u1 private {i}", u1, scope="user")
        bus.remember(f"u1 session {i}", u1)
        bus.update(bus.remember(f"u1 agent note {i}", u1, scope="agent").id, u1, expected_version=1, importance=9)
    bus.remember("shared org notice", u1, scope="org")
    _wait(lambda: len(ray.get(spy.received.remote(), timeout=10)) >= 1 and len(got_cb) >= 1)
    time.sleep(1.0)
    seen = [c for _, _, _, c in ray.get(spy.received.remote(), timeout=10)]
    assert seen == ["shared org notice"]
    assert [e.node.content for e in got_cb] == ["shared org notice"]
    sub.stop()
    ray.kill(spy)


def test_same_subscription_name_in_two_orgs_stays_apart(bus):
    """Org A and org B both subscribe as "planner-feed": each receives its own events only,
    and no call of B reads, lists or deletes A's subscription (issue 10, item 1)."""
    alice, bob = Context(org(), "alice", "planner"), Context(org(), "bob", "spy")
    got = {"a": [], "b": []}
    a_sub = bus.subscribe(alice, callback=got["a"].extend, name="planner-feed")
    b_sub = bus.subscribe(bob, callback=got["b"].extend, name="planner-feed")
    for i in range(7):
        bus.remember(f"alice plan step {i}", alice, scope="user")
    for i in range(3):
        bus.remember(f"bob secret {i}: acquisition target is Initech {i}", bob, scope="user")
    _wait(lambda: len(got["a"]) >= 7 and len(got["b"]) >= 3, 60)
    time.sleep(0.5)
    assert [e.node.content for e in got["a"]] == [f"alice plan step {i}" for i in range(7)]
    assert [e.node.content for e in got["b"]] == [f"bob secret {i}: acquisition target is Initech {i}" for i in range(3)]
    assert not any(k.org == alice.org for k in bus.subscription_cursors("planner-feed", bob))
    assert bus.subscription_cursors("planner-feed", alice).get(Scope(alice.org, "alice")) == 7
    assert alice.org not in repr(bus.bus_stats(bob)) and alice.org not in repr(bus.bus_stats(Context(bob.org)))
    b_sub.stop()
    assert bus.unsubscribe("planner-feed", bob) is True
    bus.remember("alice plan step 7", alice, scope="user")
    _wait(lambda: len(got["a"]) == 8, 60)
    assert list(bus.bus_stats(alice)["subscriptions"]) == ["planner-feed"]
    a_sub.stop(unsubscribe=True)


def test_a_failing_callback_is_retried_recorded_and_surfaced(bus):
    """An exception in a callback never ends a subscription silently (issue 10, item 12)."""
    from dataclasses import replace


    quick = mb.MemoryBus(bus.config.with_(bus=replace(bus.config.bus, callback_retries=2,
                                                      callback_backoff_seconds=0.05))).as_agent(bus._credential)
    ctx = Context(org(), "u1", "agent")
    got, calls = [], []

    def flaky(batch):
        calls.append(len(batch))
        if len(calls) <= 2:
            raise RuntimeError(f"transient failure {len(calls)}")
        got.extend(batch)

    sub = quick.subscribe(ctx, callback=flaky, name="flaky")
    for i in range(4):
        quick.remember(f"step {i}", ctx)
    _wait(lambda: len(got) >= 4)  # the default: a loaded 2-core machine is slow
    assert [e.node.content for e in Inbox().accept(got)] == [f"step {i}" for i in range(4)]
    assert [str(e) for e in sub.errors] == ["transient failure 1", "transient failure 2"]
    assert sub.alive and sub.failed is None
    sub.stop()

    def broken(batch):
        raise ValueError("bug in the handler")

    dead = quick.subscribe(ctx, callback=broken, name="broken")
    quick.remember("the event the handler cannot take", ctx)
    _wait(lambda: not dead.alive)
    assert len(dead.errors) == 3 and isinstance(dead.failed, ValueError)
    with pytest.raises(mb.DeliveryFailed) as exc:
        dead.check()
    assert "bug in the handler" in str(exc.value)
    fixed = []
    again = quick.subscribe(ctx, callback=fixed.extend, name="broken")  # resumes: nothing was acknowledged
    _wait(lambda: len(fixed) >= 1, 60)
    assert fixed[0].node.content == "the event the handler cannot take"
    again.stop(unsubscribe=True)
    quick.unsubscribe("flaky", ctx)


@ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)
class GatedListener:
    """Holds its first batch until released (an async actor: release runs meanwhile)."""

    def __init__(self):
        import asyncio

        self.gate = asyncio.Event()
        self.got = []
        self.calls = 0

    async def on_events(self, batch):
        self.calls += 1
        if self.calls == 1:
            await self.gate.wait()
        self.got.extend((e.scope_key, e.seq, e.node.content) for e in batch)

    async def release(self):
        self.gate.set()

    async def received(self):
        return list(self.got)

    async def calls_made(self):
        return self.calls


def _unique_in_order(got):
    seen, out = set(), []
    for scope_key, seq, content in sorted(got, key=lambda x: (x[0], x[1])):
        if (scope_key, seq) not in seen:
            seen.add((scope_key, seq))
            out.append(content)
    return out


def test_a_restarted_bus_actor_resumes_push_delivery_on_its_own(bus, tmp_path):
    """Events queued when the hub actor dies are delivered after its restart with no
    other call arriving (issue 10, item 13). A bus of its own: no other test's listener
    may call its hub actor."""
    quiet = mb.connect(bus.config.with_(namespace=f"{bus.config.namespace}q", data_dir=str(tmp_path),
                                        embedder_num_cpus=0.25))
    try:
        _restarted_bus_resumes(quiet)
    finally:
        quiet.shutdown()


def _restarted_bus_resumes(bus):
    o = org()
    ctx = Context(o, "u1", "listener")
    listener = GatedListener.remote()
    bus.subscribe(ctx, target=listener, name="gated")
    bus.remember("first", ctx, scope="org")
    _wait(lambda: ray.get(listener.calls_made.remote(), timeout=10) == 1)  # held at the gate
    for i in range(5):
        bus.remember(f"queued {i}", ctx, scope="org")
    time.sleep(1.0)  # every publish has reached the hub actor
    hub = actors.handle(bus.config, "hub", partition_of(o, bus.config.bus.partitions))
    old = ray.get(hub.pid.remote(), timeout=30)
    ray.kill(hub, no_restart=False)
    _wait(lambda: ray.get(hub.pid.remote(), timeout=10) != old, 120)  # pid() does not restore
    ray.get(listener.release.remote(), timeout=10)
    _wait(lambda: len(_unique_in_order(ray.get(listener.received.remote(), timeout=10))) >= 6, 60)
    assert _unique_in_order(ray.get(listener.received.remote(), timeout=10)) == \
        ["first"] + [f"queued {i}" for i in range(5)]
    bus.unsubscribe("gated", ctx)
    ray.kill(listener)


def test_replay_of_a_long_log_is_paged(bus):
    """A subscriber starting at the beginning of a 2,500-event log: the hub actor holds at
    most one page (BusPolicy.replay_page) at a time, and delivers all (issue 10, item 17)."""
    o = org()
    ctx = Context(o, "u1", "reader")
    bus.remember_many([f"log entry number {i}" for i in range(2500)], ctx)
    listener = GatedListener.remote()
    bus.subscribe(ctx, target=listener, name="from-start", start="beginning")
    _wait(lambda: ray.get(listener.calls_made.remote(), timeout=10) == 1)
    held = bus.bus_stats(ctx)["subscriptions"]["from-start"]["queued"]
    assert 0 < held <= 1000  # BusPolicy.replay_page
    ray.get(listener.release.remote(), timeout=10)
    _wait(lambda: len(ray.get(listener.received.remote(), timeout=10)) >= 2500, 120)
    got = _unique_in_order(ray.get(listener.received.remote(), timeout=10))
    assert got == [f"log entry number {i}" for i in range(2500)]
    bus.unsubscribe("from-start", ctx)
    ray.kill(listener)


def _other_shard_context(bus, o, avoid):
    """A context of org ``o`` whose own scope routes to another shard than ``avoid``."""
    return next(Context(o, f"u{i}") for i in range(1000)
                if Router(bus.config.num_shards).shard_for(Scope(o, f"u{i}").key)
                != Router(bus.config.num_shards).shard_for(avoid.key))


def test_ids_are_unique_across_shards_and_by_id_calls_touch_one_memory(bus):
    """An id used in one scope cannot be taken in a scope routed to another shard; get,
    update and forget by id touch exactly the one memory (issue 10, item 3)."""
    alice = Context(org(), "alice")
    mine = bus.remember("alice's plan", alice)
    bob = _other_shard_context(bus, org(), mine.scope)
    with pytest.raises(mb.InvalidMemory) as exc:
        bus.remember("bob's plan", bob, id=mine.id)
    assert alice.org not in str(exc.value) and "version" not in str(exc.value)
    with pytest.raises(mb.InvalidMemory):  # a MemoryNode item with that id: the same
        bus.remember_many([mb.MemoryNode(content="bob again", scope=bob.scope, id=mine.id)], bob)
    with pytest.raises(mb.ScopeViolation):
        bus.get(mine.id, bob)
    with pytest.raises(mb.ScopeViolation):
        bus.update(mine.id, bob, expected_version=1, content="hijacked")
    updated = bus.update(mine.id, alice, expected_version=1, content="alice's new plan")
    assert updated.version == 2 and bus.get(mine.id, alice).content == "alice's new plan"
    assert bus.forget(mine.id, alice) is True
    with pytest.raises(mb.MemoryNotFound):
        bus.get(mine.id, alice)
    # a caller-chosen id of its own scope is kept (an import keeping ids), once
    chosen = mb.derived_id(bob.scope, "imported-1")
    assert bus.remember("bob's imported note", bob, id=chosen).id == chosen
    assert bus.remember("bob's imported note", bob, id=chosen).id == chosen  # a retry: the same memory
    with pytest.raises(mb.VersionConflict):
        bus.remember("another note", bob, id=chosen)
    assert [h.node.id for h in bus.recall("imported note", bob, k=5)].count(chosen) == 1


def test_broadcast_cannot_be_hijacked(bus):
    """A node planted at the deterministic copy id is never returned as the broadcast's
    result (issue 10, item 2)."""
    from memorybus.shard.broadcast import broadcast_id

    o = org()
    alice, mallory = Context(o, "alice", "writer"), Context(o, "mallory")
    note = bus.remember("alice's quarterly numbers", alice)
    target = Scope(o)
    copy_id = broadcast_id(target, note.id)
    outsider = _other_shard_context(bus, org(), target)
    with pytest.raises(mb.InvalidMemory):  # another org cannot take an id of this org's scope
        bus.remember("planted by another org", outsider, id=copy_id)
    with pytest.raises(mb.InvalidMemory):  # nobody writes a broadcast copy's source by hand
        bus.remember("fake copy", mallory, scope="org", id=copy_id, source="broadcast:alice", parents=[note.id])
    bus.remember("planted by a colleague", mallory, scope="org", id=copy_id)
    with pytest.raises(mb.ScopeViolation):
        bus.broadcast(note.id, "org", alice)
    assert bus.get(copy_id, alice).content == "planted by a colleague"  # untouched, not reported as alice's
    clean = bus.remember("alice's second note", alice)
    copy = bus.broadcast(clean.id, "org", alice)
    assert copy.id == broadcast_id(target, clean.id) and copy.content == "alice's second note"
    assert bus.broadcast(clean.id, "org", alice).id == copy.id  # idempotent


def test_the_bus_learns_whom_to_believe_per_org(bus):
    """Three honest agents and one that states .95 and is always wrong: the bus grades
    them on the facts they assert, its org (and the operator) reads the reliabilities,
    another org neither shares nor reads them, and the learned grades then outweigh
    the liar's stated confidence (untaught, .95 alone would beat an honest .7)."""
    o, other, t0 = org(), org(), 1_700_000_000.0
    agents = ("h1", "h2", "h3", "liar")
    handles = {a: bus.agent_handle(o, agent=a) for a in agents}
    # 12 keys: the liar, asserting last, wins the first 7 (two honest re-assertions of the
    # head count 0.3 each, evidence.REASSERT) and loses from then on (docs/truth.md)
    for k in range(12):
        for i, a in enumerate(agents):
            owner = f"Bob{k}" if a == "liar" else "Ann"
            handles[a].assert_fact(f"project{k}/owner", f"Project {k} is owned by {owner}", Context(o, agent=a),
                                   scope="org", confidence=0.95 if a == "liar" else 0.8,
                                   valid_from=t0 + k * 3600 + i)
    learned = handles["h1"].source_reliability(Context(o, agent="h1"))
    assert set(learned) == {f"agent:{a}" for a in agents}  # a source defaults to its writing agent
    assert learned["agent:liar"]["reliability"] < 0.2 and learned["agent:h1"]["reliability"] > 0.8
    assert bus.source_reliability(Context(o)) == learned  # the operator names the org
    stranger = bus.agent_handle(other, agent="x")
    assert stranger.source_reliability(Context(other, agent="x")) == {}
    with pytest.raises(mb.MemoryBusError):
        stranger.source_reliability(Context(o, agent="x"))
    t1 = t0 + 100 * 3600
    handles["h1"].assert_fact("launch/owner", "Launch is owned by Ann", Context(o, agent="h1"), scope="org",
                              confidence=0.7, valid_from=t1)
    lie = handles["liar"].assert_fact("launch/owner", "Launch is owned by Bob", Context(o, agent="liar"),
                                      scope="org", confidence=0.95, valid_from=t1 + 1)
    assert lie.outcome == "rejected"
    assert bus.current_fact("launch/owner", Context(o), scope="org").content == "Launch is owned by Ann"
