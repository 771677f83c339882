"""Redis over TLS (``rediss://``) with a CA made for the test: private redis-servers that
listen only on a TLS port, the store, the hub's key-value state and the key ring opened
over them, and every way a connection must be refused: no CA, another CA, a server
certificate for another host, mutual TLS without a client certificate. No refusal
shows the password.

Storage layer only (no Ray): ``connect`` opens every store through the same
``open_store``/``open_keys``/``RedisKV``. The whole bus on rediss is in
test_redis_tls_bus.py.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memorybus import Config
from memorybus.actors.hub import _kv
from memorybus.auth.keyring import KeyRing, open_keys
from memorybus.errors import ConfigError, StoreUnavailable
from memorybus.storage import WriteBatch
from memorybus.storage.factory import open_store
from memorybus.storage.kv import RedisKV
from memorybus.storage.redis_client import RedisTLS
from tests.conftest import servers
from tests.integration.test_redis_acl import node, shown
from tests.tls_ca import Pki, TlsRedisServer, make_pki

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]

PASSWORD = "tls-test-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def tls_redis(tmp_path: Path, pki: Pki) -> Iterator[Callable[..., TlsRedisServer]]:
    yield from servers(lambda n, **kw: TlsRedisServer(tmp_path / f"tls-redis-{n}", pki, **kw))


def config(url: str, tmp_path: Path, **kw: Any) -> Config:
    return Config.redis(url, namespace=f"tls{uuid.uuid4().hex[:8]}", data_dir=str(tmp_path / "data"), **kw)


def test_the_store_kv_and_key_ring_round_trip_over_rediss_with_the_ca(tls_redis, pki, tmp_path):
    server = tls_redis(password=PASSWORD)
    cfg = config(server.url, tmp_path, redis_tls_ca=str(pki.ca))
    store = open_store(cfg, "shard-0")
    try:
        assert store.durability == "config"  # appendfsync always, read over TLS
        n = node("written over TLS")
        store.commit(WriteBatch(puts=[n]))
        assert store.get(n.id).content == "written over TLS"
        conn = store.client.connection_pool.connection_kwargs
        assert conn["ssl_cert_reqs"] == "required" and conn["ssl_check_hostname"] is True
    finally:
        store.close()
    kv = _kv(cfg, 0)  # the hub's state
    kv.put_many({"sub/a": b"1"})
    assert kv.get("sub/a") == b"1"
    kv.close()
    keys = open_keys(cfg)  # the signing secrets
    try:
        key = KeyRing.load(keys).ensure("acme")
        assert KeyRing.load(keys).keys[key.kid].secret == key.secret
    finally:
        keys.close()
    admin = server.admin()
    assert admin.dbsize() >= 3  # the records, the hub's hash and the key ring are on this server
    # the server has no plaintext port: the bytes on the wire are TLS records
    with socket.create_connection(("127.0.0.1", server.port), timeout=2) as raw:
        raw.sendall(b"PING\r\n")
        try:
            reply = raw.recv(64)
        except ConnectionResetError:  # the server drops a client that does not speak TLS
            reply = b""
        assert b"PONG" not in reply


def test_a_client_that_does_not_trust_the_ca_is_refused_without_the_password(tls_redis, pki, tmp_path):
    server = tls_redis(password=PASSWORD)
    for tls in ({}, {"redis_tls_ca": str(pki.other_ca)}):  # the system's CAs; an unrelated CA
        cfg = config(server.url, tmp_path, **tls)
        with pytest.raises(StoreUnavailable) as caught:
            open_store(cfg, "shard-0")
        text = shown(caught.value)
        assert "CERTIFICATE_VERIFY_FAILED" in text and "redis_tls_ca" in text  # says what to set
        assert PASSWORD not in text and f"rediss://127.0.0.1:{server.port}/0" in text
        with pytest.raises(StoreUnavailable) as caught_kv:
            open_keys(cfg)
        assert "CERTIFICATE_VERIFY_FAILED" in str(caught_kv.value) and PASSWORD not in shown(caught_kv.value)
    # a plaintext client on the TLS port gets nothing either
    with pytest.raises(StoreUnavailable) as plain:
        open_store(config(server.url.replace("rediss://", "redis://"), tmp_path), "shard-0")
    assert PASSWORD not in shown(plain.value)
    assert server.admin().dbsize() == 0


def test_a_server_certificate_for_another_host_is_refused(tls_redis, pki, tmp_path):
    # signed by the trusted CA, but for redis.elsewhere.example only
    server = tls_redis(cert=pki.wrong_host_cert, key=pki.wrong_host_key)
    for host in ("127.0.0.1", "localhost"):
        url = f"rediss://:{PASSWORD}@{host}:{server.port}/0"
        with pytest.raises(StoreUnavailable) as caught:
            open_store(config(url, tmp_path, redis_tls_ca=str(pki.ca)), "shard-0")
        text = shown(caught.value)
        assert "mismatch" in text and "does not name the host" in text and PASSWORD not in text
    # the control: the right certificate on the same CA is accepted by both names
    good = tls_redis()
    for host in ("127.0.0.1", "localhost"):
        store = open_store(config(f"rediss://{host}:{good.port}/0", tmp_path, redis_tls_ca=str(pki.ca)), "shard-0")
        store.close()


def test_mutual_tls_needs_the_client_certificate(tls_redis, pki, tmp_path):
    server = tls_redis(mutual=True, password=PASSWORD)
    with pytest.raises(StoreUnavailable) as caught:
        open_store(config(server.url, tmp_path, redis_tls_ca=str(pki.ca)), "shard-0")
    assert "redis_tls_cert" in str(caught.value) and PASSWORD not in shown(caught.value)
    # the client certificate the server's CA signed, with its key: accepted
    cfg = config(server.url, tmp_path, redis_tls_ca=str(pki.ca), redis_tls_cert=str(pki.client_cert),
                 redis_tls_key=str(pki.client_key))
    store = open_store(cfg, "shard-0")
    try:
        n = node("mutual")
        store.commit(WriteBatch(puts=[n]))
        assert store.get(n.id).content == "mutual"
    finally:
        store.close()
    kv = RedisKV(server.url, "mb:{tls:bus-0}:kv", tls=RedisTLS.from_config(cfg))
    kv.put_many({"a": b"1"})
    assert kv.get("a") == b"1"
    kv.close()


def test_missing_tls_files_are_a_config_error_before_anything_is_sent(tls_redis, pki, tmp_path):
    server = tls_redis()
    admin = server.admin()
    before = admin.info("stats")["total_connections_received"]
    cfg = config(server.url, tmp_path, redis_tls_ca=str(tmp_path / "nowhere.pem"))
    with pytest.raises(ConfigError, match=r"redis_tls_ca.*nowhere\.pem.*not a file"):
        open_store(cfg, "shard-0")
    with pytest.raises(ConfigError, match=r"nowhere\.pem"):
        open_keys(cfg)
    assert admin.info("stats")["total_connections_received"] == before  # no connection was even opened
