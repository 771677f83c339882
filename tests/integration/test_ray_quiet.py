"""A local Ray that connect starts prints nothing that is not ours (issue 32): Ray's
notice that a new local cluster turned token authentication on (its default) is
dropped from stderr and said once, at info level, on the memorybus logger; the
cluster still runs with token authentication."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.timeout(180)]
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import logging, os, sys, ray
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="LOG %(name)s %(message)s")
from memorybus import Config
from memorybus.actors import runtime
runtime.ensure_ray(Config(), num_cpus=1, log_to_driver=False)
print("MODE", os.environ.get("RAY_AUTH_MODE"))  # Ray sets it when it turns token authentication on
ray.shutdown()
"""


def test_a_local_ray_starts_with_token_auth_and_without_rays_notice():
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=150, check=False,
                          env={**env, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "MODE token" in done.stdout
    assert done.stderr == ""  # nothing else was printed either
    assert "LOG memorybus Ray uses token authentication" in done.stdout


ENV_SCRIPT = """
import os, sys, ray
from memorybus import Config
from memorybus.actors import runtime, startup
runtime.ensure_ray(Config(), num_cpus=1, log_to_driver=False)
print("OPTIONS", startup.model_env_options())

@ray.remote(num_cpus=0.01, **startup.model_env_options())
def worker_env():
    return {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM")}

print("WORKER", sorted(ray.get(worker_env.remote()).items()))
ray.shutdown()
print("AFTER", startup.model_env_options())
"""


@pytest.mark.parametrize("preset", [None, "0"])
def test_the_model_env_reaches_workers_of_a_local_ray_without_a_runtime_env(preset):
    """A local Ray that ensure_ray starts inherits the model's environment, so actors need
    no runtime_env (they start in Ray's prestarted workers); a driver whose own environment
    says otherwise (HF_HUB_OFFLINE=0) keeps the runtime_env, so workers still get the
    model's, and after ray.shutdown the next Ray is not trusted either."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM")}
    if preset is not None:
        env["HF_HUB_OFFLINE"] = preset
    done = subprocess.run([sys.executable, "-c", ENV_SCRIPT], capture_output=True, text=True, timeout=150,
                          check=False, env={**env, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.split(" ", 1)[0].isupper())
    runtime_env = "{'runtime_env': {'env_vars': {'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1', " \
                  "'TOKENIZERS_PARALLELISM': 'false'}}}"
    assert lines["OPTIONS"] == ("{}" if preset is None else runtime_env)
    assert lines["WORKER"] == ("[('HF_HUB_OFFLINE', '1'), ('TOKENIZERS_PARALLELISM', 'false'), "
                               "('TRANSFORMERS_OFFLINE', '1')]")
    assert lines["AFTER"] == runtime_env
