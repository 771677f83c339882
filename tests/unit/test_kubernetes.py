"""deploy/kubernetes: the KubeRay RayCluster validates against KubeRay's own RayCluster
schema (vendored, see deploy/kubernetes/schema/README.md) and the Redis objects against
Kubernetes' schemas (kubernetes-validate, strict: unknown fields are errors); and the
settings memorybus relies on are there: Ray token auth, durable Redis, ACL users only,
shards kept off the agents' nodes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
SCHEMA = json.loads((DEPLOY / "schema" / "rayclusters.ray.io-v1.json").read_text())


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _raycluster() -> dict:
    [cluster] = _docs("raycluster.yaml")
    return cluster


def _schema_errors(doc: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA)
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(doc)]


def test_the_raycluster_validates_against_kuberays_schema():
    cluster = _raycluster()
    assert (cluster["apiVersion"], cluster["kind"]) == ("ray.io/v1", "RayCluster")
    assert _schema_errors(cluster) == []


def test_the_schema_check_sees_what_it_forbids():
    """The vendored schema is a real check: a wrong type, an unknown auth mode and a
    worker group without its template are each refused."""
    for path, value in ((("spec", "workerGroupSpecs", 0, "replicas"), "two"),
                        (("spec", "authOptions", "mode"), "password"),
                        (("spec", "headGroupSpec", "template", "spec", "containers"), "ray-head")):
        bad = copy.deepcopy(_raycluster())
        target = bad
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        assert _schema_errors(bad), path
    bad = copy.deepcopy(_raycluster())
    del bad["spec"]["workerGroupSpecs"][0]["template"]
    assert _schema_errors(bad)


def test_ray_runs_with_token_auth_and_shards_stay_off_the_agents_nodes():
    spec = _raycluster()["spec"]
    assert spec["authOptions"] == {"mode": "token", "secretName": "memorybus-ray-token"}
    groups = {g["groupName"]: g for g in spec["workerGroupSpecs"]}
    assert "memorybus_shard" in spec["headGroupSpec"]["rayStartParams"]["resources"]
    assert "memorybus_shard" in groups["bus"]["rayStartParams"]["resources"]
    assert "resources" not in groups["agents"]["rayStartParams"]
    for pod in [spec["headGroupSpec"], *groups.values()]:
        env = {e["name"]: e for e in pod["template"]["spec"]["containers"][0]["env"]}
        assert env["MEMORYBUS_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "memorybus-redis"
        assert env["MEMORYBUS_REDIS_URL"]["value"].startswith("redis://memorybus:$(MEMORYBUS_REDIS_PASSWORD)@")
        assert "password" not in json.dumps(pod).replace("MEMORYBUS_REDIS_PASSWORD", "").replace('"key": "password"', "")


def test_the_redis_objects_validate_against_kubernetes_schemas():
    docs = _docs("redis.yaml")
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "Service", "StatefulSet"]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.31", strict=True)
    bad = copy.deepcopy(next(d for d in docs if d["kind"] == "StatefulSet"))
    bad["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, "1.31", strict=True)


def test_redis_is_durable_and_admits_only_the_bus_user():
    config = next(d for d in _docs("redis.yaml") if d["kind"] == "ConfigMap")["data"]
    conf = dict(line.split(" ", 1) for line in config["redis.conf"].splitlines() if line.strip())
    assert conf["appendonly"] == "yes" and conf["appendfsync"] == "always"
    assert conf["maxmemory-policy"] == "noeviction"
    assert "user default off" in config["make-acl.sh"]
    assert "-@dangerous" in config["make-acl.sh"] and "+config|get" in config["make-acl.sh"]
    stateful = next(d for d in _docs("redis.yaml") if d["kind"] == "StatefulSet")
    assert stateful["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"


@pytest.mark.redis
def test_the_configmap_runs_in_a_real_redis_server(tmp_path):
    """redis.conf and make-acl.sh as the pod runs them (paths and port moved into tmp):
    the memorybus user writes and reads CONFIG GET, cannot FLUSHALL; the default user
    cannot log in."""
    import shutil
    import subprocess
    import time

    import redis

    from tests.conftest import free_port

    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    config = next(d for d in _docs("redis.yaml") if d["kind"] == "ConfigMap")["data"]
    (tmp_path / "secrets").mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "secrets" / "password").write_text("a-long-test-password-0123456789")
    script = config["make-acl.sh"].replace("/secrets/", f"{tmp_path}/secrets/").replace("/run/memorybus", f"{tmp_path}/run")
    subprocess.run(["sh", "-c", script], check=True)
    port = free_port()
    conf = (config["redis.conf"].replace("port 6380", f"port {port}").replace("bind 0.0.0.0", "bind 127.0.0.1")
            .replace("dir /data", f"dir {tmp_path}/data").replace("/run/memorybus", f"{tmp_path}/run"))
    (tmp_path / "redis.conf").write_text(conf)
    server = subprocess.Popen(["redis-server", str(tmp_path / "redis.conf")], stdout=subprocess.DEVNULL)
    try:
        bus = redis.Redis(port=port, username="memorybus", password="a-long-test-password-0123456789")
        deadline = time.time() + 10
        while True:
            try:
                bus.ping()
                break
            except redis.ConnectionError:
                assert time.time() < deadline
                time.sleep(0.05)
        bus.set("mb:{t}:k", "v")
        assert bus.get("mb:{t}:k") == b"v"
        assert bus.config_get("appendfsync") == {"appendfsync": "always"}
        with pytest.raises(redis.ResponseError, match="permission"):
            bus.flushall()
        with pytest.raises((redis.AuthenticationError, redis.ResponseError)):
            redis.Redis(port=port).set("x", "y")
    finally:
        server.terminate()
        server.wait(timeout=10)
