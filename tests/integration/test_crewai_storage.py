"""BusStorage against CrewAI's own interfaces, in a venv of its own (CrewAI conflicts with
the shared environment's mcp extra; see crewai_venv.py): the ``StorageBackend`` protocol,
``crewai.Memory`` saving, recalling, updating, forgetting and resetting on a real local bus
with the real model, and the CrewAI example of docs/integrations.md as written
(crewai_probe.py holds the checks). Skipped, saying why, where the venv cannot be built."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.integration import crewai_venv

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def venv_python() -> str:
    why = crewai_venv.build()
    if why is not None:
        pytest.skip(why)
    return str(crewai_venv.python())


def test_bus_storage_meets_crewai_memory_and_runs_the_docs_example(ray_local, venv_python, tmp_path):
    """The venv's interpreter joins the tests' shared Ray (``RAY_ADDRESS``): its actors run
    the shared environment's memorybus, as they would on a cluster's nodes."""
    import ray

    env = dict(os.environ, PYTHONPATH=str(crewai_venv.ROOT), HF_HUB_OFFLINE="1", CREWAI_DISABLE_TELEMETRY="true",
               OTEL_SDK_DISABLED="true", CREWAI_TRACING_ENABLED="false",
               RAY_ADDRESS=ray.get_runtime_context().gcs_address)  # fmt: skip
    proc = subprocess.run([venv_python, "-m", "tests.integration.crewai_probe", str(tmp_path)], cwd=crewai_venv.ROOT,
                          env=env, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "ALL OK" in proc.stdout, out[-6000:]
    # the venv really ran CrewAI's code, with its own pydantic beside the shared environment's
    assert "ok: BusStorage is a crewai StorageBackend (runtime_checkable)" in proc.stdout
