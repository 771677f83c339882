"""A bus never starts on a store that is not the one it wrote: a deleted or truncated
SQLite file, or a changed shard count, is refused; ``migrate=True`` moves the scopes
to their new shards. Real SQLite files, a real Redis server, real Ray actors."""

import os
import uuid

import pytest

import memorybus as mb
from memorybus import Config, Context
from memorybus.scopes import Router
from tests.conftest import backend_config

pytestmark = [pytest.mark.ray, pytest.mark.redis, pytest.mark.model, pytest.mark.timeout(300)]
SMALL = {"embedder_num_cpus": 0.5}


def config(backend, tmp_path, redis_server, num_shards):
    ns = f"ident_{uuid.uuid4().hex[:6]}"
    return backend_config(backend, tmp_path, redis_server, num_shards=num_shards, namespace=ns, **SMALL)


def fill(bus):
    """40 memories over two scopes on different shards, and a fact asserted twice."""
    for _ in range(100):
        ctx = Context(f"org{uuid.uuid4().hex[:8]}", "u1")
        if Router(bus.config.num_shards).shard_for(ctx.resolve_scope("user").key) != Router(bus.config.num_shards).shard_for(ctx.resolve_scope("org").key):
            break
    stored = bus.remember_many([f"user note {i}: the red file is in drawer {i}" for i in range(20)], ctx)
    stored += bus.remember_many([{"content": f"org rule {i}: room {i} closes at {i + 1} pm", "scope": "org"}
                                 for i in range(20)], ctx)
    bus.assert_fact("office/city", "The office is in Lisbon", ctx, scope="org")
    bus.assert_fact("office/city", "The office moved to Porto", ctx, scope="org", confidence=1.0)
    return ctx, {n.id: n.content for n in stored}


def listed(bus, ctx):
    """What the shards that own the context's scopes hold (a misplaced memory is missing)."""
    return {n.id: n.content for n in bus.list_memories(ctx, limit=1000).memories
            if not n.key}


@pytest.mark.slow
def test_deleted_or_truncated_store_is_refused_until_restored(ray_local, tmp_path, redis_server):
    cfg = config("embedded", tmp_path, redis_server, 2)
    bus = mb.connect(cfg)
    ctx, stored = fill(bus)
    bus.shutdown()
    db = tmp_path / "data" / "shard-0" / "records.sqlite"
    backup = db.read_bytes()
    db.write_bytes(b"")  # truncated
    with pytest.raises(mb.StoreMismatch, match="empty"):
        mb.connect(cfg)
    db.unlink()  # deleted
    with pytest.raises(mb.StoreMismatch, match="missing"):
        mb.connect(cfg)
    db.write_bytes(backup)  # restored from the backup: everything is back
    bus = mb.connect(cfg)
    try:
        assert listed(bus, ctx) == stored
    finally:
        bus.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "steps"), [("embedded", (1, 3)), ("redis", (3,))])
def test_changed_shard_count_is_refused_unless_migrated(ray_local, tmp_path, redis_server, backend, steps):
    from memorybus.storage.reshard import recorded_num_shards

    cfg = config(backend, tmp_path, redis_server, 2)
    bus = mb.connect(cfg)
    ctx, stored = fill(bus)
    history = [(e.seq, e.data["outcome"]) for e in bus.history("office/city", ctx, scope="org")]
    bus.shutdown()
    with pytest.raises(mb.StoreMismatch, match="num_shards=2"):
        mb.connect(cfg.with_(num_shards=steps[0]))
    for shards in steps:  # shrink and grow: every scope ends on the shard that owns it
        bus = mb.connect(cfg.with_(num_shards=shards, migrate=True))
        try:
            assert listed(bus, ctx) == stored
            assert bus.count() == 42
            assert [(e.seq, e.data["outcome"]) for e in bus.history("office/city", ctx, scope="org")] == history
            assert bus.current_fact("office/city", ctx, scope="org").content == "The office moved to Porto"
        finally:
            bus.shutdown()
        assert recorded_num_shards(cfg.with_(num_shards=shards)) == shards  # no migration needed again
    bus = mb.connect(cfg.with_(num_shards=steps[-1]))
    try:
        r = bus.assert_fact("office/city", "The office is in Braga", ctx, scope="org", confidence=1.0)
        assert r.fact_seq == 3  # the fact's sequence goes on where it was
    finally:
        bus.shutdown()


@pytest.mark.slow
def test_a_bus_runs_on_the_model_its_config_names_and_its_data_refuses_another(ray_local, tmp_path,
                                                                                projected_model_path):
    """Another sentence-transformers model (48 dimensions, read from its files) stores and
    recalls; the data directory it wrote then refuses MiniLM, naming both models."""
    cfg = Config.embedded(tmp_path / "data", num_shards=1, namespace=f"model_{uuid.uuid4().hex[:6]}",
                          model_path=projected_model_path, query_encoder="embedder", **SMALL)
    ctx = Context("org-m", "u1")
    with mb.connect(cfg) as bus:
        assert bus.embed(["a beagle"]).shape == (1, 48)
        bus.remember_many(["Ana adopted a beagle named Toby", "The quarterly report is due on Friday"], ctx)
        assert "beagle" in bus.recall("Which dog did Ana adopt?", ctx, k=1)[0].node.content
    with pytest.raises(mb.ConfigError) as err:
        mb.connect(cfg.with_(model_path=None))
    assert projected_model_path in str(err.value) and "all-MiniLM-L6-v2" in str(err.value)
    with mb.connect(cfg) as bus:  # its own model still opens it, the memories there
        assert len(bus.list_memories(ctx, limit=10).memories) == 2
    # the tests' pool of this other model is the module's to stop (only MiniLM's may outlive
    # a module on the shared Ray, see tests/shared_ray.py)
    from memorybus import actors

    assert actors.stop_embedder_pool(cfg.with_(embedder_pool=os.environ["MEMORYBUS_EMBEDDER_POOL"])) == 1
