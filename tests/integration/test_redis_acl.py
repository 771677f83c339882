"""A Redis store over a server that admits only ACL users (the default user off), and
the durability check at connect: a server that does not fsync every write is refused
unless the config says otherwise. The password never shows in an error, a repr, an
identity or the shard's stats.

Storage layer only (no Ray): the driver's ``connect`` opens shard 0's store through
the same ``open_store`` (``reshard.recorded_num_shards``) before any actor starts.
"""

from __future__ import annotations

import logging
import pickle
import uuid
from pathlib import Path
from typing import Any

import pytest
import redis

from memorybus import Config, MemoryNode, Scope
from memorybus.errors import ConfigError, StoreUnavailable
from memorybus.shard.build import open_shard
from memorybus.storage import WriteBatch
from memorybus.storage.factory import open_store
from memorybus.storage.kv import RedisKV
from memorybus.storage.redis import RedisStore
from memorybus.storage.reshard import recorded_num_shards

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]


def node(text: str) -> MemoryNode:
    return MemoryNode(content=text, scope=Scope("acme", "u1"), version=1, created_at=1.0, last_accessed=1.0,
                      valid_from=1.0)


def config(url: str, tmp_path: Path, **kw: Any) -> Config:
    return Config.redis(url, namespace=f"acl{uuid.uuid4().hex[:8]}", data_dir=str(tmp_path / "data"), **kw)


def shown(exc: BaseException) -> str:
    """Everything an error shows: its message, repr, args and pickled form."""
    return f"{exc} {exc!r} {exc.args!r} {pickle.dumps(exc)!r}"


