"""The public API end to end on a local Ray: real actors, real model, real files."""

import asyncio
import uuid
from dataclasses import replace

import numpy as np
import pytest
import ray

import memorybus as mb
from memorybus import Config, Context, Scope, actors
from memorybus.retrieval.wire import RecallRequest, pack_request, unpack_hits, vector_bytes
from memorybus.scopes import Router

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def bus(ray_local, tmp_path_factory):
    cfg = Config.embedded(
        tmp_path_factory.mktemp("bus"), num_shards=4, namespace="client_t", touch_flush_seconds=0.0
    )
    b = mb.connect(cfg)
    yield b
    b.shutdown()


def org():
    return f"org{uuid.uuid4().hex[:8]}"


def snapshot(bus, ctxs):
    """Everything each context can see (ids, versions, contents)."""
    out = {}
    for c in ctxs:
        hits = bus.recall("anything at all", c, k=1000, include_archived=True, include_deprecated=True)
        out[str(c)] = sorted((h.node.id, h.node.version, h.node.content) for h in hits)
    return out, bus.count()


def test_remember_recall_get_update_forget(bus):
    ctx = Context(org(), "u1", "planner", "s1")
    n = bus.remember("The user prefers Rust for backend services", ctx, scope="user", importance=8)
    assert n.version == 1 and n.scope == Scope(ctx.org, "u1")
    bus.remember_many(["Lunch was a burrito", {"content": "Deploys are on Tuesdays", "scope": "org"}], ctx)
    hits = bus.recall("what programming language does the user like?", ctx, k=3)
    assert hits[0].node.id == n.id
    assert bus.get(n.id, ctx).content == n.content
    u = bus.update(n.id, ctx, expected_version=1, content="The user prefers Go for backend services")
    assert u.version == 2
    with pytest.raises(mb.VersionConflict) as exc:
        bus.update(n.id, ctx, expected_version=1, importance=3)
    assert exc.value.actual == 2 and exc.value.expected == 1
    assert bus.recall("Go language backend", ctx, k=1)[0].node.content.startswith("The user prefers Go")
    assert bus.forget(n.id, ctx) is True
    with pytest.raises(mb.MemoryNotFound):
        bus.get(n.id, ctx)
    with pytest.raises(mb.MemoryNotFound):
        bus.forget(n.id, ctx)


def test_async_api(bus):
    ctx = Context(org(), "u1")

    async def main():
        a = await bus.remember_async("Alice manages the Berlin office", ctx)
        await bus.remember_many_async(["Bob is on vacation", "Carol runs payroll"], ctx)
        hits = await bus.recall_async("who runs the office in Berlin?", ctx, k=1)
        got = await bus.get_async(a.id, ctx)
        upd = await bus.update_async(a.id, ctx, expected_version=1, importance=9)
        gone = await bus.forget_async(a.id, ctx)
        return a, hits, got, upd, gone

    a, hits, got, upd, gone = asyncio.run(main())
    assert hits[0].node.id == a.id and got.id == a.id and upd.importance == 9 and gone


def test_every_operation_runs_in_its_async_form(bus, tmp_path):
    """The twins that only the one-definition client gave (count, facts by triple,
    subscriptions, maintenance, the operator's calls) answer as their sync forms do; an
    async subscription's coroutine callback runs on the caller's event loop."""
    o = org()
    ctx = Context(o, "u1", "ops")
    admin = Context(o)

    async def main():
        loop = asyncio.get_running_loop()
        seen: list = []

        async def on_events(events):
            assert asyncio.get_running_loop() is loop
            seen.extend(events)

        sub = await bus.subscribe_async(ctx, callback=on_events, name="twins")
        node = await bus.remember_async("the fire drill is on thursday", ctx)
        fact = await bus.remember_fact_async("Dana", "works_at", "Initech", ctx)
        counted = await bus.count_async()
        stats = await bus.stats_async()
        shown = await bus.inspect_async(node.id)
        embedded = await bus.embed_async("fire drill")
        decay = await bus.run_decay_async(admin)
        status = await bus.maintenance_status_async()
        await bus.flush_async()
        for _ in range(100):
            if {e.node.id for e in seen if e.node is not None} >= {node.id, fact.node.id}:
                break
            await asyncio.sleep(0.1)
        cursors = await bus.subscription_cursors_async("twins", ctx)
        await asyncio.to_thread(sub.stop)  # the listener may be handing the loop a batch
        gone = await bus.unsubscribe_async("twins", ctx)
        written = await bus.export_async(tmp_path / "o.mbx", within=Scope(o))
        return node, fact, counted, stats, shown, embedded, decay, status, seen, cursors, gone, written

    node, fact, counted, stats, shown, embedded, decay, status, seen, cursors, gone, written = asyncio.run(main())
    assert counted == bus.count() and stats["memories"] == counted
    assert shown.node.id == node.id and fact.outcome == "created"
    assert embedded.shape == (1, bus.config.embedding_dim)
    assert decay["runs"] >= 1 and set(status) == {"decay", "consolidation"}
    assert {e.node.id for e in seen if e.node is not None} >= {node.id, fact.node.id}
    assert cursors and gone is True
    assert written["nodes"] == 2 and bus.export(tmp_path / "o2.mbx", within=Scope(o))["nodes"] == 2


