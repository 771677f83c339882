"""cluster.yaml is a config the Ray cluster launcher accepts, and deploys what memorybus needs.

Validated offline with Ray's own code (``prepare_config`` fills in the
provider's defaults and merges the setup commands, ``validate_config`` checks
the schema and the node types); ``ray up`` itself needs ssh or a cloud.
"""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path
from typing import Any

import click
import jsonschema
import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

CLUSTER_YAML = Path(__file__).resolve().parents[2] / "cluster.yaml"
LOCAL_NODE_TYPE = "local.cluster.node"  # the one node type Ray gives a local cluster


def load_raw() -> dict[str, Any]:
    with CLUSTER_YAML.open() as f:
        return yaml.safe_load(f)


def prepared(raw: dict[str, Any]) -> dict[str, Any]:
    cfg = prepare_config(copy.deepcopy(raw))
    validate_config(cfg)
    return cfg


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return load_raw()


@pytest.fixture(scope="module")
def cfg(raw: dict[str, Any]) -> dict[str, Any]:
    return prepared(raw)


def index_of(commands: list[str], *needles: str) -> int:
    """Index of the first command containing every needle (fails if none does)."""
    for i, cmd in enumerate(commands):
        if all(n in cmd for n in needles):
            return i
    raise AssertionError(f"no command contains all of {needles}: {commands}")


def flag(command: str, name: str) -> str:
    """The value of ``--name=V`` or ``--name V`` in a shell command."""
    tokens = shlex.split(command.replace(";", " ; "))
    for i, tok in enumerate(tokens):
        if tok == name:
            return tokens[i + 1]
        if tok.startswith(name + "="):
            return tok.split("=", 1)[1]
    raise AssertionError(f"{name} not in {command!r}")


def redis_start(cfg: dict[str, Any]) -> str:
    return cfg["head_start_ray_commands"][index_of(cfg["head_start_ray_commands"], "redis.sh start")]


def redis_env(cfg: dict[str, Any]) -> dict[str, str]:
    """The MEMORYBUS_* settings the head's setup exports for deploy/redis.sh and drivers
    (the values as the environment file will hold them)."""
    cmd = cfg["head_setup_commands"][index_of(cfg["head_setup_commands"], "MEMORYBUS_REDIS_PORT")]
    lines = [t[len("export ") :] for t in shlex.split(cmd) if t.startswith("export ")]
    # shlex keeps the backslash of \$ inside double quotes; the shell does not
    return dict(line.replace("\\$", "$").split("=", 1) for line in lines)


def ray_head_start(cfg: dict[str, Any]) -> str:
    cmds = cfg["head_start_ray_commands"]
    return cmds[index_of(cmds, "ray start", "--head")]


# ---------------------------------------------------------------- the AWS config


def test_cluster_yaml_validates_with_ray(raw: dict[str, Any], cfg: dict[str, Any]) -> None:
    assert raw["provider"]["type"] == "aws"
    assert cfg["cluster_name"] == "memorybus"
    # Ray's own defaults were merged in and the result still validates.
    assert "cluster_synced_files" in cfg
    validate_config(cfg)


def test_head_node_type_exists(cfg: dict[str, Any]) -> None:
    types = cfg["available_node_types"]
    assert cfg["head_node_type"] in types
    assert types[cfg["head_node_type"]]["max_workers"] == 0
    for name, node_type in types.items():
        assert node_type["node_config"].get("InstanceType"), name


def test_a_worker_type_can_scale(cfg: dict[str, Any]) -> None:
    workers = {name: t for name, t in cfg["available_node_types"].items() if name != cfg["head_node_type"]}
    assert workers
    assert any(t["max_workers"] >= 1 for t in workers.values())
    for name, t in workers.items():
        assert 0 <= t["min_workers"] <= t["max_workers"] <= cfg["max_workers"], name
    assert sum(t["min_workers"] for t in workers.values()) <= cfg["max_workers"]


@pytest.mark.parametrize("key", ["head_setup_commands", "worker_setup_commands"])
def test_torch_is_pinned_and_installed_before_memorybus(cfg: dict[str, Any], key: str) -> None:
    # prepare_config prepends the common setup_commands to both lists.
    commands = cfg[key]
    torch = index_of(commands, "pip install", "torch==2.13.0")
    memorybus = index_of(commands, "pip install", "memorybus")
    assert "torch" not in commands[memorybus].replace("memorybus", "")
    assert torch < memorybus
    # Nothing after memorybus reinstalls or upgrades torch.
    assert not any("torch" in c and "pip" in c for c in commands[memorybus + 1 :])


