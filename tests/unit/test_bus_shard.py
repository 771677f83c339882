"""Keyed facts, events, deduplication, contradictions and broadcast in the plain Shard
(real SQLite and Redis stores, real Qdrant Edge, the real model)."""

import threading
from dataclasses import replace

import pytest

from memorybus import (
    BusPolicy,
    Context,
    EventFilter,
    EventKind,
    InvalidMemory,
    InvalidRequest,
    ManualClock,
    MemoryKind,
    MemoryNode,
    MemoryNotFound,
    MemoryStatus,
    Scope,
    ScopeViolation,
)
from memorybus.bus.conflicts import Strategy, resolve
from memorybus.bus.evidence import MAX_CLAIMS, KeyEvidence
from memorybus.shard import Shard
from memorybus.shard.records import content_hash
from memorybus.storage.redis import RedisStore
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

pytestmark = pytest.mark.model
DAY = 86400.0
WEEK = 7 * DAY
U1 = Context("acme", "u1", "planner", "s1")
KEY = "user:u1/backend_language"
USER = Scope("acme", "u1")


@pytest.fixture
def clock():
    return ManualClock(1_700_000_000.0)


def make_shard(tmp_path, clock, store=None, name="v", **kw):
    published = []
    s = Shard("shard-0", store or SqliteStore(tmp_path / "r.sqlite"), EdgeVectorIndex(tmp_path / name, 384),
              dim=384, clock=clock, on_events=published.extend, **kw)
    s.published = published
    return s


@pytest.fixture
def shard(tmp_path, clock):
    s = make_shard(tmp_path, clock)
    yield s
    s.close()


def fact(embedder, content, *, confidence=0.9, valid_from=0.0, scope=USER, key=KEY):
    return MemoryNode(content=content, scope=scope, key=key, kind=MemoryKind.SEMANTIC, confidence=confidence,
                      valid_from=valid_from), embedder.encode([content])[0]


def test_superseded_fact_is_kept_closed_and_linked(shard, embedder, clock):
    t0 = clock.now()
    py, v1 = fact(embedder, "User writes Python", valid_from=t0 + 1 * WEEK)
    rust, v2 = fact(embedder, "User switched to Rust", valid_from=t0 + 3 * WEEK)
    r1 = shard.assert_fact(U1, py, v1)
    r2 = shard.assert_fact(U1, rust, v2)
    assert (r1.outcome, r2.outcome) == ("created", "superseded")
    assert r2.previous == r1.node.id and r2.current
    old = shard.get(U1, r1.node.id)
    assert old.status is MemoryStatus.DEPRECATED
    assert old.valid_to == t0 + 3 * WEEK
    assert r2.node.id in old.contradicts and r1.node.id in r2.node.contradicts
    assert shard.current_fact(U1, KEY, USER).content == "User switched to Rust"
    q = embedder.encode(["does the user write Rust or Python?"])[0]
    assert [h.node.content for h in shard.search(U1, q, 5)] == ["User switched to Rust"]
    both = shard.search(U1, q, 5, statuses=[MemoryStatus.ACTIVE, MemoryStatus.DEPRECATED])
    assert {h.node.content for h in both} == {"User writes Python", "User switched to Rust"}
    as_of = [h.node.content for h in shard.search(U1, q, 5, as_of=t0 + 2 * WEEK)]
    assert as_of == ["User writes Python"]
    hist = shard.history(U1, KEY, USER)
    assert [(e.node.content, e.data["outcome"]) for e in hist] == [
        ("User writes Python", "created"), ("User switched to Rust", "superseded")]
    assert [e.data["fact_seq"] for e in hist] == [1, 2]