def test_user_isolation_across_shards(bus):
    o = org()
    u1 = Context(o, "u1", "assistant", "s1")
    u2 = Context(o, "u2", "assistant", "s2")
    secrets = []
    for i in range(12):
        secrets.append(bus.remember(f"u2 secret number {i}: bank pin is {1000 + i}", u2, scope="user"))
        secrets.append(bus.remember(f"u2 session note {i}: the bank pin {2000 + i}", u2))
    bus.remember("u1 knows the bank is open on Monday", u1, scope="user")
    bus.remember("org policy: never share a bank pin", u1, scope="org")
    secret_ids = {n.id for n in secrets}
    router = Router(bus.config.num_shards)
    routed = {router.shard_for(n.scope.key) for n in secrets} | {router.shard_for(s.key) for s in u1.visible_scopes()}
    assert len(routed) >= 2  # the data really spans shards
    for q in ["bank pin", "secret number", "session note", "what is u2's pin?"]:
        hits = bus.recall(q, u1, k=50, include_archived=True, include_deprecated=True)
        assert not secret_ids & {h.node.id for h in hits}
        assert all(h.node.scope.visible_to(u1) for h in hits)
    # an org-wide context without a user sees neither user's private memories
    hits = bus.recall("bank", Context(o), k=50)
    assert {h.node.content for h in hits} == {"org policy: never share a bank pin"}
    for n in secrets[:3]:
        with pytest.raises(mb.ScopeViolation):
            bus.get(n.id, u1)
        with pytest.raises(mb.ScopeViolation):
            bus.update(n.id, u1, expected_version=1, importance=2)
        with pytest.raises(mb.ScopeViolation):
            bus.forget(n.id, u1)
    assert bus.get(secrets[0].id, u2).version == 1


def test_shard_enforces_visibility_even_if_the_client_is_bypassed(bus):
    o = org()
    owner = Context(o, "u1")
    n = bus.remember("u1 private diary entry", owner)
    # the intruder holds a real credential, but for u2: it names u1's context, or its own
    u2_cred = bus.issue_credential(o, "u2")
    vec = bus.embed(["u1 private diary entry"])
    shard = actors.handle(bus.config, "shard", Router(bus.config.num_shards).shard_for(n.scope.key))

    def recall(ctx, *vector):
        packed = pack_request(RecallRequest(ctx, 50, None, None, "u1 private diary entry", None, *vector))
        return unpack_hits(ray.get(shard.recall.remote(packed, vec[0])))

    intruder = Context(o, "u2", credential=u2_cred)
    hits = recall(intruder)
    assert hits == [] or all(h.node.scope.visible_to(intruder) for h in hits)
    hits += recall(intruder, vector_bytes(vec[0]))  # the vector inside the request
    assert n.id not in {h.node.id for h in hits}
    # naming u1 with u2's credential, or with none at all, is refused before anything is read
    with pytest.raises(ray.exceptions.RayTaskError) as widened:
        recall(Context(o, "u1", credential=u2_cred))
    assert isinstance(widened.value.cause, mb.NotAuthorized)
    with pytest.raises(ray.exceptions.RayTaskError) as bare:
        recall(Context(o, "u1"))
    assert isinstance(bare.value.cause, mb.NotAuthenticated)
    # the same call with u1's credential finds it: the intruder's answer is the shard's check
    owner_cred = bus.issue_credential(o, "u1")
    found = recall(Context(o, "u1", credential=owner_cred), vector_bytes(vec[0]))
    assert n.id in {h.node.id for h in found}
    with pytest.raises(ray.exceptions.RayTaskError) as bad:
        ray.get(shard.recall.remote(b"not a request"))
    assert isinstance(bad.value.cause, mb.InvalidRequest)
    with pytest.raises(ray.exceptions.RayTaskError) as exc:
        ray.get(shard.get.remote(intruder, n.id))
    assert isinstance(exc.value.cause, mb.ScopeViolation)