def test_memorybus_pip_spec_is_a_marked_placeholder(raw: dict[str, Any]) -> None:
    cmd = raw["setup_commands"][index_of(raw["setup_commands"], "pip install", "memorybus")]
    assert 'pip install "MEMORYBUS_PIP_SPEC"' in cmd  # the line to edit holds the placeholder itself
    assert "--no-index --find-links ~/wheelhouse memorybus" in cmd  # the offline path


def test_the_placeholder_list_matches_the_file() -> None:
    text = CLUSTER_YAML.read_text()
    header, _, body = text.partition("cluster_name:")
    listed = set(re.findall(r"^#   (MEMORYBUS_[A-Z_]+) ", header, re.M))
    assert listed == {"MEMORYBUS_PIP_SPEC", "MEMORYBUS_REDIS_VOLUME_ID"}
    # a placeholder is a MEMORYBUS_ name used in the file but never set as a variable
    names = set(re.findall(r"\bMEMORYBUS_[A-Z_]+\b", body))
    assigned = set(re.findall(r"\b(MEMORYBUS_[A-Z_]+)=", body))
    assert {n for n in names if n not in assigned} == listed
    for name in listed:
        assert name in body, name


def test_no_secret_is_written_into_the_yaml(raw: dict[str, Any]) -> None:
    text = CLUSTER_YAML.read_text()
    assert "CHANGE_ME" not in text and "requirepass" not in text
    assert raw["file_mounts"]["/home/ray/.memorybus/redis.password"] == "~/.memorybus/redis.password"
    env = redis_env(prepared(raw))
    assert env["MEMORYBUS_REDIS_PASSWORD_FILE"] == "/home/ray/.memorybus/redis.password"
    # the drivers' URL reads the file when the environment is loaded: no password in the env file
    assert env["MEMORYBUS_REDIS_URL"].startswith("redis://memorybus:$(cat /home/ray/.memorybus/redis.password)@")
    index_of(raw["head_setup_commands"], "test -s ~/.memorybus/redis.password", "exit 1")


@pytest.mark.parametrize("key", ["head_setup_commands", "worker_setup_commands"])
def test_hf_hub_offline_before_anything_runs(cfg: dict[str, Any], key: str) -> None:
    commands = cfg[key]
    env = index_of(commands, "HF_HUB_OFFLINE=1")
    # The variables reach every later command (and `ray start`) through ~/.bashrc.
    hook = index_of(commands, ".bashrc")
    assert env <= hook < index_of(commands, "pip install", "memorybus")


def test_redis_is_installed_and_started_on_the_head_only(cfg: dict[str, Any]) -> None:
    head_setup, worker_setup = cfg["head_setup_commands"], cfg["worker_setup_commands"]
    index_of(head_setup, "apt-get install", "redis-server")
    assert not any("redis" in c for c in worker_setup + cfg["worker_start_ray_commands"])
    start = cfg["head_start_ray_commands"]
    assert index_of(start, "redis.sh start") < index_of(start, "ray stop") < index_of(start, "ray start", "--head")
    assert index_of(head_setup, "redis.sh configure") > index_of(head_setup, "MEMORYBUS_REDIS_PORT")
    assert cfg["file_mounts"]["/home/ray/memorybus-deploy"] == "./deploy"
    assert (CLUSTER_YAML.parent / "deploy" / "redis.sh").exists()


def test_redis_data_lives_on_a_volume_that_outlives_the_cluster(raw: dict[str, Any], cfg: dict[str, Any]) -> None:
    head = raw["available_node_types"][raw["head_node_type"]]
    attach = head["initialization_commands"][index_of(head["initialization_commands"], "attach-volume")]
    assert "VOL=MEMORYBUS_REDIS_VOLUME_ID" in attach and "mount" in attach and "/mnt/memorybus-redis" in attach
    assert "mkfs" in attach and "blkid" in attach  # formatted on first use only
    assert "--volume /mnt/memorybus-redis:/mnt/memorybus-redis" in raw["docker"]["head_run_options"]
    env = redis_env(cfg)
    assert env["MEMORYBUS_REDIS_DIR"].startswith("/mnt/memorybus-redis/")
    assert env["MEMORYBUS_BACKUP_DIR"].startswith("/mnt/memorybus-redis/")
    # Redis refuses to start on a directory that is not the volume
    index_of(cfg["head_setup_commands"], "/mnt/memorybus-redis/.memorybus-volume", "exit 1")
    assert raw["provider"]["availability_zone"].count(",") == 0  # one zone: where the volume is