def test_rejected_and_reinforced_assertions(shard, embedder, clock):
    t0 = clock.now()
    a, va = fact(embedder, "Deploy target is AWS", confidence=0.9, valid_from=t0)
    b, vb = fact(embedder, "Deploy target is GCP", confidence=0.3, valid_from=t0 + DAY)
    ra = shard.assert_fact(U1, a, va)
    rb = shard.assert_fact(U1, b, vb)
    assert rb.outcome == "rejected" and not rb.current
    assert rb.node.status is MemoryStatus.DEPRECATED and ra.node.id in rb.node.contradicts
    assert rb.node.id in shard.get(U1, ra.node.id).contradicts
    assert shard.current_fact(U1, KEY, USER).id == ra.node.id
    again, vagain = fact(embedder, "Deploy target is AWS", confidence=1.0, valid_from=t0 + 2 * DAY)
    rr = shard.assert_fact(U1, again, vagain)
    assert rr.outcome == "reinforced" and rr.node.id == ra.node.id and rr.node.confidence == 1.0
    assert len([n for n in shard.store.iter_all() if n.scope.key == USER.key and n.key == KEY]) == 2
    assert [e.data["outcome"] for e in shard.history(U1, KEY, USER)] == ["created", "rejected", "reinforced"]


def test_authority_strategy_uses_configured_authorities(tmp_path, clock, embedder):
    s = make_shard(tmp_path, clock, policy=BusPolicy(authorities=("cto",)))
    cto = Context("acme", "u1", "cto")
    dev = Context("acme", "u1", "dev")
    a, va = fact(embedder, "Standard DB is Postgres", confidence=0.5)
    assert "authority" in s.assert_fact(cto, a, va, "authority").node.tags
    b, vb = fact(embedder, "Standard DB is MySQL", confidence=1.0, valid_from=clock.now() + DAY)
    assert s.assert_fact(dev, b, vb, "authority").outcome == "rejected"
    assert s.assert_fact(dev, replace(b, id=MemoryNode(content="x", scope=USER).id), vb, "recency").current
    s.close()


def test_bad_fact_input_changes_nothing(shard, embedder):
    a, va = fact(embedder, "x is 1")
    with pytest.raises(InvalidMemory):
        shard.assert_fact(U1, replace(a, key=None), va)
    with pytest.raises(InvalidRequest):
        shard.assert_fact(U1, a, va, "loudest")
    with pytest.raises(ScopeViolation):
        shard.assert_fact(U1, replace(a, scope=Scope("acme", "u2")), va)
    with pytest.raises(InvalidMemory):
        shard.assert_fact(U1, replace(a, confidence=3.0), va)
    assert shard.store.count() == 0 and shard.store.slot(USER.key, KEY) == (None, 0)
    assert shard.published == []


@pytest.mark.redis
@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_concurrent_writers_on_one_store_never_lose_an_update(tmp_path, clock, embedder, redis_server, backend):
    """Eight shard instances (say, zombies and their replacement) on one store, one writer
    thread each: compare-and-set on the slot re-reads and re-resolves, nothing is lost."""
    import uuid

    if backend == "sqlite":
        stores = [SqliteStore(tmp_path / "shared.sqlite") for _ in range(8)]
    else:
        ns = f"cas{uuid.uuid4().hex[:6]}"
        stores = [RedisStore(redis_server.url, ns, "shard-0") for _ in range(8)]
    policy = BusPolicy(max_cas_retries=1000, strategy="confidence_weighted")
    shards = [make_shard(tmp_path, clock, st, name=f"v{i}", policy=policy) for i, st in enumerate(stores)]
    values = [f"The backend language is {lang}" for lang in ("Rust", "Go", "Python", "Java")]
    vecs = dict(zip(values, embedder.encode(values), strict=True))
    results, written, lock = [], [], threading.Lock()

    def writer(w):
        for i in range(25):
            content = values[(w + i) % 4]
            node = MemoryNode(content=content, scope=USER, key=KEY, kind=MemoryKind.SEMANTIC,
                              confidence=0.5 + 0.05 * ((w * 7 + i) % 10), valid_from=clock.now() + i * 60)
            r = shards[w].assert_fact(U1, node, vecs[content])
            with lock:
                results.append(r)
                written.append((node.valid_from, content_hash(node)))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    hist = shards[0].history(U1, KEY, USER)
    assert len(results) == 200 and len(hist) == 200
    assert sorted(e.data["write"] for e in hist) == sorted(r.write_id for r in results)
    assert [e.data["fact_seq"] for e in hist] == list(range(1, 201))
    assert stores[0].slot(USER.key, KEY)[1] == 200
    _check_current_is_strategy_choice(stores[0], hist)
    # the evidence stored with the slot moved under the same compare-and-set: it holds the
    # newest assertions (by their time: claims are weighed in time order), none lost, none twice
    evidence = KeyEvidence.decode(stores[0].fact_slot(USER.key, KEY)[2])
    held = sorted((c.at, c.value) for c in evidence.claims)
    assert held == sorted(written)[-MAX_CLAIMS:]
    assert evidence.head == content_hash(stores[0].get(stores[0].slot(USER.key, KEY)[0]))
    for s in shards:
        s.close()