@ray.remote(num_cpus=0)
class Echo:
    def on_events(self, batch):
        return len(batch)


Z = "00000000-0000-0000-0000-000000000000"
# (api, call(bus, ctx, probe_id), expected error)
BAD_CALLS = [
    ("remember", lambda b, c, p: b.remember("", c), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("x" * 20_000, c), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, confidence=1.5), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, importance=0), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, kind="dream"), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, scope=Scope(c.org, "other")), mb.ScopeViolation),
    ("remember", lambda b, c, p: b.remember("ok", c, scope="galaxy"), mb.InvalidRequest),
    ("remember", lambda b, c, p: b.remember("ok", c, embedding=np.ones(384)), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", "not-a-context"), mb.InvalidRequest),
    ("remember", lambda b, c, p: b.remember("ok", c, ttl=-5), mb.InvalidMemory),
    ("remember_many", lambda b, c, p: b.remember_many(["fine", "also fine", ""], c), mb.InvalidMemory),
    (
        "remember_many",
        lambda b, c, p: b.remember_many(["fine", {"content": "x", "bogus": 1}], c),
        mb.InvalidMemory,
    ),
    ("remember_many", lambda b, c, p: b.remember_many("not a list", c), mb.InvalidRequest),
    (
        "remember_many",
        lambda b, c, p: b.remember_many(["a", {"content": "b", "scope": Scope("zz")}], c),
        mb.ScopeViolation,
    ),
    (
        "remember_many",
        lambda b, c, p: b.remember_many(["dup", {"content": "d", "id": p}], c),
        mb.VersionConflict,
    ),
    ("recall", lambda b, c, p: b.recall("", c), mb.InvalidRequest),
    ("recall", lambda b, c, p: b.recall("q", c, k=0), mb.InvalidRequest),
    ("recall", lambda b, c, p: b.recall("q", c, kinds=["dream"]), mb.InvalidRequest),
    ("recall", lambda b, c, p: b.recall("q", None), mb.InvalidRequest),
    ("get", lambda b, c, p: b.get("", c), mb.InvalidRequest),
    ("get", lambda b, c, p: b.get(Z, c), mb.MemoryNotFound),
    ("update", lambda b, c, p: b.update(p, c, expected_version=1, confidence=7), mb.InvalidMemory),
    ("update", lambda b, c, p: b.update(p, c, expected_version=1, content=""), mb.InvalidMemory),
    ("update", lambda b, c, p: b.update(p, c, expected_version=1, scope=Scope("x")), mb.InvalidRequest),
    ("update", lambda b, c, p: b.update(p, c, expected_version="1", importance=2), mb.InvalidRequest),
    ("update", lambda b, c, p: b.update(p, c, expected_version=9, importance=2), mb.VersionConflict),
    ("update", lambda b, c, p: b.update(p, c, expected_version=1), mb.InvalidRequest),
    ("update", lambda b, c, p: b.update(p, c, expected_version=1, kind="dream"), mb.InvalidMemory),
    (
        "update",
        lambda b, c, p: b.update(p, Context(c.org, "u9"), expected_version=1, importance=2),
        mb.ScopeViolation,
    ),
    ("forget", lambda b, c, p: b.forget(Z, c), mb.MemoryNotFound),
    ("forget", lambda b, c, p: b.forget(p, c, expected_version=7), mb.VersionConflict),
    ("forget", lambda b, c, p: b.forget(p, "ctx"), mb.InvalidRequest),
    ("forget", lambda b, c, p: b.forget(p, Context(c.org, "u9")), mb.ScopeViolation),
    # lone surrogates have no UTF-8 form: refused where they enter (issue 10, item 16)
    ("remember", lambda b, c, p: b.remember("bad \ud800 text", c), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, key="k\ud800"), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, tags=["\udfff"]), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, source="\ud800"), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, structured={"s": "\ud800"}), mb.InvalidMemory),
    ("remember_many", lambda b, c, p: b.remember_many(["fine", "\ud800"], c), mb.InvalidMemory),
    ("recall", lambda b, c, p: b.recall("what \ud800", c), mb.InvalidRequest),
    ("context_for", lambda b, c, p: b.context_for("what \ud800", c), mb.InvalidRequest),
    ("update", lambda b, c, p: b.update(p, c, expected_version=1, content="x\ud800"), mb.InvalidMemory),
    ("update", lambda b, c, p: b.update(p, c, expected_version=1, tags=["\ud800"]), mb.InvalidMemory),
    ("assert_fact", lambda b, c, p: b.assert_fact("k\ud800", "v", c), mb.InvalidMemory),
    ("assert_fact", lambda b, c, p: b.assert_fact("k", "v\ud800", c), mb.InvalidMemory),
    ("current_fact", lambda b, c, p: b.current_fact("k\ud800", c), mb.InvalidMemory),
    ("history", lambda b, c, p: b.history("k\ud800", c), mb.InvalidMemory),
    ("remember_fact", lambda b, c, p: b.remember_fact("Al\ud800", "works_at", "Acme", c), mb.InvalidMemory),
    ("embed", lambda b, c, p: b.embed(["\ud800"]), mb.InvalidRequest),
    ("subscribe", lambda b, c, p: b.subscribe(c, callback=print, name="n\ud800"), mb.InvalidRequest),
    ("subscribe", lambda b, c, p: b.subscribe(c, mb.EventFilter.of(keys=["\ud800"]), callback=print),
     mb.InvalidRequest),
    # poison values and limits
    ("remember", lambda b, c, p: b.remember("ok", c, valid_from=1e12), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, valid_from=float("inf")), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, ttl=1e300), mb.InvalidMemory),
    ("recall", lambda b, c, p: b.recall("q", c, as_of=float("inf")), mb.InvalidRequest),
    ("recall", lambda b, c, p: b.recall("q", c, start=1e12), mb.InvalidRequest),
    ("update", lambda b, c, p: b.update(p, c, expected_version=1, valid_to=1e12), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, tags=[f"t{i}" for i in range(100_000)]), mb.InvalidMemory),
    ("remember", lambda b, c, p: b.remember("ok", c, structured={"blob": "x" * 1_000_000}), mb.InvalidMemory),
    # a subscription target is checked when subscribing, not at every failed delivery
    ("subscribe", lambda b, c, p: b.subscribe(c, target=object()), mb.InvalidRequest),
    ("subscribe", lambda b, c, p: b.subscribe(c, target=Echo.remote(), method="no_such_method"), mb.InvalidRequest),
    ("subscribe", lambda b, c, p: b.subscribe(c, callback="not callable"), mb.InvalidRequest),
]


