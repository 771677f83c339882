"""The README's main job: ``memorybus demo`` runs end to end and agents find each other's memories."""

import os
import subprocess
import sys
import tempfile

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


def test_demo_runs_and_agents_recall_shared_memories(tmp_path):
    env = dict(os.environ, RAY_TMPDIR=tempfile.mkdtemp(prefix="mbdemo", dir="/tmp"))
    proc = subprocess.run(
        [sys.executable, "-m", "memorybus.cli", "demo", "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
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
    assert (tmp_path / "d" / "shard-0" / "records.sqlite").exists()