def test_redis_listens_privately_with_a_password(cfg: dict[str, Any]) -> None:
    bind = redis_env(cfg)["MEMORYBUS_REDIS_BIND"]
    assert "0.0.0.0" not in bind and bind.startswith("'127.0.0.1 $HEAD_IP")
    cmd = cfg["head_setup_commands"][index_of(cfg["head_setup_commands"], "MEMORYBUS_REDIS_PORT")]
    assert "HEAD_IP=$(python -c 'import ray.util; print(ray.util.get_node_ip_address())')" in cmd
    deploy = CLUSTER_YAML.parent / "deploy"
    script = (deploy / "redis.sh").read_text() + (deploy / "redis_common.sh").read_text()
    assert "aclfile" in script and "user default off" in script and "protected-mode yes" in script
    assert "requirepass" not in script  # the bus has its own ACL user (tests/unit/test_cluster_security.py)


def test_redis_port_does_not_clash_with_ray(cfg: dict[str, Any]) -> None:
    env = redis_env(cfg)
    redis_port = env["MEMORYBUS_REDIS_PORT"]
    assert redis_port != flag(ray_head_start(cfg), "--port")
    assert f":{redis_port}/0" in env["MEMORYBUS_REDIS_URL"]


def test_shards_stay_off_spot_nodes(raw: dict[str, Any]) -> None:
    types = raw["available_node_types"]
    assert types["spot"]["node_config"]["InstanceMarketOptions"]["MarketType"] == "spot"
    assert "memorybus_shard" not in types["spot"]["resources"]
    for name in ("head", "worker"):
        assert types[name]["resources"]["memorybus_shard"] >= 1
    example = (CLUSTER_YAML.parent / "deploy" / "job_example.py").read_text()
    assert 'shard_resources={"memorybus_shard": 0.01}' in example


def test_a_redis_replica_can_be_turned_on(raw: dict[str, Any]) -> None:
    replica = raw["available_node_types"]["redis_replica"]
    assert replica["min_workers"] == 0 and replica["max_workers"] == 1
    assert replica["resources"] == {"CPU": 0}  # nothing of the bus runs there
    start = replica["worker_setup_commands"][index_of(replica["worker_setup_commands"], "REPLICAOF")]
    assert 'MEMORYBUS_REDIS_REPLICAOF="$RAY_HEAD_IP 6380"' in start and "redis.sh start" in start


def test_metrics_are_exported_for_prometheus(cfg: dict[str, Any]) -> None:
    assert flag(ray_head_start(cfg), "--metrics-export-port") == "8080"
    join = cfg["worker_start_ray_commands"][index_of(cfg["worker_start_ray_commands"], "ray start")]
    assert flag(join, "--metrics-export-port") == "8080"
    prom = yaml.safe_load((CLUSTER_YAML.parent / "deploy" / "prometheus.yml").read_text())
    job = prom["scrape_configs"][0]
    assert job["file_sd_configs"][0]["files"] == ["/tmp/ray/prom_metrics_service_discovery.json"]
    assert "memorybus_" in job["metric_relabel_configs"][0]["regex"]


def test_workers_join_the_head(cfg: dict[str, Any]) -> None:
    gcs_port = flag(ray_head_start(cfg), "--port")
    cmds = cfg["worker_start_ray_commands"]
    join = cmds[index_of(cmds, "ray start")]
    assert flag(join, "--address") == f"$RAY_HEAD_IP:{gcs_port}"
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in ray_head_start(cfg)


# ---------------------------------------------------------------- broken copies


def _drop_node_config(raw: dict[str, Any]) -> None:
    worker = next(n for n in raw["available_node_types"] if n != raw["head_node_type"])
    del raw["available_node_types"][worker]["node_config"]