@pytest.mark.parametrize(
    ("name", "call", "error"), BAD_CALLS, ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(BAD_CALLS)]
)
def test_bad_input_raises_and_changes_nothing(bus, name, call, error):
    o = org()
    ctx = Context(o, "u1", "a1", "s1")
    probe = bus.remember("the probe memory", ctx)
    before = snapshot(bus, [ctx, Context(o)])
    with pytest.raises(error) as exc:
        call(bus, ctx, probe.id)
    assert isinstance(exc.value, mb.MemoryBusError)
    assert snapshot(bus, [ctx, Context(o)]) == before
    assert bus.get(probe.id, ctx).version == 1


def test_errors_cross_actor_boundaries_intact(bus):
    ctx = Context(org(), "u1")
    n = bus.remember("versioned thing", ctx)

    @ray.remote(num_cpus=0)
    def conflicting_update(b, memory_id, c):
        try:
            b.update(memory_id, c, expected_version=41, importance=2)
        except mb.VersionConflict as exc:
            return exc
        return None

    agent = bus.as_agent(bus.issue_credential(ctx.org, "u1"))
    err = ray.get(conflicting_update.remote(agent, n.id, ctx), timeout=60)
    assert type(err) is mb.VersionConflict
    assert (err.key, err.expected, err.actual) == (n.id, 41, 1)
    assert "expected version 41" in str(err)


def test_client_pickles_into_tasks_and_actors(bus):
    o = org()

    @ray.remote(num_cpus=0)
    def agent_task(b, i):
        c = Context(o, "u1", f"agent{i}")
        node = b.remember(f"agent {i} found clue number {i}", c, scope="user")
        return node.id

    @ray.remote(num_cpus=0)
    class Agent:
        def __init__(self, b):
            self.bus = b

        def ask(self, q):
            return [h.node.content for h in self.bus.recall(q, Context(o, "u1", "agentX"), k=3)]

        async def ask_async(self, q):
            hits = await self.bus.recall_async(q, Context(o, "u1", "agentX"), k=3)
            return [h.node.content for h in hits]

    # agents get handles bound to a credential (here the user's: any agent of u1);
    # the operator's handle never leaves this process
    user_bus = bus.as_agent(bus.issue_credential(o, "u1"))
    with pytest.raises(mb.NotAuthorized):
        agent_task.remote(bus, 0)
    ids = ray.get([agent_task.remote(user_bus, i) for i in range(4)], timeout=120)
    assert len(set(ids)) == 4
    agent = Agent.remote(user_bus)
    got = ray.get(agent.ask.remote("clue number 2"), timeout=60)
    assert got[0] == "agent 2 found clue number 2"
    got = ray.get(agent.ask_async.remote("clue number 3"), timeout=60)
    assert got[0] == "agent 3 found clue number 3"
    ray.kill(agent)