def _check_current_is_strategy_choice(store, hist):
    """Replay the history through the strategy: the stored head must be its choice."""
    current = None
    for e in hist:
        outcome = e.data["outcome"]
        if outcome == "reinforced":
            assert current is not None and current.content == e.node.content
            current = e.node  # a reinforcement may raise the current value's confidence
            continue
        decision = resolve(current, e.node, Strategy.CONFIDENCE_WEIGHTED)
        assert decision.new_wins == (outcome in ("created", "superseded")), e.data
        if decision.new_wins:
            current = e.node
    head_id, _ = store.slot(USER.key, KEY)
    assert head_id == current.id


def test_every_write_is_an_event_with_per_scope_sequence(shard, embedder, clock):
    org = Scope("acme")
    n = shard.put_many(U1, [MemoryNode(content="office opens at 8", scope=org)], embedder.encode(["office opens at 8"]))
    m = shard.put_many(U1, [MemoryNode(content="my draft", scope=U1.scope)], embedder.encode(["my draft"]))
    shard.update(U1, n[0].id, 1, {"importance": 9})
    shard.delete(U1, m[0].id)
    kinds = [(e.kind, e.scope_key, e.seq) for e in shard.published]
    assert kinds == [(EventKind.REMEMBERED, org.key, 1), (EventKind.REMEMBERED, U1.scope.key, 1),
                     (EventKind.UPDATED, org.key, 2), (EventKind.FORGOTTEN, U1.scope.key, 2)]
    # the log has them durably, and replay only shows what a context may see
    events, cursors = shard.read_events(Context("acme", "u2"), {})
    assert [e.node.content for e in events] == ["office opens at 8", "office opens at 8"]
    assert cursors[org.key] == 2
    events, _ = shard.read_events(U1, {org.key: 1}, EventFilter.of(events=["forgotten", "updated"]))
    assert [(e.kind, e.seq) for e in events] == [(EventKind.UPDATED, 2), (EventKind.FORGOTTEN, 2)]


def test_duplicates_are_not_stored_twice(shard, embedder, clock):
    def put(content, kind=MemoryKind.SEMANTIC, valid_from=0.0):
        return shard.put_many(U1, [MemoryNode(content=content, scope=U1.scope, kind=kind, valid_from=valid_from)],
                              embedder.encode([content]))[0]

    a = put("The office wifi password is hunter2")
    assert put("The office wifi password is hunter2").id == a.id  # exact
    assert put("The office wifi password is hunter2 ").id == a.id  # whitespace only
    near = put("the office WiFi password is hunter2")
    assert near.id == a.id  # near duplicate of a semantic fact
    # the same words said at two different times are two episodes
    e1 = put("ok see you then", MemoryKind.EPISODIC, valid_from=clock.now())
    e2 = put("ok see you then", MemoryKind.EPISODIC, valid_from=clock.now() + 60)
    e3 = put("ok see you then", MemoryKind.EPISODIC, valid_from=clock.now())
    assert e1.id != e2.id and e3.id == e1.id
    assert shard.store.count() == 3


