"""The Redis TLS settings as configured (no server): Config's TLS fields, the warning for a
plaintext URL to another machine, and the command line's flags and environment."""

from __future__ import annotations

import argparse
import logging
import os
import pickle

import pytest

from memorybus import Config
from memorybus.cli.tls import add_redis_tls_flags, redis_tls_options
from memorybus.config.urls import is_loopback
from memorybus.errors import ConfigError
from memorybus.storage.redis_client import RedisTLS, open_redis

SECRET = "Zq9-secret-7f3"


def test_tls_fields_are_resolved_paths_shown_in_repr_and_kept_by_pickle(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = Config.redis(f"rediss://memorybus:{SECRET}@cache.example:6380/0", redis_tls_ca="ca.pem",
                       redis_tls_cert="~/c.pem", redis_tls_key=tmp_path / "c.key")
    assert cfg.redis_tls_ca == str(tmp_path / "ca.pem")
    assert cfg.redis_tls_cert == os.path.expanduser("~/c.pem") and cfg.redis_tls_key == str(tmp_path / "c.key")
    assert SECRET not in repr(cfg) and "redis_tls_ca=" in repr(cfg)
    assert RedisTLS.from_config(pickle.loads(pickle.dumps(cfg))) == RedisTLS(cfg.redis_tls_ca, cfg.redis_tls_cert,
                                                                             cfg.redis_tls_key)
    assert RedisTLS.from_config(cfg.without_secrets()) == RedisTLS.from_config(cfg)
    assert not RedisTLS.from_config(Config.redis("rediss://cache.example:6380/0"))  # system CAs


@pytest.mark.parametrize(
    ("kw", "field", "said"),
    [
        ({"redis_tls_ca": "/ca.pem"}, "redis_tls_ca", "not rediss://"),
        ({"redis_tls_cert": "/c.pem"}, "redis_tls_cert", "both for mutual TLS"),
        ({"redis_tls_key": "/c.key"}, "redis_tls_cert", "both for mutual TLS"),
        ({"redis_tls_ca": ""}, "redis_tls_ca", "path of a PEM file"),
        ({"redis_tls_ca": 7}, "redis_tls_ca", "path of a PEM file"),
    ],
)
def test_tls_fields_that_cannot_work_are_refused(kw, field, said):
    url = f"redis://memorybus:{SECRET}@10.0.0.1:6380/0" if said == "not rediss://" else "rediss://h:6380/0"
    with pytest.raises(ConfigError, match=said) as caught:
        Config.redis(url, **kw)
    assert caught.value.args[0] == field and SECRET not in str(caught.value)


def test_tls_files_with_an_embedded_bus_are_refused():
    with pytest.raises(ConfigError, match="not rediss://"):
        Config.embedded("/tmp/x", redis_tls_ca="/ca.pem")


def test_open_redis_checks_the_files_and_verifies_always(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a connection is made")
    client = open_redis("rediss://h.example:6380/0", tls=RedisTLS(str(ca)))
    kw = client.connection_pool.connection_kwargs
    assert (kw["ssl_cert_reqs"], kw["ssl_check_hostname"], kw["ssl_ca_certs"]) == ("required", True, str(ca))
    with pytest.raises(ConfigError, match=r"redis_tls_key.*not a file"):
        open_redis("rediss://h.example:6380/0", tls=RedisTLS(str(ca), str(ca), str(tmp_path / "gone.key")))
    with pytest.raises(ConfigError, match="both for mutual TLS"):
        open_redis("rediss://h.example:6380/0", tls=RedisTLS(str(ca), str(ca), None))
    with pytest.raises(ConfigError, match="not rediss://"):
        open_redis(f"redis://:{SECRET}@h.example:6380/0", tls=RedisTLS(str(ca)))
    if os.getuid() != 0:  # root reads any file
        ca.chmod(0)
        with pytest.raises(ConfigError, match="not readable"):
            open_redis("rediss://h.example:6380/0", tls=RedisTLS(str(ca)))
    # a URL redis-py cannot open is not echoed, TLS or not
    for url in (f"rediss://u:{SECRET}@h.example:6380/0?socket_timeout=abc", f"redis://u:{SECRET}/x@10.0.0.1:6380/0",
                f"redis://memorybus:{SECRET}"):
        with pytest.raises(ConfigError) as bad:
            open_redis(url)
        assert SECRET not in f"{bad.value} {bad.value!r}"


def test_plaintext_to_another_host_is_warned_once_per_host(caplog):
    host = f"10.9.{os.getpid() % 250}.7"  # a host no other test in this process names
    caplog.set_level(logging.WARNING, logger="memorybus.storage.redis_client")
    for _ in range(3):
        open_redis(f"redis://memorybus:{SECRET}@{host}:6380/0").close()
    warned = [r.getMessage() for r in caplog.records if host in r.getMessage()]
    assert len(warned) == 1 and "plaintext" in warned[0] and "rediss://" in warned[0]
    assert SECRET not in caplog.text
    caplog.clear()
    for url in ("redis://127.0.0.1:6380/0", "redis://localhost:6380/0", "redis://[::1]:6380/0",
                "unix:///run/redis.sock", f"rediss://{host}:6390/0"):
        open_redis(url).close()
    assert not caplog.records  # loopback, a socket, TLS: nothing to say


@pytest.mark.parametrize(("host", "loop"), [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True),
                                            ("localhost", True), (None, True), ("", False), ("10.0.0.1", False),
                                            ("redis.example", False), ("0.0.0.0", False)])
def test_is_loopback(host, loop):
    assert is_loopback(host) is loop


def test_cli_flags_and_environment(monkeypatch):
    p = argparse.ArgumentParser()
    add_redis_tls_flags(p)
    for var in ("CA", "CERT", "KEY"):
        monkeypatch.delenv(f"MEMORYBUS_REDIS_TLS_{var}", raising=False)
    assert redis_tls_options(p.parse_args([])) == {}
    monkeypatch.setenv("MEMORYBUS_REDIS_TLS_CA", "/env/ca.pem")
    assert redis_tls_options(p.parse_args([])) == {"redis_tls_ca": "/env/ca.pem"}
    args = p.parse_args(["--redis-tls-ca", "/flag/ca.pem", "--redis-tls-cert", "/c.pem", "--redis-tls-key", "/c.key"])
    assert redis_tls_options(args) == {"redis_tls_ca": "/flag/ca.pem", "redis_tls_cert": "/c.pem",
                                       "redis_tls_key": "/c.key"}  # a flag wins over the environment
