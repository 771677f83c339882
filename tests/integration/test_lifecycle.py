"""Connecting and closing without traps (issue 14): a namespace's bus is its storage,
a closed handle fails fast with BusClosed, startup reports progress, and the query
model is loaded once, behind connect (during it with query_encoder="local")."""

from __future__ import annotations

import logging
import time

import pytest
import ray

import memorybus as mb
from memorybus import Config, Context, actors
from memorybus.client import life
from memorybus.encoder import embedding as embedding_module

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return tmp_path_factory.mktemp("life")


def test_connect_reports_progress_and_loads_the_query_model_once(ray_local, data, caplog):
    caplog.set_level(logging.INFO, logger="memorybus")
    cfg = Config.embedded(data / "a", num_shards=2, namespace="life_a")
    with mb.connect(cfg) as bus:
        messages = [r.getMessage() for r in caplog.records if r.name == "memorybus"]
        assert any("creating bus 'life_a'" in m for m in messages), messages
        assert any("actors ready" in m for m in messages), messages
        assert any("loading the query model" in m for m in messages), messages
        # connect returned without waiting for this process's query model: it loads
        # behind, and recall embeds with the embedder actor meanwhile (no wait)
        loader = bus._query_loader
        assert loader is not None
        ctx = Context("acme", "u1", "a1")
        bus.remember("The launch is on March 14", ctx)
        if loader.is_alive():
            assert not bus._encodes_queries_here(blocking=True)
        assert bus.recall("when is the launch?", ctx, k=1)[0].node.content == "The launch is on March 14"
        assert bus.warm_up()
        assert not loader.is_alive()
        # loaded once, in the background: the next recalls use it and load nothing
        loaded = dict(embedding_module._SHARED)
        assert any(key.startswith(cfg.resolved_model_path()) for key in loaded)
        assert bus._encodes_queries_here(blocking=True)
        assert bus.recall("when is the launch?", ctx, k=1)[0].node.content == "The launch is on March 14"
        assert loaded == embedding_module._SHARED  # same encoder objects: no second load


def test_a_local_query_encoder_is_loaded_by_connect(ray_local, data):
    cfg = Config.embedded(data / "local", num_shards=1, namespace="life_local", query_encoder="local")
    with mb.connect(cfg) as bus:
        assert bus._query_loader is None  # nothing loads behind: connect waited for it
        assert any(key.startswith(cfg.resolved_model_path()) for key in embedding_module._SHARED)
        assert bus._encodes_queries_here(blocking=True)


def test_a_namespace_running_on_other_storage_is_refused(ray_local, data):
    cfg = Config.embedded(data / "first", num_shards=2, namespace="life_ns")
    with mb.connect(cfg) as first:
        ctx = Context("acme", "u1", "a1")
        first.remember("kept in the first data dir", ctx)
        other = cfg.with_(data_dir=str(data / "OTHER"))
        with pytest.raises(mb.ConfigError, match="already running on") as err:
            mb.connect(other)
        assert str(data / "first") in str(err.value) and str(data / "OTHER") in str(err.value)
        assert not (data / "OTHER").exists()  # nothing was created for the refused config
        with pytest.raises(mb.ConfigError):
            mb.connect(cfg.with_(num_shards=3))  # another routing of the same files
        # the same storage joins the running bus; closing the joiner leaves it running
        with mb.connect(cfg) as joined:
            assert joined.list_memories(ctx).memories[0].content == "kept in the first data dir"
        assert first.count() == 1


def test_closed_bus_raises_bus_closed_quickly(ray_local, data):
    cfg = Config.embedded(data / "c", num_shards=2, namespace="life_close")
    owner = mb.connect(cfg)
    joined = mb.connect(cfg)
    ctx = Context("acme", "u1", "a1")
    owner.remember("written before close", ctx)
    joined.close()
    assert joined.closed and not owner.closed
    with pytest.raises(mb.BusClosed, match="closed"):
        joined.recall("anything", ctx)
    assert owner.count() == 1  # a joiner's close leaves the bus running
    owner.close()
    owner.close()  # idempotent
    calls = [
        lambda b: b.remember("x", ctx),
        lambda b: b.recall("x", ctx),
        lambda b: b.list_memories(ctx),
        lambda b: b.count(),
        lambda b: b.assert_fact("k", "v", ctx),
        lambda b: b.subscribe(ctx, callback=print),
    ]
    for call in calls:
        start = time.monotonic()
        with pytest.raises(mb.BusClosed):
            call(owner)
        assert time.monotonic() - start < 1.0
    # the owner's close stopped the actors: a fresh handle on the same config is told so
    stale = mb.MemoryBus(cfg)
    with pytest.raises(mb.BusClosed, match="no running actor"):
        stale.count()
    with pytest.raises(mb.BusClosed), owner:
        pass


