"""Recalls over the shards' direct channels (memorybus.actors.direct) on a local Ray:
the same answers as the Ray call, the same credentials and isolation, the same
errors, a fallback that survives a shard actor's restart, and a channel a hostile
process of the same user cannot use: no code runs from a pickle, another user's
memories stay out of reach, floods of connections and frames stay bounded."""

from __future__ import annotations

import asyncio
import pickle
import socket
import time
import uuid

import pytest
import ray

import memorybus as mb
from memorybus import Config, Context, actors
from memorybus.actors import direct, frames
from memorybus.retrieval.wire import RecallRequest, pack_request, unpack_hits, vector_bytes

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300),
              pytest.mark.skipif(not direct.supported(), reason="direct channels need Linux")]


@pytest.fixture(scope="module")
def bus(ray_local, tmp_path_factory):
    cfg = Config.embedded(tmp_path_factory.mktemp("direct"), num_shards=2, namespace="direct_t",
                          touch_flush_seconds=0.0, embedder_num_cpus=0.5)
    b = mb.connect(cfg)
    assert b.warm_up()  # queries embedded here (the direct path), not by the embedder actor
    yield b
    b.shutdown()


def org() -> str:
    return f"org{uuid.uuid4().hex[:8]}"


def shard(bus, i):
    return actors.handle(bus.config, "shard", i)


def process(bus) -> list[dict]:
    handles = [shard(bus, i) for i in range(bus.config.num_shards)]
    return [s["process"] for s in ray.get([h.stats.remote(bus._credential) for h in handles], timeout=60)]


def served(bus) -> list[int]:
    return [p["direct_recalls"] for p in process(bus)]


def proc_status(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith(field + ":")).split()[1])


def seed(bus, o):
    ctx = Context(o, "u1", "planner", "s1")
    bus.remember("the deploy window is Tuesday 14:00 UTC", ctx, scope="org")
    bus.remember("Ana prefers tea over coffee", ctx, scope="user")
    bus.remember("I picked the blue-green rollout for the API", ctx, scope="agent")
    bus.remember("Lunch was a burrito", ctx, scope="session")
    return ctx


def channel_of(bus, index, credential):
    info = ray.get(shard(bus, index).direct_channel.remote(credential), timeout=60)
    assert info.node_id == ray.get_runtime_context().get_node_id()
    return info, direct.Channel(info.address, credential)


