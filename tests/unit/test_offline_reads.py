"""Operator commands reading a data directory straight from its files (memorybus.operator.offline):
the same answers as the shards that wrote it, nothing written, no Ray or model imported,
the operator key required, and a directory a running bus holds refused with the way to
reach that bus. No Ray here: the shards are opened in this process as their actors
open them, with seeded random unit vectors of the model's shape."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memorybus import Config, Context, MemoryNode, Scope
from memorybus.auth.credential import OPERATOR_ORG
from memorybus.auth.keyring import KeyRing, open_keys
from memorybus.errors import NotAuthorized, StoreMismatch, StoreUnavailable
from memorybus.memory.codec import node_to_dict
from memorybus.operator.offline import DirectReader
from memorybus.scopes import Router, shard_name
from memorybus.shard.build import open_shard
from memorybus.storage import dirlock
from memorybus.storage.sqlite import SqliteStore
from memorybus.transfer import read_export

ALL = ["active", "consolidated", "deprecated", "archived"]
ROOT = Path(__file__).resolve().parents[2]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, 384)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A two-shard data directory written by the shards themselves, and what the shards
    answered before they closed: (directory, answers)."""
    data = tmp_path_factory.mktemp("offline") / "data"
    cfg = Config.embedded(data, num_shards=2)
    kv = open_keys(cfg)
    KeyRing.load(kv).ensure(OPERATOR_ORG)
    kv.close()
    shards = [open_shard(cfg, shard_name(i)) for i in range(2)]
    router = Router(2)
    rng = np.random.default_rng(5)
    asked = []
    for u in range(6):
        ctx = Context("acme", f"u{u}", "a1", "s1")
        scope = Scope("acme", f"u{u}") if u % 3 else Scope("acme")
        shard = shards[router.shard_for(scope.key)]
        vectors = _unit(rng, 8)
        shard.put_many(ctx, [MemoryNode(content=f"note {u}-{i} about topic {i}", scope=scope) for i in range(8)], vectors)
        asked.append((ctx, vectors[0]))
        fact = shards[router.shard_for(Scope("acme", f"u{u}").key)]
        for value, conf in (("tea", 0.5), ("coffee", 0.9)):
            node = MemoryNode(content=f"u{u} drinks {value}", scope=Scope("acme", f"u{u}"), key=f"user:u{u}/drink",
                              confidence=conf)
            fact.assert_fact(ctx, node, _unit(rng, 1)[0])
    for ctx, vector in asked + asked[:2] * 3:
        for shard in shards:
            shard.search(ctx, vector, k=3)
    for shard in shards:
        shard.flush()
    keyed = next(n for n in shards[0].list_memories(None, statuses=ALL, limit=1000) + shards[1].list_memories(
        None, statuses=ALL, limit=1000) if n.key and n.contradicts)
    answers = {
        "stats": [s.stats() for s in shards],
        "listed": sorted((n for s in shards for n in s.list_memories(None, statuses=ALL, limit=1000)),
                         key=lambda n: (n.created_at, n.id)),
        "inspected": next(hit for s in shards if (hit := s.inspect(keyed.id)) is not None),
        "keyed": keyed,
    }
    for shard in shards:
        shard.close()
    return data, answers


def _d(nodes):
    """Memories as comparable data (MemoryNode compares by identity)."""
    return [node_to_dict(n, with_embedding=False) for n in nodes]


def _digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in directory.rglob("*.sqlite")}  # fmt: skip


def test_direct_reads_answer_as_the_shards_did(written):
    data, answers = written
    with DirectReader(data) as reader:
        stats = reader.stats()
        assert stats["shards"] == answers["stats"]
        assert stats["memories"] == sum(s["memories"] for s in answers["stats"]) == 6 * 8 + 12
        assert stats["most_recalled"][0][1] >= 4  # asked once, then three times more
        page = reader.list_memories(None, statuses=ALL, limit=1000)
        assert _d(page.memories) == _d(answers["listed"]) and page.cursor is None
        first = reader.list_memories(None, statuses=ALL, limit=7)
        rest = reader.list_memories(None, statuses=ALL, limit=1000, cursor=first.cursor)
        assert _d(first.memories + rest.memories) == _d(answers["listed"])
        active = reader.list_memories(None, within=Scope("acme", "u1"), limit=1000).memories
        assert {n.scope for n in active} == {Scope("acme", "u1")} and all(n.status.value == "active" for n in active)
        found = reader.inspect(answers["keyed"].id)
        node, history = answers["inspected"]
        assert _d([found.node]) == _d([node]) and len(history) == 2
        assert [(e.seq, e.kind, e.data, _d([e.node])) for e in found.history] == [
            (e.seq, e.kind, e.data, _d([e.node])) for e in history]
        assert [n.id for n in found.links["contradicts"]] == list(answers["keyed"].contradicts)
        assert reader.namespace == "memorybus"  # as the stores record it
    with pytest.raises(StoreMismatch, match="belongs to bus 'memorybus'"):
        DirectReader(data, namespace="another_bus")  # as a bus of another namespace is refused


