"""`memorybus demo`, the scripted walk-through the README names: it runs end to end and
agents find each other's memories; it cleans up after itself, and bad flags fail in one
line leaving nothing behind."""

import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


def _run(args, tmp, timeout=240):
    env = dict(os.environ, RAY_TMPDIR=str(tmp / "ray"), TMPDIR=str(tmp / "tmp"))
    (tmp / "ray").mkdir(exist_ok=True)
    (tmp / "tmp").mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "memorybus.cli", *args], capture_output=True, text=True, timeout=timeout,
        env=env, check=False,
    )


@pytest.mark.slow
def test_demo_runs_and_agents_recall_shared_memories(ray_local, tmp_path):
    """The demo joins the tests' shared Ray through ``RAY_ADDRESS``, as a command run on a
    Ray node does (a command starting its own local Ray is tested by test_simulation.py's
    README command, test_mcp_server.py's stdio server and test_sigterm.py); its data
    directory is in a private TMPDIR."""
    import ray

    tmp = tmp_path / "t"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), RAY_ADDRESS=ray.get_runtime_context().gcs_address)
    proc = subprocess.run(
        [sys.executable, "-m", "memorybus.cli", "demo"], capture_output=True, text=True, timeout=240, env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()

    def top_answer(question):
        i = next(i for i, line in enumerate(lines) if question in line)
        return lines[i + 1]

    # each answer was stored by a different agent than the one asking
    assert "The launch deadline is March 14" in top_answer("deadline for the launch")
    assert "payments service in Rust" in top_answer("Which language")
    assert "EU region" in top_answer("customer data be stored")
    assert "Monday at 10am" in top_answer("When is sprint planning")
    assert "== 9 memories on 2 shards" in proc.stdout
    # the temporary data dir it announced existed during the run and is gone now
    assert f"embedded store in {tmp}/memorybus-demo-" in proc.stdout
    assert not [p for p in os.listdir(tmp) if p.startswith("memorybus-demo-")]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "flags", [["--shards", "0"], ["--num-cpus", "0"], ["--shards", "-3", "--data-dir", "{tmp}/given"]]
)
def test_demo_with_bad_flags_fails_in_one_line_and_leaves_nothing(tmp_path, flags):
    flags = [f.format(tmp=tmp_path) for f in flags]
    proc = _run(["demo", *flags], tmp_path, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("memorybus: error:"), proc.stderr
    assert os.listdir(tmp_path / "tmp") == []  # no demo temp dir
    assert os.listdir(tmp_path / "ray") == []  # Ray never started
    assert not (tmp_path / "given").exists()


def test_version_and_help_are_fast_and_do_not_load_ray(tmp_path):
    code = (
        "import sys, time; t = time.monotonic(); from memorybus import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(time.monotonic() - t, 'ray' in sys.modules, 'torch' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    seconds, ray_loaded, torch_loaded = proc.stdout.splitlines()[-1].split()
    assert "usage: memorybus" in proc.stdout
    assert (ray_loaded, torch_loaded) == ("False", "False")
    assert float(seconds) < 3.0  # a few hundred ms on a quiet machine; the modules above are the point
    version = _run(["--version"], tmp_path, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("memorybus 0.")