def test_an_undated_repeat_within_the_window_reinforces_instead_of_copying(shard, embedder, clock, tmp_path):
    def say(text, ctx=U1, confidence=0.6):
        return shard.put_many(ctx, [MemoryNode(content=text, scope=ctx.scope, confidence=confidence)],
                              embedder.encode([text]))[0]

    first = say("We ran the nightly export")
    clock.advance(600)  # ten minutes later: the same job run again
    again = say("We ran the nightly export", confidence=0.8)
    assert again.id == first.id and shard.store.count() == 1
    stored = shard.get(U1, first.id)
    assert (stored.access_count, stored.confidence, stored.version) == (1, 0.8, 2)
    assert shard.published[-1].kind is EventKind.UPDATED
    assert shard.published[-1].data == {"reinforced": True, "principal": "acme/u1/planner/s1"}
    clock.advance(60)
    assert say("We ran the nightly export", confidence=0.5).id == first.id  # lower confidence: count only
    shard.flush()
    durable = shard.store.get(first.id)
    assert (durable.access_count, durable.confidence, durable.version) == (2, 0.8, 2)
    # another thread (session) is another memory; so is a repeat after the window
    other_session = Context("acme", "u1", "planner", "s2")
    assert say("We ran the nightly export", ctx=other_session).id != first.id
    clock.advance(2 * DAY)
    assert say("We ran the nightly export").id != first.id
    assert shard.store.count() == 3
    # a repeat inside one batch is stored once, with the access counted
    batch = [MemoryNode(content="Deploy finished", scope=U1.scope, confidence=c) for c in (0.5, 0.7)]
    a, b = shard.put_many(U1, batch, embedder.encode(["Deploy finished"] * 2))
    assert a.id == b.id and (a.confidence, a.access_count) == (0.7, 1)
    # window 0: every repeat is kept
    keep_all = make_shard(tmp_path / "w0", clock, policy=BusPolicy(repeat_window_seconds=0))
    try:
        x = keep_all.put_many(U1, [MemoryNode(content="ping", scope=U1.scope)], embedder.encode(["ping"]))[0]
        clock.advance(1)
        y = keep_all.put_many(U1, [MemoryNode(content="ping", scope=U1.scope)], embedder.encode(["ping"]))[0]
        assert x.id != y.id
    finally:
        keep_all.close()


def test_similar_memory_with_different_number_is_flagged_as_contradiction(shard, embedder):
    texts = ["The weekly standup is at 9:30 on Mondays", "The weekly standup is at 11:00 on Mondays"]
    sem = MemoryKind.SEMANTIC
    a = shard.put_many(U1, [MemoryNode(content=texts[0], scope=U1.scope, kind=sem)], embedder.encode(texts[:1]))[0]
    b = shard.put_many(U1, [MemoryNode(content=texts[1], scope=U1.scope, kind=sem)], embedder.encode(texts[1:]))[0]
    assert a.id in b.contradicts
    assert b.id in shard.get(U1, a.id).contradicts
    assert shard.get(U1, a.id).version == 2
    # events are not facts: two observations with different numbers do not contradict
    obs = ["The sensor in room 4 read 21 degrees", "The sensor in room 4 read 23 degrees"]
    c = shard.put_many(U1, [MemoryNode(content=obs[0], scope=U1.scope)], embedder.encode(obs[:1]))[0]
    d = shard.put_many(U1, [MemoryNode(content=obs[1], scope=U1.scope)], embedder.encode(obs[1:]))[0]
    assert d.contradicts == () and shard.get(U1, c.id).version == 1


def test_broadcast_source_checks_owner_and_is_idempotent(shard, embedder):
    note = shard.put_many(U1, [MemoryNode(content="cache TTL should be 5 minutes", scope=U1.scope,
                                          confidence=0.8)], embedder.encode(["cache TTL should be 5 minutes"]))[0]
    copy = shard.broadcast_source(U1, note.id, "org")
    assert copy.scope == Scope("acme") and copy.parents == (note.id,)
    assert copy.confidence == pytest.approx(0.72) and copy.source == "broadcast:planner"
    first = shard.put_broadcast(U1, copy)
    second = shard.put_broadcast(U1, shard.broadcast_source(U1, note.id, "org"))
    assert first.id == second.id and shard.store.count() == 2
    assert shard.published[-1].kind is EventKind.BROADCAST
    other_agent = Context("acme", "u1", "writer", "s1")
    with pytest.raises(ScopeViolation):
        shard.broadcast_source(other_agent, note.id, "org")  # cannot see the agent's memory
    user_note = shard.put_many(U1, [MemoryNode(content="u1 likes tea", scope=USER)],
                               embedder.encode(["u1 likes tea"]))[0]
    with pytest.raises(ScopeViolation):  # can see it, but is not its owner
        shard.broadcast_source(Context("acme", "u2", "x"), user_note.id, "org")
    with pytest.raises(InvalidRequest):
        shard.broadcast_source(U1, first.id, "org")  # already org-wide: nothing to widen
    with pytest.raises(InvalidRequest):
        shard.broadcast_source(U1, note.id, "session")
    with pytest.raises(MemoryNotFound):
        shard.broadcast_source(U1, "00000000-0000-0000-0000-000000000000", "org")