def _missing_head_type(raw: dict[str, Any]) -> None:
    raw["head_node_type"] = "no-such-type"


def _unknown_top_level_key(raw: dict[str, Any]) -> None:
    raw["head_setup_comands"] = ["echo typo"]


def _fractional_resource(raw: dict[str, Any]) -> None:
    raw["available_node_types"][raw["head_node_type"]]["resources"] = {"CPU": 0.5}


def _min_workers_over_global_max(raw: dict[str, Any]) -> None:
    worker = next(n for n in raw["available_node_types"] if n != raw["head_node_type"])
    raw["available_node_types"][worker]["min_workers"] = raw["max_workers"] + 1


@pytest.mark.parametrize(
    ("mutate", "error", "match"),
    [
        (_drop_node_config, jsonschema.ValidationError, "'node_config' is a required property"),
        (_missing_head_type, ValueError, "must be one of `available_node_types`"),
        (_unknown_top_level_key, jsonschema.ValidationError, "head_setup_comands"),
        (_fractional_resource, jsonschema.ValidationError, "is not of type 'integer'"),
        (_min_workers_over_global_max, ValueError, "sum of `min_workers`"),
    ],
    ids=lambda v: v.__name__.lstrip("_") if callable(v) and not isinstance(v, type) else "",
)
def test_broken_copies_are_rejected(raw: dict[str, Any], mutate, error, match) -> None:
    broken = copy.deepcopy(raw)
    mutate(broken)
    with pytest.raises(error, match=re.escape(match)):
        prepared(broken)


# ---------------------------------------------------------------- the local provider

HEAD_IP = "10.0.0.10"
WORKER_IPS = ["10.0.0.11", "10.0.0.12"]


def local_variant(raw: dict[str, Any]) -> dict[str, Any]:
    """The same deployment on machines you already own (provider type ``local``).

    A local cluster has no node types of its own: Ray rejects
    ``available_node_types`` (and ``head_node_type``) and builds one type from
    ``head_ip``/``worker_ips``; ``max_workers`` defaults to the number of worker
    IPs. Cloud-only parts (AWS provider fields, node_configs) go away; the
    setup and start commands stay as they are.
    """
    cfg = copy.deepcopy(raw)
    cfg["provider"] = {"type": "local", "head_ip": HEAD_IP, "worker_ips": list(WORKER_IPS)}
    cfg["auth"] = {"ssh_user": "ubuntu", "ssh_private_key": "~/.ssh/id_rsa"}
    for key in ("available_node_types", "head_node_type", "max_workers", "min_workers"):
        cfg.pop(key, None)
    return cfg


def test_local_provider_variant_validates(raw: dict[str, Any]) -> None:
    local = local_variant(raw)
    cfg = prepared(local)
    assert cfg["provider"]["type"] == "local"
    assert cfg["head_node_type"] == LOCAL_NODE_TYPE
    assert list(cfg["available_node_types"]) == [LOCAL_NODE_TYPE]
    node_type = cfg["available_node_types"][LOCAL_NODE_TYPE]
    assert node_type["min_workers"] == node_type["max_workers"] == len(WORKER_IPS)
    assert cfg["max_workers"] == len(WORKER_IPS)
    # The deployment itself is unchanged.
    for key in ("head_setup_commands", "worker_setup_commands"):
        cmds = cfg[key]
        assert index_of(cmds, "torch==2.13.0") < index_of(cmds, "pip install", "memorybus")
    assert redis_start(cfg) == redis_start(prepared(raw))
    # Preparing an already prepared local config (what `ray up` writes for the
    # head) returns it as it is.
    assert prepare_config(copy.deepcopy(cfg)) == cfg


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        pytest.param(
            lambda c, raw: c.update(available_node_types=raw["available_node_types"]),
            "available_node_types is not supported",
            id="node-types",
        ),
        pytest.param(
            lambda c, raw: c["provider"].pop("worker_ips"), "list of `worker_ips`", id="no-worker-ips"
        ),
        pytest.param(lambda c, raw: c["provider"].pop("head_ip"), "`head_ip`", id="no-head-ip"),
    ],
)
def test_broken_local_variants_are_rejected(raw: dict[str, Any], mutate, match) -> None:
    local = local_variant(raw)
    mutate(local, raw)
    with pytest.raises(click.ClickException, match=re.escape(match)):
        prepared(local)
