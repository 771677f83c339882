"""The cluster-mode Redis deployment (deploy/redis_cluster.sh and cluster.yaml's
``redis_cluster`` node type) beside the single server: Ray's own validator accepts the
YAML, the node type runs nothing of the bus, and the script writes a cluster-mode
configuration that keeps redis.sh's durability and access settings."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_cluster_yaml import CLUSTER_YAML, index_of, load_raw, prepared

SCRIPT = CLUSTER_YAML.parent / "deploy" / "redis_cluster.sh"


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return load_raw()


def test_the_redis_cluster_node_type_validates_and_is_off_until_asked_for(raw: dict[str, Any]) -> None:
    cfg = prepared(raw)
    node = cfg["available_node_types"]["redis_cluster"]
    assert node["min_workers"] == 0 and node["max_workers"] >= 6  # 3 primaries with a replica each
    assert node["resources"] == {"CPU": 0}  # no shard, embedder or task lands there
    setup = node["worker_setup_commands"]
    start = setup[index_of(setup, "redis_cluster.sh configure", "redis_cluster.sh start")]
    assert "MEMORYBUS_REDIS_PASSWORD_FILE=/home/ray/.memorybus/redis.password" in start
    assert "0.0.0.0" not in start and 'MEMORYBUS_REDIS_BIND="127.0.0.1 ' in start
    assert index_of(setup, "apt-get install", "redis-server") < setup.index(start)
    top = CLUSTER_YAML.read_text().split("cluster_name:")[0]
    assert "redis_cluster.sh create" in top and "redis_wait_replicas=1" in top


def _configure(tmp_path: Path, **env: str) -> str:
    home = tmp_path / "redis-home"
    password = tmp_path / "pw"
    password.write_text("p" * 24)
    run_env = dict(os.environ, HOME=str(tmp_path), MEMORYBUS_REDIS_HOME=str(home),
                   MEMORYBUS_REDIS_PASSWORD_FILE=str(password), MEMORYBUS_REDIS_MAXMEMORY="100000000", **env)
    subprocess.run(["bash", str(SCRIPT), "configure"], check=True, env=run_env, capture_output=True, timeout=30)
    return (home / "redis.conf").read_text()


def test_configure_writes_cluster_mode_on_top_of_the_single_servers_settings(tmp_path: Path) -> None:
    conf = _configure(tmp_path, MEMORYBUS_REDIS_ANNOUNCE_IP="10.0.0.7", MEMORYBUS_REDIS_CLUSTER_NODE_TIMEOUT="3000")
    lines = set(conf.splitlines())
    assert {"appendonly yes", "appendfsync always", "maxmemory-policy noeviction", "protected-mode yes"} <= lines
    assert {"cluster-enabled yes", "cluster-node-timeout 3000", "cluster-announce-ip 10.0.0.7"} <= lines
    data = tmp_path / "redis-home" / "data"
    assert f"cluster-config-file {data}/nodes.conf" in lines  # beside the AOF: a restart rejoins
    auth = (tmp_path / "redis-home" / "auth.conf").read_text()
    assert "aclfile" in auth and "masteruser memorybus" in auth  # replicas follow as the bus's user
    # run again (every `ray up`): one cluster section, not two
    assert _configure(tmp_path).count("cluster-enabled yes") == 1


def test_create_refuses_too_few_nodes_before_contacting_any(tmp_path: Path) -> None:
    proc = subprocess.run(["bash", str(SCRIPT), "create", "10.0.0.1:6380", "10.0.0.2:6380"],
                          env=dict(os.environ, MEMORYBUS_REDIS_HOME=str(tmp_path)),
                          capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 2 and "at least 6 nodes" in proc.stderr