def test_an_actor_ray_cannot_place_is_named_instead_of_a_silent_wait(ray_local, data, caplog):
    from memorybus import actors

    caplog.set_level(logging.INFO, logger="memorybus")
    cfg = Config.embedded(data / "p", num_shards=1, namespace="life_place", shard_resources={"no_such_node": 0.01})
    shard = actors.create_shard(cfg, 0)
    try:
        with pytest.raises(mb.ActorUnavailable, match=r"actors not ready after 2s: shard-0; .*shard_resources"):
            life.wait_placed([shard.identity.remote()], ["shard-0"], time.monotonic(), limit=2)
    finally:
        ray.kill(shard)
    assert any("still waiting for shard-0" in r.getMessage() for r in caplog.records)


def test_closing_a_handle_stops_its_callback_listeners_and_leaves_the_others(ray_local, data):
    """A callback subscription's listener thread ends with its handle: before, it went on
    pulling from the hub of a closed handle for the life of the process."""
    bus = mb.connect(Config.embedded(data / "l", num_shards=1, namespace="life_listen"))
    ctx = Context("acme", "u1", "a1")
    other = bus.with_timeout(30)  # another handle on the same bus, in this process
    got: list[str] = []
    kept = other.subscribe(ctx, callback=lambda batch: got.extend(e.node.content for e in batch if e.node))
    try:
        with bus.with_timeout(30) as short:
            mine = short.subscribe(ctx, callback=lambda batch: None)
            assert mine.alive
        deadline = time.monotonic() + 5
        while mine.alive and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not mine.alive, "the closed handle's listener still runs"
        assert kept.alive  # the other handle's goes on, and delivers
        bus.remember("after the other handle closed", ctx)
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            time.sleep(0.1)
        assert got == ["after the other handle closed"]
    finally:
        bus.close()


@pytest.mark.slow
def test_a_script_that_ends_while_the_query_model_loads_exits_cleanly(ray_local, tmp_path):
    """A script that connects, recalls once and ends while its query model is still loading
    behind connect waits for the load and exits 0 without a traceback (a daemon thread
    stopped inside torch's import makes the interpreter print torch's finalizers failing).
    The script joins the tests' shared Ray through ``RAY_ADDRESS`` (a Ray of its own would
    add a Ray start and a model load to what is tested: neither is)."""
    import os
    import subprocess
    import sys

    script = (
        "import memorybus as mb\n"
        f"bus = mb.connect(mb.Config.embedded({str(tmp_path / 'd')!r}, num_shards=1, namespace='life_exit'))\n"
        "ctx = mb.Context('acme', 'u1', 'a1')\n"
        "bus.remember('the launch is on Friday', ctx)\n"
        "print('LOADING' if bus._query_loader.is_alive() else 'LOADED')\n"
        "print(bus.recall('when is the launch?', ctx, k=1)[0].node.content)\n"
    )
    env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240, check=False,
                          env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the launch is on Friday" in done.stdout
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr[-3000:]


def test_after_ray_shutdown_calls_raise_bus_closed_and_never_start_ray(ray_local, data):
    # last in the module: it leaves Ray
    bus = mb.connect(Config.embedded(data / "s", num_shards=1, namespace="life_shut"))
    ctx = Context("acme", "u1", "a1")
    bus.remember("before shutdown", ctx)
    listening = bus.subscribe(ctx, callback=lambda batch: None)  # a listener thread, pulling
    assert listening.alive
    # its hub gone (the bus shut down from another process): the listener goes on asking
    ray.kill(actors.handle(bus.config, "hub"), no_restart=True)
    deadline = time.monotonic() + 30
    while not listening.errors and time.monotonic() < deadline:
        time.sleep(0.05)
    assert listening.errors and listening.alive
    ray.shutdown()
    start = time.monotonic()
    with pytest.raises(mb.BusClosed, match="not connected to Ray"):
        bus.recall("before", ctx)
    with pytest.raises(mb.BusClosed):
        bus.remember("after", ctx)
    assert time.monotonic() - start < 1.0
    # the listener's next pull must not start a new local Ray (Ray's calls do, on a stale
    # handle, from any thread): it sees the process left Ray and stops
    deadline = time.monotonic() + 5
    while listening.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not listening.alive
    time.sleep(1.0)
    assert not ray.is_initialized()
    assert len(listening.errors) <= 100  # bounded, whatever it met
    bus.close()  # still fine: nothing to release
