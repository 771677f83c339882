"""The bus through the public API on a local Ray: keyed facts under 16 concurrent
writers, subscriptions that survive a subscriber's restart, broadcast, as-of recall."""

import time
import uuid

import pytest
import ray

import memorybus as mb
from memorybus import Config, Context, Inbox, Scope
from memorybus.bus.conflicts import Strategy, resolve

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


def test_sixteen_concurrent_writers_lose_no_update(bus):
    o = org()
    key = "team/deploy_target"
    values = [f"The team deploys to {x}" for x in ("AWS", "GCP", "Azure", "bare metal", "Fly", "Hetzner")]

    @ray.remote(num_cpus=0)
    def writer(b, w):
        ctx = Context(o, agent=f"writer{w}")
        out = []
        for i in range(200):
            r = b.assert_fact(key, values[(w + i) % len(values)], ctx, scope="org",
                              confidence=0.3 + 0.07 * ((w * 13 + i) % 10), valid_from=1_700_000_000 + i)
            out.append(r.write_id)
        return out

    writes = [i for ws in ray.get([writer.remote(bus, w) for w in range(16)], timeout=240) for i in ws]
    assert len(writes) == 3200 and len(set(writes)) == 3200
    reader = Context(o)
    hist = bus.history(key, reader, scope="org")
    assert len(hist) == 3200
    assert sorted(e.data["write"] for e in hist) == sorted(writes)  # each write exactly once
    assert [e.data["fact_seq"] for e in hist] == list(range(1, 3201))
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
    assert len(bus.recall("programming language", ctx, k=5, include_deprecated=True)) == 2


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


def test_subscriber_restarted_gets_every_missed_event_once_in_order(bus):
    o = org()
    ctx = Context(o, "u1", "listener")
    writer = Context(o, "u1", "writer")
    name = f"listener-{uuid.uuid4().hex[:6]}"
    listener = Listener.remote(bus, name, ctx)
    bus.subscribe(ctx, target=listener, name=name)
    scope_key = Scope(o).key
    for i in range(20):
        bus.remember(f"org update number {i}", writer, scope="org")
    _wait(lambda: len(ray.get(listener.received.remote(), timeout=10)) == 20)
    _wait(lambda: bus.subscription_cursors(name, ctx).get(scope_key) == 20)
    before = ray.get(listener.received.remote(), timeout=10)
    old_pid = ray.get(listener.pid.remote(), timeout=10)
    ray.kill(listener, no_restart=False)
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
    name = f"spy-{uuid.uuid4().hex[:6]}"
    spy = Listener.remote(bus, name, u2)
    bus.subscribe(u2, target=spy, name=name)
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
