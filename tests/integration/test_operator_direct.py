"""Operator commands with and without a running bus (issue 32): while a bus holds its
data directory, ``memorybus stats|ls|show|export`` go through that bus; after it
closed, the same commands read the files directly (no Ray, no model) and answer the
same, byte for byte where the answer is data."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import memorybus as mb
from memorybus import Config, Context
from memorybus.cli import main as cli
from memorybus.memory.codec import node_to_dict
from memorybus.operator.offline import DirectReader
from memorybus.transfer import read_export

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]
ROOT = Path(__file__).resolve().parents[2]
KEY = "user:u1/editor"


def _commands(data: Path, fact_id: str, out: Path) -> list[list[str]]:
    flags = ["--data-dir", str(data)]
    return [["stats", "--json", *flags], ["ls", "--all", "--json", "--status", "all", "--limit", "7", *flags],
            ["show", fact_id, "--json", *flags], ["export", str(out), *flags]]  # fmt: skip


def _run_here(argv: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli(argv)
    return code, buf.getvalue()


@pytest.fixture(scope="module")
def answers(ray_local, tmp_path_factory):
    """A bus's data directory and the commands' answers through that running bus."""
    folder = tmp_path_factory.mktemp("opdirect")
    data = folder / "data"
    cfg = Config.embedded(data, num_shards=2, namespace="op_direct", touch_flush_seconds=0.0, embedder_num_cpus=0.5)
    with mb.connect(cfg) as bus:
        ctx = Context("acme", "u1", "planner", "s1")
        bus.remember_many(["The release is on Friday", "Backups run nightly", "The cafe closes at six"], ctx)
        bus.assert_fact(KEY, "User edits with vim", ctx, scope="user", confidence=0.6)
        fact = bus.assert_fact(KEY, "User moved to helix", ctx, scope="user", confidence=0.9)
        gone = bus.remember("Something to forget", ctx)
        bus.forget(gone.id, ctx)
        bus.remember("Tea is the other user's drink", Context("acme", "u2", "writer"))
        bus.recall("when is the release?", ctx, k=2)
        bus.flush()
        fact_id = fact.node.id
        through = [_run_here(argv) for argv in _commands(data, fact_id, folder / "bus.mbx")]  # the bus holds the dir
    return data, fact_id, through, folder


def test_while_a_bus_holds_the_directory_the_commands_go_through_it(answers):
    _, _, through, _ = answers
    assert [code for code, _ in through] == [0, 0, 0, 0]
    stats = json.loads(through[0][1])
    assert all("process" in s for s in stats["shards"])  # the shard actors answered, not the files
    assert stats["memories"] == 6 and stats["facts"] == 1  # the forgotten one is gone


def test_after_it_closed_the_files_answer_the_same_without_ray_or_a_model(answers):
    data, fact_id, through, folder = answers
    script = """
import contextlib, io, json, sys
from memorybus.cli import main
out = []
for argv in json.loads(sys.argv[1]):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(argv)
    out.append((code, buf.getvalue()))
heavy = [m for m in ("ray", "torch", "sentence_transformers", "transformers") if m in sys.modules]
print(json.dumps({"out": out, "heavy": heavy}))
"""
    argv = _commands(data, fact_id, folder / "direct.mbx")
    done = subprocess.run([sys.executable, "-c", script, json.dumps(argv)], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["heavy"] == []
    direct = result["out"]
    assert [code for code, _ in direct] == [0, 0, 0, 0]
    bus_stats, file_stats = json.loads(through[0][1]), json.loads(direct[0][1])
    for s in bus_stats["shards"]:
        s.pop("process")
    assert file_stats == bus_stats
    assert direct[1][1] == through[1][1] and len(direct[1][1].splitlines()) == 6  # the superseded fact too
    assert json.loads(direct[2][1]) == json.loads(through[2][1])
    with DirectReader(data) as reader:
        key = reader.export_key()
    by_bus, by_files = read_export(folder / "bus.mbx", key=key), read_export(folder / "direct.mbx", key=key)
    assert [node_to_dict(n) for n in by_files.nodes] == [node_to_dict(n) for n in by_bus.nodes]
    assert (by_files.events, by_files.slots) == (by_bus.events, by_bus.slots)
    assert {**by_files.header, "created_at": 0} == {**by_bus.header, "created_at": 0}
