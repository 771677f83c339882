"""deploy/redis.sh's TLS mode and its sentinel ACL user, and deploy/sentinel.sh: the
files they write, what they refuse, and real processes started by them (a TLS-only
Redis reached with rediss://; three sentinels that log in to redis.sh's server as
memorybus-sentinel and lead a memorybus store to it)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from memorybus import Config
from memorybus.storage.base import WriteBatch
from memorybus.storage.factory import open_store
from tests.conftest import free_port
from tests.integration.test_redis_sentinel import node
from tests.tls_ca import make_pki

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PASSWORD = "a-long-bus-password-0123456789"


def sh(script: str, command: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", str(DEPLOY / script), *command.split()], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60, check=False)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def redis_env(tmp_path: Path, name: str, port: int) -> dict[str, str]:
    pw = tmp_path / "redis.password"
    if not pw.exists():
        pw.write_text(PASSWORD)
        pw.chmod(0o600)
    return {"MEMORYBUS_REDIS_PORT": str(port), "MEMORYBUS_REDIS_HOME": str(tmp_path / name),
            "MEMORYBUS_REDIS_PASSWORD_FILE": str(pw), "MEMORYBUS_BACKUP_INTERVAL": "0",
            "MEMORYBUS_REDIS_MAXMEMORY": str(256 << 20), "MEMORYBUS_SENTINEL_PASSWORD_FILE": str(pw)}


def test_redis_sh_tls_port_mode_serves_rediss_only(tmp_path):
    pki = make_pki(tmp_path / "pki")
    port = free_port()
    env = redis_env(tmp_path, "tls", port)
    refused = sh("redis.sh", "configure", {**env, "MEMORYBUS_REDIS_TLS_CERT": str(pki.server_cert)}, check=False)
    assert refused.returncode != 0 and "all three" in refused.stderr
    env.update(MEMORYBUS_REDIS_TLS_CERT=str(pki.server_cert), MEMORYBUS_REDIS_TLS_KEY=str(pki.server_key),
               MEMORYBUS_REDIS_TLS_CA=str(pki.ca), MEMORYBUS_REDIS_MIN_REPLICAS="0")
    sh("redis.sh", "configure", env)
    conf = (tmp_path / "tls" / "redis.conf").read_text().splitlines()
    assert "port 0" in conf and f"tls-port {port}" in conf and "tls-replication yes" in conf
    assert f"tls-cert-file {pki.server_cert}" in conf and "tls-auth-clients no" in conf
    acl = (tmp_path / "tls" / "users.acl").read_text()
    assert "user memorybus-sentinel on #" in acl and "+replicaof" in acl and PASSWORD not in acl
    try:
        sh("redis.sh", "start", env)
        assert sh("redis.sh", "status", env).stdout.strip() == "PONG"  # its own cli speaks TLS
        url = f"rediss://memorybus:{PASSWORD}@127.0.0.1:{port}/0"
        store = open_store(Config.redis(url, namespace="tlsdeploy", redis_tls_ca=str(pki.ca)), "shard-0")
        store.commit(WriteBatch(puts=[node("t1")]))
        assert store.get("t1") is not None and store.durability == "config"
        store.close()
        import redis

        with pytest.raises(redis.exceptions.ConnectionError):  # no plaintext port
            redis.Redis(port=port, username="memorybus", password=PASSWORD, socket_timeout=1).ping()
    finally:
        sh("redis.sh", "stop", env, check=False)


def test_sentinel_sh_configures_once_and_refuses_bad_settings(tmp_path):
    env = {"MEMORYBUS_SENTINEL_HOME": str(tmp_path / "s"), "MEMORYBUS_SENTINEL_PORT": "26999"}
    missing = sh("sentinel.sh", "configure", env, check=False)
    assert missing.returncode != 0 and "MEMORYBUS_SENTINEL_MASTER" in missing.stderr
    for bad in ("10.0.0.1", "10.0.0.1 port", "10.0.0.1 6380 extra"):
        done = sh("sentinel.sh", "configure", {**env, "MEMORYBUS_SENTINEL_MASTER": bad}, check=False)
        assert done.returncode != 0 and "host port" in done.stderr
    done = sh("sentinel.sh", "configure", {**env, "MEMORYBUS_SENTINEL_MASTER": "10.0.0.1 6380",
                                          "MEMORYBUS_SENTINEL_QUORUM": "0"}, check=False)
    assert done.returncode != 0 and "QUORUM" in done.stderr
    pw = tmp_path / "pw"
    pw.write_text("short")
    done = sh("sentinel.sh", "configure", {**env, "MEMORYBUS_SENTINEL_MASTER": "10.0.0.1 6380",
                                          "MEMORYBUS_SENTINEL_PASSWORD_FILE": str(pw)}, check=False)
    assert done.returncode != 0 and "16+" in done.stderr and not (tmp_path / "s" / "sentinel.conf").exists()
    pw.write_text(PASSWORD)
    good = {**env, "MEMORYBUS_SENTINEL_MASTER": "10.0.0.1 6380", "MEMORYBUS_SENTINEL_PASSWORD_FILE": str(pw)}
    sh("sentinel.sh", "configure", good)
    conf = tmp_path / "s" / "sentinel.conf"
    lines = conf.read_text().splitlines()
    assert "sentinel monitor memorybus 10.0.0.1 6380 2" in lines and "sentinel auth-user memorybus memorybus-sentinel" in lines
    assert "sentinel down-after-milliseconds memorybus 5000" in lines and "port 26999" in lines
    assert conf.stat().st_mode & 0o077 == 0  # it holds the password: owner only
    sh("sentinel.sh", "configure", {**good, "MEMORYBUS_SENTINEL_MASTER": "10.9.9.9 6380"})  # kept: its state
    assert "sentinel monitor memorybus 10.0.0.1 6380 2" in conf.read_text()
    sh("sentinel.sh", "configure --force", {**good, "MEMORYBUS_SENTINEL_MASTER": "10.9.9.9 6380"})
    assert "sentinel monitor memorybus 10.9.9.9 6380 2" in conf.read_text()


def test_three_deployed_sentinels_lead_a_store_to_the_deployed_master(tmp_path):
    port = free_port()
    data_env = redis_env(tmp_path, "primary", port)
    sentinels = [free_port() for _ in range(3)]
    envs = [{**data_env, "MEMORYBUS_SENTINEL_HOME": str(tmp_path / f"s{p}"), "MEMORYBUS_SENTINEL_PORT": str(p),
             "MEMORYBUS_SENTINEL_MASTER": f"127.0.0.1 {port}", "MEMORYBUS_SENTINEL_DOWN_AFTER_MS": "1000"}
            for p in sentinels]
    try:
        sh("redis.sh", "configure", data_env)
        sh("redis.sh", "start", data_env)
        for env in envs:
            sh("sentinel.sh", "start", env)
        # the sentinel logs in to the data node as memorybus-sentinel: it sees a live master
        status = sh("sentinel.sh", "status", envs[0]).stdout.split()
        assert status == ["127.0.0.1", str(port)]
        info = subprocess.run(["redis-cli", "-p", str(sentinels[0]), "--no-auth-warning", "-a", PASSWORD,
                               "sentinel", "master", "memorybus"], capture_output=True, text=True, timeout=10,
                              check=True).stdout.split()
        assert info[info.index("flags") + 1] == "master"  # not s_down: its login works
        hosts = ",".join(f"127.0.0.1:{p}" for p in sentinels)
        url = f"redis+sentinel://memorybus:{PASSWORD}@{hosts}/memorybus/0?sentinel_password={PASSWORD}"
        store = open_store(Config.redis(url, namespace="sdeploy", redis_wait_replicas=0), "shard-0")
        store.commit(WriteBatch(puts=[node("d1")]))
        assert store.get("d1") is not None and store.durability == "config"
        store.close()
    finally:
        for env in envs:
            sh("sentinel.sh", "stop", env, check=False)
        sh("redis.sh", "stop", data_env, check=False)
