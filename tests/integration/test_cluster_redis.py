"""The head's Redis, started the way cluster.yaml starts it (deploy/redis.sh with the
settings the head exports; only the port, address and directories are private to the
test): AOF fsync'd on every write, no eviction, ACL users only (the bus's ``memorybus``
user with the password file's password, the default user off), restarted by its
supervisor after a kill -9 without losing an acknowledged write, backed up and restored."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis
import yaml

from memorybus import MemoryNode, Scope
from memorybus.operator.monitoring import RedisBackupMarks
from memorybus.storage import WriteBatch
from memorybus.storage.redis import RedisStore
from tests.conftest import free_port
from tests.unit.test_cluster_yaml import CLUSTER_YAML, index_of, prepared, redis_env

pytestmark = [pytest.mark.redis, pytest.mark.timeout(120)]
DEPLOY = CLUSTER_YAML.parent / "deploy"


@pytest.fixture
def head(tmp_path: Path):
    """A private head: HOME with ~/memorybus-deploy (the file mount), the YAML's
    settings with a private port, loopback, private dirs and password file."""
    cfg = prepared(yaml.safe_load(CLUSTER_YAML.read_text()))
    env = redis_env(cfg)
    home = tmp_path / "home"
    home.mkdir()
    (home / "memorybus-deploy").symlink_to(DEPLOY)
    password = tmp_path / "redis.password"
    password.write_text(os.urandom(16).hex() + "\n")
    port = free_port()
    env.update(
        MEMORYBUS_REDIS_PORT=str(port),
        MEMORYBUS_REDIS_BIND="127.0.0.1",
        MEMORYBUS_REDIS_DIR=str(tmp_path / "volume" / "data"),
        MEMORYBUS_BACKUP_DIR=str(tmp_path / "volume" / "backups"),
        MEMORYBUS_REDIS_PASSWORD_FILE=str(password),
        MEMORYBUS_REDIS_MAXMEMORY=str(256 * 1024 * 1024),
    )
    env.pop("MEMORYBUS_REDIS_URL")
    full_env = {**os.environ, **env, "HOME": str(home)}

    def run(command: str) -> str:
        done = subprocess.run(["bash", "-c", command], env=full_env, capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    # exactly the head's commands: configure in head_setup, start in head_start_ray
    run(cfg["head_setup_commands"][index_of(cfg["head_setup_commands"], "redis.sh configure")])
    run(cfg["head_start_ray_commands"][index_of(cfg["head_start_ray_commands"], "redis.sh start")])
    # the test inspects the server as redis.sh does: as the node's admin user
    admin_pass = (home / "memorybus" / "redis" / "admin.pass").read_text()
    client = redis.Redis(port=port, username="memorybus-admin", password=admin_pass, socket_timeout=5)
    pidfile = home / "memorybus" / "redis" / "supervisor.pid"
    try:
        # the drivers' URL, as the head's environment file builds it
        yield client, run, tmp_path, f"redis://memorybus:{password.read_text().strip()}@127.0.0.1:{port}/0", password
    finally:
        subprocess.run(["bash", "-c", "bash ~/memorybus-deploy/redis.sh stop"], env=full_env, timeout=60, check=False)
        for f in (pidfile, pidfile.with_suffix(".pid.backup")):  # never leave a process behind
            if f.exists() and f.read_text().strip():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(int(f.read_text()), signal.SIGKILL)  # its whole session: sleep included


def server_pid(client: redis.Redis) -> int:
    return int(client.info("server")["process_id"])


def wait_for_new_server(client: redis.Redis, old: int) -> int:
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            pid = server_pid(client)
            if pid != old:
                return pid
        except redis.exceptions.RedisError:
            pass
        time.sleep(0.1)
    raise AssertionError("the supervisor did not restart redis-server")


@pytest.mark.slow
def test_head_redis_is_durable_private_supervised_and_restorable(head):
    client, run, tmp_path, url, _ = head
    config = {k: client.config_get(k)[k] for k in ("appendonly", "appendfsync", "maxmemory-policy", "bind", "dir")}
    assert config == {
        "appendonly": "yes",
        "appendfsync": "always",
        "maxmemory-policy": "noeviction",
        "bind": "127.0.0.1",
        "dir": str(tmp_path / "volume" / "data"),
    }
    assert int(client.config_get("maxmemory")["maxmemory"]) == 256 * 1024 * 1024
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=client.connection_pool.connection_kwargs["port"]).ping()  # no password, no access
    # an acknowledged memorybus write survives kill -9 of the server; the supervisor restarts it
    store = RedisStore(url, "cluster", "shard-0")
    assert store.durability == "config"  # the bus's user may read appendfsync: checked, 'always'
    node = MemoryNode(content="kept across a crash", scope=Scope("acme"), version=1, created_at=1.0,
                      last_accessed=1.0, valid_from=1.0)
    store.commit(WriteBatch(puts=[node]))
    old = server_pid(client)
    os.kill(old, signal.SIGKILL)
    wait_for_new_server(client, old)
    assert store.get(node.id) is not None and store.get(node.id).content == "kept across a crash"
    # a scheduled-style snapshot, then a write after it, then a restore to the snapshot
    before = int(time.time())
    snapshot = run("bash ~/memorybus-deploy/redis.sh backup").strip().splitlines()[-1]
    assert Path(snapshot).exists() and Path(snapshot).parent == tmp_path / "volume" / "backups"
    # its time is where the shards' monitoring timer reads it, as the bus's own ACL user
    assert before <= RedisBackupMarks(store.client).read()["redis"] <= time.time()
    later = MemoryNode(content="written after the snapshot", scope=Scope("acme"), version=1, created_at=2.0,
                       last_accessed=2.0, valid_from=2.0)
    store.commit(WriteBatch(puts=[later]))
    out = run(f"bash ~/memorybus-deploy/redis.sh restore {snapshot}")
    assert "restored" in out
    assert store.get(node.id) is not None and store.get(later.id) is None
    assert client.config_get("appendonly")["appendonly"] == "yes"  # back to AOF after the restore
    assert any((tmp_path / "volume").glob("data.before-restore-*"))  # the replaced data is kept aside
    store.close()
    # stop leaves nothing behind: the supervisor and the backup loop go with their
    # whole process groups (the loop's pending sleep included)
    home = tmp_path / "home"
    groups = []
    for f in home.glob("memorybus/redis/supervisor.pid*"):
        if f.read_text().strip():
            groups.append(int(f.read_text()))
    assert groups, "the supervisor and backup loop write their pids"
    run("bash ~/memorybus-deploy/redis.sh stop")
    deadline = time.time() + 10
    alive = groups
    while alive and time.time() < deadline:
        alive = [g for g in groups if _group_alive(g)]
        time.sleep(0.1)
    assert alive == [], f"processes left in groups {alive}"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_head_redis_admits_only_its_acl_users_and_takes_a_rotated_password(head):
    client, run, _tmp_path, url, password = head
    port = client.connection_pool.connection_kwargs["port"]
    old = password.read_text().strip()
    assert client.acl_users() == ["default", "memorybus", "memorybus-admin"]
    # the default user is off, whatever password it is given
    for attempt in ({}, {"password": old}, {"username": "default", "password": old}):
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=port, **attempt).ping()
    # the bus's user: data commands, never the server's administration
    bus = redis.Redis.from_url(url)
    bus.set("mb:probe", b"1")
    assert bus.get("mb:probe") == b"1"
    for command in (("FLUSHALL",), ("SHUTDOWN", "NOSAVE"), ("CONFIG", "SET", "appendfsync", "everysec"),
                    ("ACL", "SETUSER", "default", "on", "nopass"), ("KEYS", "*"), ("BGSAVE",)):
        with pytest.raises(redis.exceptions.NoPermissionError):
            bus.execute_command(*command)
    assert client.config_get("appendfsync")["appendfsync"] == "always"
    assert client.get("mb:probe") == b"1"  # still up, nothing flushed
    # a rotated password file: configure + start (what `ray up` runs) loads it into the running server
    new = os.urandom(16).hex()
    password.write_text(new + "\n")
    run("bash ~/memorybus-deploy/redis.sh configure && bash ~/memorybus-deploy/redis.sh start")
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=port, username="memorybus", password=old).ping()
    assert redis.Redis(port=port, username="memorybus", password=new).get("mb:probe") == b"1"
    assert RedisStore(url.replace(old, new), "cluster", "shard-0").durability == "config"


def test_a_replica_follows_the_head_as_the_memorybus_user(tmp_path):
    """redis_replica's setup (deploy/redis.sh with MEMORYBUS_REDIS_REPLICAOF): the replica
    authenticates to the primary as the bus's ACL user (masteruser/masterauth), which may
    run PSYNC/REPLCONF, and receives what the bus writes."""
    password = tmp_path / "redis.password"
    password.write_text(os.urandom(16).hex())
    ports = [free_port(), free_port()]
    envs = []
    for i, port in enumerate(ports):
        env = {**os.environ, "MEMORYBUS_REDIS_PORT": str(port), "MEMORYBUS_REDIS_HOME": str(tmp_path / f"h{i}"),
               "MEMORYBUS_REDIS_PASSWORD_FILE": str(password), "MEMORYBUS_BACKUP_INTERVAL": "0",
               "MEMORYBUS_REDIS_MAXMEMORY": str(64 * 1024 * 1024)}
        if i == 1:
            env["MEMORYBUS_REDIS_REPLICAOF"] = f"127.0.0.1 {ports[0]}"
        envs.append(env)
    try:
        for env in envs:
            done = subprocess.run(["bash", "-c", f"bash {DEPLOY}/redis.sh configure && bash {DEPLOY}/redis.sh start"],
                                  env=env, capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, done.stderr
        url = f"redis://memorybus:{password.read_text()}@127.0.0.1:{{}}/0"
        store = RedisStore(url.format(ports[0]), "cluster", "shard-0")
        node = MemoryNode(content="replicated", scope=Scope("acme"), version=1, created_at=1.0, last_accessed=1.0,
                          valid_from=1.0)
        store.commit(WriteBatch(puts=[node]))
        replica = RedisStore(url.format(ports[1]), "cluster", "shard-0")  # the bus's user reads the replica too
        deadline = time.time() + 30
        while replica.get(node.id) is None and time.time() < deadline:
            time.sleep(0.2)
        assert replica.get(node.id) is not None and replica.get(node.id).content == "replicated"
        info = redis.Redis(port=ports[1], username="memorybus", password=password.read_text()).info("replication")
        assert info["role"] == "slave" and info["master_link_status"] == "up"
        store.close()
        replica.close()
    finally:
        for env in reversed(envs):
            subprocess.run(["bash", f"{DEPLOY}/redis.sh", "stop"], env=env, timeout=60, check=False)