def raw(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(address)
    sock.settimeout(10)
    return sock


def greeted(address: str, credential: str) -> socket.socket:
    sock = raw(address)
    sock.sendall(frames.hello(credential))
    assert sock.recv(5) == direct._ANSWER.pack(direct._OK, 0)
    return sock


def feed(sock: socket.socket, chunks: list[bytes]) -> None:
    for chunk in chunks:
        sock.sendall(chunk)


def test_an_agent_recall_goes_over_the_direct_channel_and_answers_as_ray_does(bus):
    ctx = seed(bus, org())
    agent = bus.as_agent(bus.issue_credential(ctx.org, "u1", "planner", "s1"))
    over_ray = bus.as_agent(agent._credential)
    over_ray.config = over_ray.config.with_(direct_reads=False)
    queries = ["when is the deploy window?", "what does Ana drink?", "which rollout did the planner pick?",
               "what is the capital of France?"]
    before = served(bus)
    direct_hits = [[(h.node.id, h.score, h.relevance) for h in agent.recall(q, k=5)] for q in queries]
    middle = served(bus)
    ray_hits = [[(h.node.id, h.score, h.relevance) for h in over_ray.recall(q, k=5)] for q in queries]
    after = served(bus)
    # the same hits in the same order, the same scores up to float noise (each recall
    # embeds its query again: the last bits may differ, and rounding to 6 places
    # once split 0.4351815 either way)
    assert [[i for i, _, _ in hits] for hits in direct_hits] == [[i for i, _, _ in hits] for hits in ray_hits]
    for d, r in zip(direct_hits, ray_hits, strict=True):
        assert [x for _, s, rel in d for x in (s, rel)] == pytest.approx([x for _, s, rel in r for x in (s, rel)],
                                                                          abs=1e-5)
    assert len(direct_hits[0]) >= 1 and direct_hits[3] == []  # real answers, and nothing for the unrelated one
    owners = bus._owners(ctx)
    assert sum(middle) - sum(before) == len(queries) * len(owners)  # every shard call went direct
    assert after == middle  # direct_reads=False: through Ray only
    asyncio.run(agent.recall_async("deploy window"))  # an async recall goes through Ray
    assert served(bus) == after
    assert bus.recall("deploy window", ctx, k=1)  # the operator's handle goes direct too
    assert sum(served(bus)) == sum(after) + len(owners)


def test_context_for_and_filters_take_the_direct_path_too(bus):
    ctx = seed(bus, org())
    before = sum(served(bus))
    block = bus.context_for("when is the deploy window?", ctx, token_budget=200)
    assert "Tuesday 14:00" in block.text
    hits = bus.recall("rollout", ctx, kinds=["episodic"], k=3)
    assert all(h.node.kind.value == "episodic" for h in hits)
    assert sum(served(bus)) > before


def test_a_hand_made_request_for_another_users_memories_gets_nothing(bus):
    """A caller that bypasses the client and writes its own request gets what its own
    credential allows, no more: the shard admits the request's credential, and the
    connection's."""
    o = org()
    secret = bus.remember("the acquisition closes on Friday", Context(o, "ceo"), scope="user")
    index = bus._router.shard_for(secret.scope.key)
    vector = vector_bytes(bus.embed(["the acquisition closes on Friday"])[0])
    mine = bus.issue_credential(o, "intern")
    ceo = bus.issue_credential(o, "ceo")

    def ask(ch, context):
        request = RecallRequest(context, 10, None, None, "acquisition", None, vector=vector)
        return [h.node.id for h in unpack_hits(ch.receive(ch.send(pack_request(request)), 30))]

    _, ch = channel_of(bus, index, mine)
    try:
        with pytest.raises(mb.NotAuthenticated):
            ask(ch, Context(o, "ceo"))  # no credential at all
        with pytest.raises(mb.NotAuthenticated):
            ask(ch, Context(o, "ceo", credential=ceo[:-4] + "AAAA"))  # a forged one
        with pytest.raises(mb.NotAuthorized, match="outside the credential"):
            ask(ch, Context(o, "ceo", credential=mine))  # its own, naming another user
        with pytest.raises(mb.NotAuthorized, match="another credential than its connection"):
            ask(ch, Context(o, "ceo", credential=ceo))  # one it holds, but not its connection's
        assert secret.id not in ask(ch, Context(o, "intern", credential=mine))
        assert ch._idle and not ch.broken  # refused requests leave the connection usable
    finally:
        ch.close()
    _, owner = channel_of(bus, index, ceo)
    try:
        assert secret.id in ask(owner, Context(o, "ceo", credential=ceo))  # the same request for its owner
    finally:
        owner.close()
    assert served(bus)[index] >= 2


def test_a_pickle_runs_no_code_in_the_shard(bus, tmp_path):
    class Plant:
        def __reduce__(self):
            return (open, (str(tmp_path / "planted"), "w"))

    blob = pickle.dumps(Plant())
    credential = bus.issue_credential(org(), "u1")
    info, ch = channel_of(bus, 0, credential)
    try:
        sock = raw(info.address)  # as the hello
        sock.sendall(frames.frame(blob))
        status, size = direct._ANSWER.unpack(direct._read_exact(sock, direct._ANSWER.size))
        assert status == direct._REFUSED and sock.recv(size + 16) and sock.recv(16) == b""
        with pytest.raises(mb.InvalidRequest, match="not a packed recall request"):  # as a request
            ch.receive(ch.send(blob), 30)
        with pytest.raises(ray.exceptions.RayTaskError) as bad:  # through Ray
            ray.get(shard(bus, 0).recall.remote(blob), timeout=60)
        assert isinstance(bad.value.cause, mb.InvalidRequest)
    finally:
        ch.close()
    assert not (tmp_path / "planted").exists()


def test_floods_of_connections_and_frames_stay_bounded_and_the_channel_serves_on(bus):
    ctx = seed(bus, org())
    agent = bus.as_agent(bus.issue_credential(ctx.org, "u1", "planner", "s1"))
    index = bus._router.shard_for(ctx.visible_scopes()[0].key)
    pid = ray.get(shard(bus, index).pid.remote(), timeout=60)
    info, _ = channel_of(bus, index, agent._credential)
    threads, rss = proc_status(pid, "Threads"), proc_status(pid, "VmRSS")
    # 200 half-open connections (no hello): a few wait for their hello, the rest are shut at once
    half_open = [raw(info.address) for _ in range(200)]
    time.sleep(0.5)
    assert proc_status(pid, "Threads") - threads <= 8 + 2
    deadline = time.monotonic() + 15
    while process(bus)[index]["direct_pending"]:  # the hello deadline (2 s) lets the rest go
        assert time.monotonic() < deadline
        time.sleep(0.2)
    for sock in half_open:
        sock.settimeout(1)
        assert sock.recv(16) == b""
        sock.close()
    # six 48 MiB frames announced after a good hello: shut before a byte of them is read
    for _ in range(6):
        sock = greeted(info.address, agent._credential)
        sock.sendall(direct._HEAD.pack(48 << 20))
        with pytest.raises(OSError):
            feed(sock, [b"\0" * (1 << 20)] * 48)
        sock.close()
    # frames under the cap left unfinished: each is cut off within 2 s of its first byte
    partial = [greeted(info.address, agent._credential) for _ in range(20)]
    for sock in partial:
        sock.sendall(direct._HEAD.pack(direct.MAX_REQUEST) + b"\0" * (direct.MAX_REQUEST // 2))
    assert proc_status(pid, "VmRSS") - rss < 64 << 10  # KiB: at most 20 frames' worth, not 6 x 48 MiB
    for sock in partial:
        sock.settimeout(5)
        assert sock.recv(16) == b""
        sock.close()
    assert proc_status(pid, "Threads") - threads <= 4
    before = served(bus)[index]
    assert agent.recall("when is the deploy window?", k=1)[0].node.content.startswith("the deploy window")
    assert served(bus)[index] == before + 1  # still served directly


def test_a_restarted_shard_is_reached_through_ray_then_over_its_new_channel(bus):
    ctx = seed(bus, org())
    assert bus.recall("deploy window", ctx, k=1)  # channels known
    index = bus._router.shard_for(ctx.visible_scopes()[0].key)  # the org scope's shard
    handle = shard(bus, index)
    old_pid = ray.get(handle.pid.remote(), timeout=60)
    old_address = bus._channels[index][1].address
    ray.kill(handle, no_restart=False)
    deadline = time.monotonic() + 120
    while True:  # the restart is asynchronous: wait for the new process
        try:
            if ray.get(handle.pid.remote(), timeout=10) != old_pid:
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
