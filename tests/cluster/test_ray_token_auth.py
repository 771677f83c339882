"""Ray started the way cluster.yaml starts it (``RAY_AUTH_MODE=token`` with
``RAY_AUTH_TOKEN_PATH``, the token made by deploy/secrets.sh; ``RAY_USE_TLS=1`` with the
node certificate deploy/tls.sh makes) admits only callers that hold the token and a
certificate from the cluster's CA: a driver with both runs a task; a driver without
the token, GCS clients without it or with another token, without TLS, or with a
certificate from another CA, are refused.

A private head (``ray start --head --block`` in its own session, its own port,
temp dir and HOME, so no ``~/.ray/auth_token`` is involved), stopped by pid.
The refused callers of a test are run at once, each told to give up after a few tries
(Ray's own patience is 20 s for a driver, 60 s for a GCS client).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port
from tests.unit.test_cluster_security import TLS_DIR, TLS_ENV, TOKEN, env_of
from tests.unit.test_cluster_yaml import CLUSTER_YAML, load_raw, prepared, ray_head_start

pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.timeout(150)]

DRIVER = """
import sys, ray
try:
    ray.init(address=sys.argv[1], log_to_driver=False)
    print("ANSWER", ray.get(ray.remote(lambda: 41 + 1).remote(), timeout=60))
except Exception as exc:
    print("REFUSED", type(exc).__name__, exc)
"""

GCS_PROBE = """
import sys
from ray._raylet import GcsClient
try:
    GcsClient(address=sys.argv[1]).internal_kv_get(b"probe", None, timeout=5)
    print("ADMITTED")
except Exception as exc:
    print("REFUSED", type(exc).__name__, exc)
"""


@pytest.fixture(scope="module")
def head() -> Iterator[tuple[str, dict[str, str], Path]]:
    """(address, the environment without any token setting, the token file)."""
    root = Path(tempfile.mkdtemp(prefix="mbtok", dir="/tmp"))  # short: Ray's socket paths
    home = root / "home"
    home.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_USE_TLS", "RAY_TLS"))}
    base.update(HOME=str(home), RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0", RAY_USAGE_STATS_ENABLED="0")
    deploy = CLUSTER_YAML.parent / "deploy"
    for script, args, env in (("secrets.sh", [], {"MEMORYBUS_SECRETS_DIR": str(root / "s")}),
                              ("tls.sh", ["ca"], {"MEMORYBUS_TLS_DIR": str(root / "tls")}),
                              ("tls.sh", ["node"], {"MEMORYBUS_TLS_DIR": str(root / "tls")}),
                              ("tls.sh", ["ca"], {"MEMORYBUS_TLS_DIR": str(root / "other")}),
                              ("tls.sh", ["node"], {"MEMORYBUS_TLS_DIR": str(root / "other")})):
        made = subprocess.run(["bash", str(deploy / script), *args], capture_output=True, text=True, timeout=30,
                              check=False, env={**base, **env})
        assert made.returncode == 0, made.stderr
    token = root / "s" / "ray_auth_token"
    # the head's settings exactly as cluster.yaml's `ray start --head` sets them, the
    # node's paths moved into this test's directory
    yaml_env = env_of(ray_head_start(prepared(load_raw())))
    assert yaml_env == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": TOKEN, **TLS_ENV}
    node_env = {k: v.replace(TLS_DIR, str(root / "tls")) for k, v in yaml_env.items()}
    node_env["RAY_AUTH_TOKEN_PATH"] = str(token)
    port = free_port()
    proc = subprocess.Popen(
        ["ray", "start", "--head", "--block", f"--temp-dir={root}/t", f"--port={port}", "--num-cpus=1",
         "--include-dashboard=false", "--disable-usage-stats"],
        env={**base, **node_env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.time() + 60
        while probe(GCS_PROBE, f"127.0.0.1:{port}", {**base, **node_env}) != "ADMITTED":
            assert proc.poll() is None and time.time() < deadline, "the Ray head did not start"
            time.sleep(0.5)
        # callers below get TLS (what ~/.memorybus.env gives a node's processes) unless a test drops it
        yield f"127.0.0.1:{port}", {**base, **{k: v for k, v in node_env.items() if k.startswith("RAY_")
                                              and not k.startswith("RAY_AUTH")}}, token
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        shutil.rmtree(root, ignore_errors=True)


def probe(script: str, address: str, env: dict[str, str]) -> str:
    return probes([(script, env)], address)[0]


def probes(calls: list[tuple[str, dict[str, str]]], address: str) -> list[str]:
    """Each (script, environment) run against ``address`` at once (a refused caller spends
    most of its time waiting for Ray to give up): each one's last verdict line."""
    return [_verdict(out, err) for out, err in run_all([(script, env) for script, env in calls], address)]