def test_group_commit_resolves_in_order_and_is_all_or_nothing(shard, embedder, clock):
    values = ["Build tool is Bazel", "Build tool is Make", "Build tool is Bazel", "Build tool is Ninja"]
    vecs = embedder.encode(values)
    nodes = [MemoryNode(content=v, scope=USER, key=KEY, kind=MemoryKind.SEMANTIC, confidence=c,
                        valid_from=clock.now() + i * DAY) for i, (v, c) in enumerate(zip(values, [0.9, 0.2, 0.5, 0.95],
                                                                                               strict=True))]
    results = shard.assert_facts(U1, nodes, vecs)
    assert [r.outcome for r in results] == ["created", "rejected", "reinforced", "superseded"]
    assert [r.fact_seq for r in results] == [1, 2, 3, 4]
    assert shard.store.slot(USER.key, KEY) == (results[3].node.id, 4)
    bazel = shard.get(U1, results[0].node.id)
    assert bazel.status is MemoryStatus.DEPRECATED and results[1].node.id in bazel.contradicts
    assert shard.store.get(bazel.id).version == bazel.version
    assert [e.data["outcome"] for e in shard.history(U1, KEY, USER)] == [r.outcome for r in results]
    before = (shard.store.count(), shard.store.slot(USER.key, KEY))
    bad = [replace(nodes[0], id=MemoryNode(content="x", scope=USER).id), replace(nodes[1], confidence=7.0)]
    with pytest.raises(InvalidMemory):
        shard.assert_facts(U1, bad, vecs[:2])
    assert (shard.store.count(), shard.store.slot(USER.key, KEY)) == before


def test_configured_judge_reaches_the_shard(tmp_path, embedder):
    from memorybus import Config
    from memorybus.shard.build import open_shard

    # one shard: it owns every scope (a shard refuses memories of scopes routed elsewhere)
    cfg = Config.embedded(tmp_path, num_shards=1, bus=BusPolicy(judge=lambda new, old: "Fridays" in new.content))
    shard = open_shard(cfg, "shard-0")
    # no negation, no numbers: the default rule would not call these a contradiction
    texts = ["The team ships releases on Thursdays", "The team ships releases on Fridays"]
    nodes = [MemoryNode(content=t, scope=U1.scope, kind=MemoryKind.SEMANTIC) for t in texts]
    a = shard.put_many(U1, nodes[:1], embedder.encode(texts[:1]))[0]
    b = shard.put_many(U1, nodes[1:], embedder.encode(texts[1:]))[0]
    assert a.id in b.contradicts
    shard.close()
    plain = open_shard(Config.embedded(tmp_path / "plain", num_shards=1), "shard-0")
    c = plain.put_many(U1, nodes[:1], embedder.encode(texts[:1]))[0]
    d = plain.put_many(U1, nodes[1:], embedder.encode(texts[1:]))[0]
    assert c.id not in d.contradicts
    plain.close()


def test_a_shard_holding_nothing_the_caller_sees_answers_empty_and_still_checks_input(shard, embedder):
    """A recall's other shards (e.g. the org's, where the caller's org has no memory) answer
    [] without searching; a bad vector or k is refused there all the same."""
    other = Context("globex", "u9")
    text = "The release train leaves on Thursdays"
    shard.put_many(other, [MemoryNode(content=text, scope=Scope("globex", "u9"))], embedder.encode([text]))
    q = embedder.encode(["when does the release train leave?"])[0]
    assert shard.search(U1, q, 5, query="when does the release train leave?") == []
    assert [h.node.content for h in shard.search(other, q, 5, query="release train")] == [text]
    with pytest.raises(InvalidRequest):
        shard.search(U1, q[:10], 5, query="release train")
    with pytest.raises(InvalidRequest):
        shard.search(U1, q, 0, query="release train")
    shard.delete(other, shard.search(other, q, 1)[0].node.id)  # gone: the scope holds nothing again
    assert shard.search(other, q, 5, query="release train") == []
