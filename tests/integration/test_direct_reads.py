"""Recalls over the shards' direct channels (memorybus.actors.direct) on a local Ray:
the same answers as the Ray call, the same isolation, the same errors, and a
fallback that survives a shard actor's restart."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import ray

import memorybus as mb
from memorybus import Config, Context, actors
from memorybus.actors import direct
from memorybus.retrieval.wire import RecallRequest, pack_request, unpack_hits, vector_bytes

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300),
              pytest.mark.skipif(not direct.supported(), reason="direct channels need Linux")]


@pytest.fixture(scope="module")
def bus(ray_local, tmp_path_factory):
    cfg = Config.embedded(tmp_path_factory.mktemp("direct"), num_shards=2, namespace="direct_t",
                          touch_flush_seconds=0.0, embedder_num_cpus=0.5)
    b = mb.connect(cfg)
    yield b
    b.shutdown()


def org() -> str:
    return f"org{uuid.uuid4().hex[:8]}"


def served(bus) -> list[int]:
    shards = [actors.handle(bus.config, "shard", i) for i in range(bus.config.num_shards)]
    return [s["process"]["direct_recalls"] for s in ray.get([h.stats.remote() for h in shards], timeout=60)]


def seed(bus, o):
    ctx = Context(o, "u1", "planner", "s1")
    bus.remember("the deploy window is Tuesday 14:00 UTC", ctx, scope="org")
    bus.remember("Ana prefers tea over coffee", ctx, scope="user")
    bus.remember("I picked the blue-green rollout for the API", ctx, scope="agent")
    bus.remember("Lunch was a burrito", ctx, scope="session")
    return ctx


def test_a_driver_recall_goes_over_the_direct_channel_and_answers_as_ray_does(bus):
    ctx = seed(bus, org())
    over_ray = mb.MemoryBus(bus.config.with_(direct_reads=False))
    queries = ["when is the deploy window?", "what does Ana drink?", "which rollout did the planner pick?",
               "what is the capital of France?"]
    before = served(bus)
    direct_hits = [[(h.node.id, round(h.score, 6), round(h.relevance, 6)) for h in bus.recall(q, ctx, k=5)]
                   for q in queries]
    middle = served(bus)
    ray_hits = [[(h.node.id, round(h.score, 6), round(h.relevance, 6)) for h in over_ray.recall(q, ctx, k=5)]
                for q in queries]
    after = served(bus)
    assert direct_hits == ray_hits
    assert direct_hits[0] and direct_hits[3] == []  # real answers, and nothing for the unrelated one
    owners = bus._owners(ctx)
    assert sum(middle) - sum(before) == len(queries) * len(owners)  # every shard call went direct
    assert after == middle  # direct_reads=False: through Ray only
    asyncio.run(bus.recall_async("deploy window", ctx))  # an async recall goes through Ray
    assert served(bus) == after


def test_context_for_and_filters_take_the_direct_path_too(bus):
    ctx = seed(bus, org())
    before = sum(served(bus))
    block = bus.context_for("when is the deploy window?", ctx, token_budget=200)
    assert "Tuesday 14:00" in block.text
    hits = bus.recall("rollout", ctx, kinds=["episodic"], k=3)
    assert all(h.node.kind.value == "episodic" for h in hits)
    assert sum(served(bus)) > before


def test_the_shard_enforces_visibility_on_a_hand_made_request_over_the_channel(bus):
    """A caller that bypasses the client and writes its own request still sees only what
    its context may see: the shard checks, not the transport."""
    o = org()
    secret = bus.remember("the acquisition closes on Friday", Context(o, "ceo"), scope="user")
    outsider = Context(org(), "ceo")
    vector = bus.embed(["the acquisition closes on Friday"])[0]
    blob = pack_request(RecallRequest(outsider, 10, None, None, "acquisition", None, vector=vector_bytes(vector)))
    shard = actors.handle(bus.config, "shard", bus._router.shard_for(secret.scope.key))
    info = ray.get(shard.direct_channel.remote(), timeout=60)
    ch = direct.Channel(info.address)
    try:
        hits = unpack_hits(ch.receive(ch.send(blob), 30))
        assert secret.id not in [h.node.id for h in hits]
        colleague = Context(o, "ceo")
        blob = pack_request(RecallRequest(colleague, 10, None, None, "acquisition", None, vector=vector_bytes(vector)))
        assert secret.id in [h.node.id for h in unpack_hits(ch.receive(ch.send(blob), 30))]
    finally:
        ch.close()


def test_a_bad_request_over_the_channel_raises_invalid_request_and_the_shard_serves_on(bus):
    shard = actors.handle(bus.config, "shard", 0)
    info = ray.get(shard.direct_channel.remote(), timeout=60)
    assert info.node_id == ray.get_runtime_context().get_node_id()
    ch = direct.Channel(info.address)
    try:
        with pytest.raises(mb.InvalidRequest, match="not a packed recall request"):
            ch.receive(ch.send(b"\x80\x05garbage"), 30)
        ctx = seed(bus, org())
        assert bus.recall("deploy window", ctx, k=1)[0].node.content.startswith("the deploy window")
    finally:
        ch.close()


def test_a_restarted_shard_is_reached_through_ray_then_over_its_new_channel(bus):
    ctx = seed(bus, org())
    assert bus.recall("deploy window", ctx, k=1)  # channels known
    index = bus._router.shard_for(ctx.visible_scopes()[0].key)  # the org scope's shard
    shard = actors.handle(bus.config, "shard", index)
    old_pid = ray.get(shard.pid.remote(), timeout=60)
    old_address = bus._channels[index][1].address
    ray.kill(shard, no_restart=False)
    deadline = time.monotonic() + 120
    while True:  # the restart is asynchronous: wait for the new process
        try:
            if ray.get(shard.pid.remote(), timeout=10) != old_pid:
                break
        except ray.exceptions.RayError:
            pass
        assert time.monotonic() < deadline
        time.sleep(0.2)
    hits = bus.recall("when is the deploy window?", ctx, k=1)  # the old channel is gone: through Ray
    assert hits[0].node.content == "the deploy window is Tuesday 14:00 UTC"
    assert bus._channels[index][1].broken
    before = served(bus)[index]
    hits = bus.recall("when is the deploy window?", ctx, k=1)  # asks for the new channel, uses it
    assert hits[0].node.content == "the deploy window is Tuesday 14:00 UTC"
    assert served(bus)[index] == before + 1
    assert bus._channels[index][1].address != old_address

