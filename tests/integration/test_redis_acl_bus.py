"""The whole bus (real Ray actors, the real model) on a Redis that admits only ACL
users: it works as the bus's user, never shows the password, and ``connect`` refuses
a server that does not fsync every write before it starts any actor or writes
anything, unless the config accepts it."""

from __future__ import annotations

import uuid

import pytest

import memorybus as mb
from memorybus import Config, Context, actors

pytestmark = [pytest.mark.ray, pytest.mark.redis, pytest.mark.model, pytest.mark.timeout(300)]
SMALL = {"embedder_num_cpus": 0.5}


def config(url: str, tmp_path, **kw) -> Config:
    return Config.redis(url, data_dir=str(tmp_path / "data"), num_shards=1,
                        namespace=f"acl_{uuid.uuid4().hex[:6]}", **SMALL, **kw)


def test_a_bus_on_an_acl_redis_works_and_never_shows_the_password(ray_local, tmp_path, acl_redis):
    server = acl_redis()
    bus = mb.connect(config(server.url, tmp_path))
    try:
        ctx = Context("acme", "u1")
        bus.remember("The ACL user wrote the quarterly plan", ctx)
        hits = bus.recall("who wrote the quarterly plan?", ctx, k=1)
        assert hits[0].node.content == "The ACL user wrote the quarterly plan"
        shown = [repr(bus.stats()), repr(bus.hub_stats()), repr(bus.config), repr(bus.config.storage_identity())]
        assert bus.stats()["memories"] == 1
        for text in shown:
            assert server.password not in text
    finally:
        bus.shutdown()
    assert server.admin().dbsize() > 0


def test_connect_refuses_a_redis_that_does_not_fsync_every_write(ray_local, tmp_path, acl_redis):
    import ray

    server = acl_redis(appendfsync="everysec")
    cfg = config(server.url, tmp_path)
    with pytest.raises(mb.ConfigError, match="appendfsync everysec") as caught:
        mb.connect(cfg)
    assert server.password not in f"{caught.value} {caught.value!r}"
    with pytest.raises(ValueError):  # refused before any shard actor was created
        ray.get_actor(actors.shard_actor_name(cfg, 0), namespace=cfg.namespace)
    assert server.admin().dbsize() == 0  # and before anything was written
    bus = mb.connect(cfg.with_(redis_require_fsync=False))  # accepted when the config says so
    try:
        bus.remember("Written to a server that may lose a second of writes", Context("acme", "u1"))
        assert bus.count() == 1
    finally:
        bus.shutdown()