def test_the_store_connects_as_the_acl_user_and_the_default_user_is_off(acl_redis, tmp_path):
    server = acl_redis()
    assert server.url.startswith(f"redis://memorybus:{server.password}@127.0.0.1:")
    store = open_store(config(server.url, tmp_path), "shard-0")
    try:
        assert store.durability == "config"  # appendfsync read and found 'always'
        n = node("written as the memorybus user")
        store.commit(WriteBatch(puts=[n]))
        assert store.get(n.id).content == "written as the memorybus user"
        assert store.count() == 1 and store.iter_all() is not None
    finally:
        store.close()
    # the hub's key-value state on the same server, as the same user
    kv = RedisKV(server.url, "mb:{acl:bus-0}:kv")
    kv.put_many({"a": b"1"})
    assert kv.get("a") == b"1"
    kv.close()
    # the default user is off: no credentials, or the default user with any password, get nothing
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=server.port).get("x")
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=server.port, password=server.password).ping()
    # and the bus's user may not run the dangerous commands
    bus = redis.Redis(port=server.port, username="memorybus", password=server.password)
    for command in (("FLUSHALL",), ("CONFIG", "SET", "appendfsync", "no"), ("SHUTDOWN",), ("KEYS", "*")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            bus.execute_command(*command)
    assert server.admin().config_get("appendfsync")["appendfsync"] == "always"
    assert server.admin().dbsize() > 0  # the writes above are there


def test_acknowledged_writes_survive_kill_9_with_the_default_user_off(acl_redis, tmp_path):
    # Lua writes reach the AOF as MULTI/EXEC blocks, which Redis 7.0 replays with the
    # default user's permissions (redis/redis#14541): a default user that is off *and*
    # stripped of its permissions would make this restart drop every record silently
    server = acl_redis()
    cfg = config(server.url, tmp_path)
    store = open_store(cfg, "shard-0")
    nodes = [node(f"acknowledged {i}") for i in range(5)]
    for n in nodes:
        store.commit(WriteBatch(puts=[n]))
    store.close()
    server.kill()
    server.start()
    store = open_store(cfg, "shard-0")
    try:
        assert [store.get(n.id).content for n in nodes] == [f"acknowledged {i}" for i in range(5)]
        assert store.count() == 5
    finally:
        store.close()


def test_a_wrong_password_is_refused_without_showing_any_password(acl_redis, tmp_path):
    server = acl_redis()
    wrong = "wrong-" + uuid.uuid4().hex
    for url in (server.url_with(wrong), f"redis://memorybus@127.0.0.1:{server.port}/0?password={wrong}"):
        with pytest.raises(StoreUnavailable) as caught:
            open_store(config(url, tmp_path), "shard-0")
        text = shown(caught.value)
        assert "AuthenticationError" in text and f"memorybus@127.0.0.1:{server.port}" in text
        assert wrong not in text and server.password not in text
        with pytest.raises(StoreUnavailable) as caught_kv:
            RedisKV(url, "mb:{acl:bus-0}:kv")
        assert wrong not in shown(caught_kv.value)
    # a URL that does not parse is never echoed: its parts cannot be told apart
    broken = f"redis://memorybus:{wrong}/x@127.0.0.1:{server.port}/0"
    with pytest.raises(ConfigError) as bad:
        Config.redis(broken)
    assert wrong not in shown(bad.value)
    with pytest.raises(ConfigError) as bad_store:
        RedisStore(broken, "acl", "shard-0")
    assert wrong not in shown(bad_store.value)
    assert server.admin().dbsize() == 0  # nothing was written


def test_the_password_is_in_no_repr_identity_or_stats(acl_redis, tmp_path):
    server = acl_redis()
    cfg = config(server.url, tmp_path)
    for text in (repr(cfg), str(cfg), repr(cfg.storage_identity())):
        assert server.password not in text
        assert f"memorybus@127.0.0.1:{server.port}/0" in text
    assert cfg.redis_url == server.url  # the config itself keeps it: the stores need it
    assert pickle.loads(pickle.dumps(cfg)).redis_url == server.url  # as actors receive it
    shard = open_shard(cfg, "shard-0")  # what a shard actor runs; its stats() serve bus.stats()
    try:
        assert server.password not in repr(shard.stats())
    finally:
        shard.close()


@pytest.mark.parametrize(
    ("appendonly", "appendfsync", "said"),
    [("yes", "everysec", "appendfsync everysec"), ("yes", "no", "appendfsync no"), ("no", "always", "appendonly no")],
)
def test_a_server_that_does_not_fsync_every_write_is_refused_unless_allowed(
    acl_redis, tmp_path, appendonly, appendfsync, said
):
    server = acl_redis(appendonly=appendonly, appendfsync=appendfsync)
    cfg = config(server.url, tmp_path)
    with pytest.raises(ConfigError) as caught:
        open_store(cfg, "shard-0")
    text = shown(caught.value)
    assert said in text and "redis_require_fsync=False" in text and server.password not in text
    with pytest.raises(ConfigError):
        recorded_num_shards(cfg)  # connect's first look at the stores, before any actor
    assert server.admin().dbsize() == 0  # refused before anything was written
    # the config can accept it, explicitly
    store = open_store(config(server.url, tmp_path, redis_require_fsync=False), "shard-0")
    try:
        assert store.durability == "unchecked"
        n = node("accepted on a server that may lose it")
        store.commit(WriteBatch(puts=[n]))
        assert store.get(n.id) is not None
    finally:
        store.close()
    with pytest.raises(ConfigError, match="redis_require_fsync"):
        Config.redis(server.url, redis_require_fsync="no")  # type: ignore[arg-type]


def test_a_user_that_may_not_run_config_is_checked_by_info(acl_redis, tmp_path, caplog):
    no_config = "+@all -@dangerous +info"
    server = acl_redis(rules=no_config)
    with caplog.at_level(logging.WARNING, logger="memorybus.storage.redis_durability"):
        store = open_store(config(server.url, tmp_path), "shard-0")
    store.close()
    assert store.durability == "info"  # AOF on: opened, the fsync policy unverifiable
    assert "cannot be read" in caplog.text and server.password not in caplog.text
    # AOF off, seen through INFO alone: refused
    off = acl_redis(appendonly="no", rules=no_config)
    with pytest.raises(ConfigError, match="aof_enabled=0"):
        open_store(config(off.url, tmp_path), "shard-0")
    # neither CONFIG nor INFO: nothing can be checked, so nothing is assumed
    blind = acl_redis(rules="+@all -@dangerous")
    with pytest.raises(ConfigError, match="neither CONFIG GET nor INFO") as caught:
        open_store(config(blind.url, tmp_path), "shard-0")
    assert blind.password not in shown(caught.value)
    store = open_store(config(blind.url, tmp_path, redis_require_fsync=False), "shard-0")
    store.close()