def test_the_cli_reads_without_ray_or_a_model_and_writes_nothing(written, tmp_path):
    data, answers = written
    before = _digest(data)
    out = tmp_path / "all.mbx"
    script = f"""
import io, json, sys, contextlib
from memorybus.cli import main
outputs = {{}}
for argv in (["stats", "--json"], ["ls", "--all", "--json", "--status", "all"], ["show", {answers["keyed"].id!r}],
             ["export", {str(out)!r}], ["top", "--iterations", "1"]):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main([argv[0], *argv[1:], "--data-dir", {str(data)!r}])
    outputs[argv[0]] = (code, buf.getvalue())
heavy = [m for m in ("ray", "torch", "sentence_transformers", "transformers", "qdrant_edge") if m in sys.modules]
print(json.dumps({{"outputs": outputs, "heavy": heavy}}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["heavy"] == []
    outputs = result["outputs"]
    assert all(code == 0 for code, _ in outputs.values()), outputs
    assert json.loads(outputs["stats"][1])["shards"] == answers["stats"]
    listed = [json.loads(line)["id"] for line in outputs["ls"][1].splitlines()]
    assert listed == [n.id for n in answers["listed"]]
    assert "asserted" in outputs["show"][1] and "contradicts" in outputs["show"][1]
    assert "(read from the files)" in outputs["top"][1] and "most recalled:" in outputs["top"][1]
    with DirectReader(data) as reader:
        exported = read_export(out, key=reader.export_key())  # sealed with the bus's own export key
    assert sorted(n.id for n in exported.nodes) == sorted(n.id for n in answers["listed"])
    assert all(n.embedding is not None and n.embedding.shape == (384,) for n in exported.nodes)
    assert _digest(data) == before  # read-only: no store file changed


def test_reading_the_files_needs_the_operator_key(written, tmp_path):
    data, _ = written
    keyless = tmp_path / "keyless"
    (keyless / "shard-0").mkdir(parents=True)
    (keyless / "shard-0" / "records.sqlite").write_bytes((data / "shard-0" / "records.sqlite").read_bytes())
    with pytest.raises(NotAuthorized, match="operator key"):
        DirectReader(keyless)  # no key ring at all
    kv = open_keys(Config.embedded(keyless))  # a ring without the operator's key
    KeyRing.load(kv).ensure("acme")
    kv.close()
    with pytest.raises(NotAuthorized, match="holds none"):
        DirectReader(keyless)
    os.remove(keyless / "auth.sqlite")
    (keyless / "auth.sqlite").mkdir()  # there, but not a readable key ring
    with pytest.raises(NotAuthorized, match="cannot be read"):
        DirectReader(keyless)


def test_a_read_only_store_creates_and_writes_nothing(tmp_path):
    with pytest.raises(StoreUnavailable):
        SqliteStore(tmp_path / "none" / "records.sqlite", read_only=True)
    assert not (tmp_path / "none").exists()
    SqliteStore(tmp_path / "r.sqlite").close()
    store = SqliteStore(tmp_path / "r.sqlite", read_only=True)
    with pytest.raises(StoreUnavailable, match="readonly"):
        store.set_meta({"k": "v"})
    store.close()
    assert SqliteStore(tmp_path / "r.sqlite", read_only=True).meta() == {}


def test_a_directory_a_running_bus_holds_is_refused_with_the_way_to_reach_it(written, tmp_path):
    data, _ = written
    lock = dirlock.acquire(str(data / "shard-1"), "namespace=app_ns")  # as a running bus's shard actor holds it
    try:
        script = f"""
import sys
from memorybus.cli import main
code = main(["stats", "--data-dir", {str(data)!r}])
print("CODE", code, "RAY", "ray" in sys.modules)
"""
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        lock.release()
    assert "CODE 2 RAY False" in done.stdout, done.stderr  # refused before anything started
    assert "in use by another running bus" in done.stderr and "namespace=app_ns" in done.stderr
    assert "--ray-address" in done.stderr
