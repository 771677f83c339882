"""Server URLs are shown without their passwords: redact_url, Config's repr and identity,
and the checks that refuse a Redis URL never echo what they refuse."""

from __future__ import annotations

import pickle

import pytest

from memorybus import Config
from memorybus.config.urls import check_redis_url, redact_url
from memorybus.errors import ConfigError

SECRET = "Zq9-secret-7f3"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://memorybus:{SECRET}@10.0.0.1:6380/0", "redis://memorybus@10.0.0.1:6380/0"),
        (f"redis://:{SECRET}@10.0.0.1:6380/0", "redis://10.0.0.1:6380/0"),
        (f"rediss://memorybus:{SECRET}@cache.example:6380/1", "rediss://memorybus@cache.example:6380/1"),
        (f"redis://10.0.0.1:6380/0?password={SECRET}&socket_timeout=2", "redis://10.0.0.1:6380/0?socket_timeout=2"),
        (f"unix://memorybus:{SECRET}@/run/redis.sock?db=0", "unix://memorybus@/run/redis.sock?db=0"),
        (f"redis://memorybus:{SECRET.replace('-', '%40')}@10.0.0.1:6380/0", "redis://memorybus@10.0.0.1:6380/0"),
        ("redis://10.0.0.1:6380/0", "redis://10.0.0.1:6380/0"),
        (None, None),
        ("", ""),
    ],
)
def test_redact_url_drops_every_password(url, shown):
    assert redact_url(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        f"redis://memorybus:{SECRET}/x@10.0.0.1:6380/0",  # '/' in the password, not encoded
        f"redis://memorybus:{SECRET}#x@10.0.0.1:6380/0",  # '#'
        f"redis://memorybus:{SECRET}",  # no host: the password reads as a port
    ],
)
def test_a_url_that_does_not_parse_is_not_echoed(url):
    assert SECRET not in str(redact_url(url))
    with pytest.raises(ConfigError) as caught:
        Config.redis(url)
    assert SECRET not in f"{caught.value} {caught.value!r} {pickle.dumps(caught.value)!r}"
    assert "percent-encoded" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "said"),
    [(f"http://u:{SECRET}@10.0.0.1/0", "scheme"), (f"redis://:{SECRET}@/0", "no host"), (42, "must be a string")],
)
def test_check_redis_url_refuses_other_urls_without_the_password(url, said):
    with pytest.raises(ConfigError, match=said) as caught:
        check_redis_url(url)
    assert SECRET not in str(caught.value)


def test_config_repr_and_identity_hide_passwords_but_keep_them_for_the_stores():
    cfg = Config.redis(f"redis://memorybus:{SECRET}@10.0.0.1:6380/0", vector_backend="qdrant",
                       qdrant_url=f"https://admin:{SECRET}@qdrant.example:6333")
    for text in (repr(cfg), str(cfg), repr(cfg.storage_identity()), f"{cfg!r}"):
        assert SECRET not in text
    assert "redis_url='redis://memorybus@10.0.0.1:6380/0'" in repr(cfg)
    assert "qdrant_url='https://admin@qdrant.example:6333'" in repr(cfg)
    assert cfg.redis_url is not None and SECRET in cfg.redis_url  # the stores need it
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    # two configs of the same server with other passwords are the same storage
    other = cfg.with_(redis_url="redis://memorybus:another@10.0.0.1:6380/0")
    assert other.storage_identity() == cfg.storage_identity()


def test_redis_require_fsync_is_on_by_default_and_must_be_a_bool():
    assert Config.redis("redis://10.0.0.1:6380/0").redis_require_fsync is True
    assert Config.redis("redis://10.0.0.1:6380/0", redis_require_fsync=False).redis_require_fsync is False
    with pytest.raises(ConfigError, match="redis_require_fsync"):
        Config.redis("redis://10.0.0.1:6380/0", redis_require_fsync=0)
