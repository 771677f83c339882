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

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180)]
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