def test_queries_are_embedded_where_the_config_says(bus, tmp_path, capfd):
    """``query_encoder="auto"``: a synchronous recall from the driver embeds its query
    in this process; async recalls, recalls inside Ray workers, and a process that
    cannot load the model use the embedder actor. The vectors agree either way."""
    o = org()
    ctx = Context(o, "u1")
    target = bus.remember("the staging database lives in Frankfurt", ctx)
    bus.remember_many(["the cat is called Miso", "invoices go out on Fridays"], ctx)
    assert bus.config.query_encoder == "auto"

    def encoded():
        return ray.get(actors.handle(bus.config, "embedder").stats.remote(), timeout=30)["encoded"]

    def top(b, q):
        return [(h.node.id, h.score) for h in b.recall(q, ctx, k=3)]

    assert bus.warm_up()  # connect loads this process's model behind (see client.life)
    before = encoded()
    capfd.readouterr()
    here = top(bus, "where is the staging database?")
    assert encoded() == before  # embedded in this process
    assert "only available when the process is a worker" not in capfd.readouterr().err  # no Ray warning
    via_actor = mb.MemoryBus(bus.config.with_(query_encoder="embedder")).as_agent(bus.issue_credential(o, "u1"))
    there = top(via_actor, "where is the staging database?")
    assert encoded() == before + 1
    assert here[0][0] == there[0][0] == target.id
    assert [i for i, _ in here] == [i for i, _ in there]
    assert np.allclose([s for _, s in here], [s for _, s in there], atol=1e-4)

    hits = asyncio.run(bus.recall_async("which city hosts staging?", ctx, k=1))
    assert hits[0].node.id == target.id and encoded() == before + 2

    @ray.remote(num_cpus=0)
    def in_task(b, q):
        return b.recall(q, Context(o, "u1"), k=1)[0].node.id

    assert ray.get(in_task.remote(bus.agent_handle(o, "u1"), "staging database location"), timeout=60) == target.id
    assert encoded() == before + 3

    missing = str(tmp_path / "no-model-here")
    fallback = mb.MemoryBus(bus.config.with_(model_path=missing)).as_agent(bus.issue_credential(o, "u1"))
    assert top(fallback, "Frankfurt database")[0][0] == target.id
    assert encoded() == before + 4
    strict = mb.MemoryBus(bus.config.with_(model_path=missing, query_encoder="local")).as_agent(
        bus.issue_credential(o, "u1"))
    with pytest.raises(mb.MemoryBusError):
        strict.recall("Frankfurt database again", ctx, k=1)
    assert encoded() == before + 4


def test_the_shard_embeds_a_turn_after_the_turn_an_earlier_call_stored(bus, tmp_path):
    """``contextual_text``: the client sends memories only; the shard decides what is
    embedded, so a turn remembered after the call that stored the turn before it is
    embedded with that turn's text (the client saw one call's turns only)."""
    ranking = replace(bus.config.ranking, contextual_text=True, context_mix=0.0)
    cfg = bus.config.with_(namespace=f"{bus.config.namespace}_ctx", data_dir=str(tmp_path), num_shards=1,
                           embedder_num_cpus=0.25, ranking=ranking)
    talk = mb.connect(cfg)
    try:
        ctx = Context(org(), "u1", credential=talk._credential)  # the shard is called directly below
        (first,) = talk.remember_turns([("Ana", "I adopted a beagle from the shelter")], ctx, thread="t1")
        (second,) = talk.remember_turns([("Ben", "What did you name her?")], ctx, thread="t1", start=1)
        shard = actors.handle(cfg, "shard", 0)
        stored = ray.get(shard.get.remote(ctx, second.id, True), timeout=60).embedding
        with_context, alone = talk.embed([f"{first.content}\n{second.content}", second.content])
        assert np.allclose(stored, with_context, atol=1e-5)
        assert not np.allclose(stored, alone, atol=1e-2)
        updated = talk.update(second.id, ctx, expected_version=1, content="What is her name?")
        stored = ray.get(shard.get.remote(ctx, updated.id, True), timeout=60).embedding
        assert np.allclose(stored, talk.embed([f"{first.content}\nWhat is her name?"])[0], atol=1e-5)
    finally:
        talk.shutdown()