def run_all(calls: list[tuple[str, dict[str, str]]], address: str) -> list[tuple[str, str]]:
    """Run each (script, environment) against ``address`` at once: (stdout, stderr) of each."""
    procs = [subprocess.Popen([sys.executable, "-c", script, address], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for script, env in calls]
    try:
        return [proc.communicate(timeout=90) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def _verdict(stdout: str, stderr: str) -> str:
    lines = [line for line in stdout.splitlines() if line.startswith(("ANSWER", "ADMITTED", "REFUSED"))]
    assert lines, stderr[-2000:]
    return lines[-1]


def test_a_driver_with_the_token_runs_tasks(head):
    address, base, token = head
    # what a driver on a node has: ~/.memorybus.env's RAY_AUTH_MODE and RAY_AUTH_TOKEN_PATH
    env = {**base, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    assert probe(DRIVER, address, env) == "ANSWER 42"


def test_callers_without_the_token_are_refused(head, tmp_path):
    address, base, token = head
    other = tmp_path / "other_token"
    other.write_text(os.urandom(32).hex())
    gcs_callers = (
        base,  # no token anywhere (and no ~/.ray/auth_token in this HOME)
        {**base, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(other)},  # another cluster's token
        {**base, "RAY_AUTH_MODE": "disabled"},
    )
    # and a whole driver without the token: ray.init fails, no task runs (it asks the GCS
    # RAY_NUM_REDIS_GET_RETRIES times, a second apart: 3 here instead of Ray's 20)
    impatient = {**base, "RAY_NUM_REDIS_GET_RETRIES": "3"}
    *answers, driver = probes([*((GCS_PROBE, env) for env in gcs_callers), (DRIVER, impatient)], address)
    for answer in answers:
        assert answer.startswith("REFUSED AuthenticationError"), answer
        assert token.read_text() not in answer
    assert driver.startswith("REFUSED ConnectionError"), driver


def test_callers_with_the_token_but_without_the_clusters_tls_are_refused(head):
    address, base, token = head
    with_token = {**base, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    plaintext = {k: v for k, v in with_token.items() if not k.startswith(("RAY_USE_TLS", "RAY_TLS"))}
    other_dir = str(token.parent.parent / "other")  # a CA and node certificate made by another tls.sh ca
    other_ca = {**with_token, **{k: v.replace(str(Path(base["RAY_TLS_CA_CERT"]).parent), other_dir)
                                 for k, v in base.items() if k.startswith("RAY_TLS")}}
    assert other_ca["RAY_TLS_CA_CERT"].startswith(other_dir)
    # a failed handshake looks like a GCS that is not up: the client gives up after a few
    # seconds (told to: Ray's own patience is 15 s to connect, 60 s to reconnect) and ends
    # its process ("Failed to connect to GCS"); it is never admitted
    quick = {"RAY_gcs_rpc_server_reconnect_timeout_s": "3", "RAY_gcs_rpc_server_connect_timeout_s": "2",
             "RAY_py_gcs_connect_timeout_s": "3"}
    for stdout, stderr in run_all([(GCS_PROBE, {**env, **quick}) for env in (plaintext, other_ca)], address):
        assert "ADMITTED" not in stdout, stdout
        assert "REFUSED" in stdout or "Failed to connect to GCS" in stderr, stderr[-2000:]
        assert token.read_text() not in stdout + stderr
