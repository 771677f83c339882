"""Sentinel URLs: parsed into sentinels, master name, database and logins; every
malformed one refused with ConfigError that names no password; redaction drops the
data nodes' and the sentinels' passwords; the WAIT settings are checked."""

from __future__ import annotations

import pytest

from memorybus import Config
from memorybus.config.urls import check_redis_url, parse_sentinel_url, redact_url
from memorybus.errors import ConfigError
from memorybus.storage.redis_client import RedisTLS, open_redis

SECRET = "Zq9-secret-7f3"
SPW = "Sn7-sentinel-pw"


def test_a_full_url_is_parsed():
    u = parse_sentinel_url(f"redis+sentinel://memorybus:{SECRET}%40x@10.0.0.1:26379,10.0.0.2,[::1]:26380/mb-main/3"
                           f"?sentinel_password={SPW}&sentinel_username=watch")
    assert u.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26379), ("::1", 26380))
    assert (u.master, u.db, u.tls) == ("mb-main", 3, False)
    assert (u.username, u.password) == ("memorybus", f"{SECRET}@x")  # percent-decoded
    assert (u.sentinel_username, u.sentinel_password) == ("watch", SPW)
    assert SECRET not in repr(u) and SPW not in repr(u)
    v = parse_sentinel_url("rediss+sentinel://h1/m")
    assert (v.tls, v.db, v.username, v.password, v.sentinels) == (True, 0, None, None, (("h1", 26379),))


@pytest.mark.parametrize(
    ("url", "match"),
    [
        (f"redis+sentinel://u:{SECRET}@/mymaster/0", "no sentinel host"),
        (f"redis+sentinel://u:{SECRET}@h1:26379", "no master name"),
        (f"redis+sentinel://u:{SECRET}@h1:26379/", "no master name"),
        (f"redis+sentinel://u:{SECRET}@h1:26379/m/x", "database 'x'"),
        (f"redis+sentinel://u:{SECRET}@h1:26379/m/0/extra", "/<master-name>/<db>"),
        (f"redis+sentinel://u:{SECRET}@h1:26379/m/", "/<master-name>/<db>"),
        (f"redis+sentinel://u:{SECRET}@h1:99999/m/0", "port '99999'"),
        (f"redis+sentinel://u:{SECRET}@h1:abc/m/0", "port 'abc'"),
        (f"redis+sentinel://u:{SECRET}@h1:1,,h2:2/m/0", "host ''"),
        (f"redis+sentinel://u:{SECRET}@h1:1,h1:1/m/0", "listed twice"),
        (f"redis+sentinel://u:{SECRET}@h1/bad name/0", "master name"),
        (f"redis+sentinel://u:{SECRET}@h1/m/0?sentinel_pasword={SPW}", "unknown option 'sentinel_pasword'"),
        (f"redis+sentinel://u:{SECRET}@h1/m/0?sentinel_password={SPW}&sentinel_password=x", "given twice"),
        (f"redis+sentinel://u:{SECRET}/x@h1:26379/m/0", "credentials do not parse"),  # '/' not encoded
        (f"redis+sentinel://u:{SECRET}?x@h1:26379/m/0", "credentials do not parse"),  # '?'
        (f"redis+sentinel://u:{SECRET}#x@h1:26379/m/0", "credentials do not parse"),  # '#'
        (f"redis+sentinel://u:{SECRET}@h1:26379/m/0#frag", "credentials do not parse"),
    ],
)
def test_bad_sentinel_urls_are_refused_without_the_password(url, match):
    for check in (check_redis_url, Config.redis):
        with pytest.raises(ConfigError, match=match) as exc:
            check(url)
        assert SECRET not in str(exc.value) and SPW not in str(exc.value)
        assert SECRET not in repr(exc.value.args)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis+sentinel://memorybus:{SECRET}@10.0.0.1:26379,10.0.0.2:26379/mb/0?sentinel_password={SPW}",
         "redis+sentinel://memorybus@10.0.0.1:26379,10.0.0.2:26379/mb/0"),
        (f"rediss+sentinel://:{SECRET}@h1,h2/mb", "rediss+sentinel://h1,h2/mb"),
        (f"redis+sentinel://u:{SECRET}/x@h1:26379/m/0", "redis+sentinel://<address that does not parse>"),
    ],
)
def test_redact_drops_both_passwords(url, shown):
    assert redact_url(url) == shown
    cfg_text = repr(Config.redis(url)) if "<" not in shown else ""
    assert SECRET not in cfg_text and SPW not in cfg_text


def test_wait_settings():
    sentinel = f"redis+sentinel://u:{SECRET}@h1/m/0"
    assert Config.redis(sentinel).redis_replicas_to_wait() == 1
    assert Config.redis(sentinel, redis_wait_replicas=0).redis_replicas_to_wait() == 0
    assert Config.redis("redis://h:6379/0").redis_replicas_to_wait() == 0
    assert Config.redis("redis://h:6379/0", redis_wait_replicas=2).redis_replicas_to_wait() == 2
    for bad in (-1, 65, True, 1.5, "1"):
        with pytest.raises(ConfigError, match="redis_wait_replicas"):
            Config.redis(sentinel, redis_wait_replicas=bad)
    for bad_t in (0, -1, 5.0, 10, True):  # store_timeout is 5 s: WAIT must answer before the socket gives up
        with pytest.raises(ConfigError, match="redis_wait_timeout"):
            Config.redis(sentinel, redis_wait_timeout=bad_t)


def test_tls_files_go_with_rediss_sentinel_only(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a connection is made")
    Config.redis(f"rediss+sentinel://u:{SECRET}@h1/m/0", redis_tls_ca=str(ca))
    with pytest.raises(ConfigError, match="not rediss") as exc:
        Config.redis(f"redis+sentinel://u:{SECRET}@h1/m/0", redis_tls_ca=str(ca))
    assert SECRET not in str(exc.value)
    with pytest.raises(ConfigError, match="not rediss\\+sentinel") as exc:
        open_redis(f"redis+sentinel://u:{SECRET}@h1/m/0", tls=RedisTLS(str(ca)))
    assert SECRET not in str(exc.value)
    with pytest.raises(ConfigError, match="redis_tls_ca"):
        open_redis(f"rediss+sentinel://u:{SECRET}@h1/m/0", tls=RedisTLS(str(tmp_path / "gone.pem")))


def test_open_redis_builds_a_verifying_sentinel_client(tmp_path):
    """No command is sent: the client's pool says how it will connect."""
    from redis.sentinel import SentinelConnectionPool, SentinelManagedSSLConnection

    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    client = open_redis(f"rediss+sentinel://memorybus:{SECRET}@h1:1,h2:2/mb/4?sentinel_password={SPW}",
                        tls=RedisTLS(str(ca)), socket_timeout=1.5)
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool) and pool.service_name == "mb"
    assert pool.connection_class is SentinelManagedSSLConnection
    kw = pool.connection_kwargs
    assert (kw["db"], kw["username"], kw["password"], kw["ssl_cert_reqs"], kw["ssl_check_hostname"]) == (
        4, "memorybus", SECRET, "required", True)
    sentinels = pool.sentinel_manager.sentinels
    assert [(s.connection_pool.connection_kwargs["host"], s.connection_pool.connection_kwargs["port"])
            for s in sentinels] == [("h1", 1), ("h2", 2)]
    skw = sentinels[0].connection_pool.connection_kwargs
    assert skw["password"] == SPW and skw["ssl_ca_certs"] == str(ca) and skw["ssl_cert_reqs"] == "required"
    assert SECRET not in repr(client) and SPW not in repr(client)
    client.close()