def test_access_statistics_are_recorded(bus):
    ctx = Context(org(), "u1")
    n = bus.remember("the wifi password is on the fridge", ctx)
    for _ in range(3):
        bus.recall("wifi password", ctx, k=1)
    bus.flush()
    assert bus.get(n.id, ctx).access_count == 3


def test_list_memories_pages_across_shards_and_stays_in_sight(bus):
    ctx = Context(org(), "u1", "planner", "s1")
    other = Context(ctx.org, "u2", "planner", "s9")
    items = [{"content": f"listed note {i}", "scope": s} for i, s in enumerate(["user", "org", "agent", "session"] * 3)]
    stored = bus.remember_many(items, ctx)
    bus.remember("u2 keeps this to herself", other, scope="user")
    seen, cursor, pages = [], None, 0
    while True:
        page = bus.list_memories(ctx, limit=5, cursor=cursor)
        seen += page.memories
        pages += 1
        if page.cursor is None:
            break
        cursor = page.cursor
    assert pages >= 3 and len(seen) == len({n.id for n in seen}) == 12
    assert {n.id for n in seen} == {n.id for n in stored}
    assert [(n.created_at, n.id) for n in seen] == sorted((n.created_at, n.id) for n in seen)
    assert {n.content for n in bus.list_memories(other).memories} == {"u2 keeps this to herself"} | {
        n.content for n in stored if n.scope.level.value == "org"
    }
    assert {n.scope for n in bus.list_memories(ctx, scope="org").memories} == {Scope(ctx.org)}
    assert bus.list_memories(ctx, scope=Scope(ctx.org, "u2")).memories == []
    with pytest.raises(mb.InvalidRequest):
        bus.list_memories(ctx, cursor="not-a-cursor")


def test_embed_takes_a_string_as_one_text(bus):
    one = bus.embed("a string")
    assert one.shape == (1, 384)
    assert np.allclose(one[0], bus.embed(["a string"])[0], atol=1e-6)


def test_shard_actors_collect_garbage_less_often_and_leave_the_loaded_mirror_unscanned(bus):
    """Each shard actor raises the collector's young threshold and freezes what its rebuild
    loaded (bus.stats() shows it per shard); closing a shard unfreezes, so a reopened
    shard does not keep the closed one's objects out of the collector's reach."""
    ctx = Context(org(), "gc-user")
    bus.remember("the standup moved to 9:30", ctx)
    shards = bus.stats()["shards"]
    assert len(shards) == bus.config.num_shards
    for s in shards:
        assert s["process"]["gc_threshold"][0] >= 10_000
        assert s["process"]["gc_frozen"] > 0
    handle = bus._shard_handles()[0]
    ray.get(handle.close.remote(bus._credential), timeout=60)
    reopened = ray.get(handle.stats.remote(bus._credential), timeout=60)  # opens it again: a fresh freeze
    assert reopened["process"]["pid"] == shards[0]["process"]["pid"]
    assert reopened["process"]["gc_frozen"] > 0
    assert [h.content for h in bus.recall("when is the standup?", ctx, k=1)] == ["the standup moved to 9:30"]


def test_the_embedder_pool_answers_every_request_with_its_own_vectors(bus):
    """Requests submitted to the pool at once, without waiting, each get their own texts'
    vectors, one row per text in the texts' order. (Which is answered first is not
    asserted here: Ray does not promise the order an async actor starts calls in; the
    replica's own queue order is tested in tests/unit/test_embedding.py.)"""
    from memorybus.actors.embedder import EmbedderPool

    pool = EmbedderPool(bus.config)
    batches = [[f"request {r} text {i} about topic {i * 7 % 13}" for i in range(96)] for r in range(4)]
    submitted = [pool.submit(texts) for texts in batches]
    for texts, calls in zip(batches, submitted, strict=True):
        vectors = pool.wait(calls, 60)
        assert vectors.shape == (len(texts), bus.config.embedding_dim)
        assert np.allclose(vectors[[0, 50, -1]], bus.embed([texts[0], texts[50], texts[-1]]), atol=1e-5)
