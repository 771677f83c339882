"""`memorybus eval` in a process already on Ray: it joins that Ray and leaves it running,
and a bus that cannot start there (the eval's embedder wants 2 CPUs beside the shards, the
tests' shared Ray offers 2 in all) fails with ConfigError naming the CPUs it needs and
leaves no temporary directory behind."""

import json
import os

import pytest
import ray

import memorybus as mb
from memorybus.evaluation.runner import run_locomo
from tests.unit.test_retrieval_eval import locomo_sample

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


def test_a_run_on_a_running_ray_that_cannot_place_its_bus_leaves_ray_and_no_files(ray_local, tmp_path,
                                                                                monkeypatch):  # fmt: skip
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(locomo_sample()))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))  # where the run's data directories go
    address = ray.get_runtime_context().gcs_address
    with pytest.raises(mb.ConfigError) as err:
        run_locomo(data, tmp_path / "out", shards=1, show_progress=False)
    assert "num_cpus=3" in str(err.value)  # the CPUs the bus needs, not a fixed example
    # its data directory went with the bus that did not start (torch keeps a cache dir there)
    assert [n for n in os.listdir(scratch) if n.startswith("mb-eval-")] == []
    assert ray.is_initialized() and ray.get_runtime_context().gcs_address == address  # the Ray it joined
