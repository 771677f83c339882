"""A small data directory for the inspector's tests, written by the real plain Shard
(real SQLite, real Qdrant Edge) and a real hub subscription store: no Ray, no model
(the vectors are fixed unit vectors; the inspector never searches them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from memorybus import Context, ManualClock, MemoryKind, MemoryNode, Scope
from memorybus.bus.records import Subscription, subscription_id
from memorybus.bus.store import SubscriptionStore
from memorybus.memory.events import EventFilter
from memorybus.shard import Shard
from memorybus.storage.kv import SqliteKV
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

DIM = 8
ALICE = Context("acme", "alice", "planner", "s1")
BOB = Context("acme", "bob", "coder")
#: (seconds after T0, value) of the fact ``deploy.region`` in acme's org scope
REGION = [(0.0, "The deploy region is eu-west-1"), (3600.0, "The deploy region is us-east-2")]
T0 = 1_700_000_000.0


def _vec(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    return v


def build(data_dir: Path) -> dict[str, Any]:
    """Writes the directory; returns what the tests look for."""
    clock = ManualClock(T0)
    shard_dir = data_dir / "shard-0"
    shard = Shard("shard-0", SqliteStore(shard_dir / "records.sqlite"), EdgeVectorIndex(shard_dir / "vectors", DIM),
                  dim=DIM, clock=clock, detect_contradictions=False, dedupe=False)
    try:
        texts = [
            (ALICE, Scope("acme", "alice", "planner", "s1"), "Alice prefers green tea in the morning"),
            (ALICE, Scope("acme", "alice"), "Alice owns the billing service"),
            (BOB, Scope("acme", "bob", "coder"), "The flaky integration test is in the payments module"),
            (BOB, Scope("acme"), "Standup moved to 10:30 on Tuesdays"),
        ]
        stored = []
        for i, (ctx, scope, text) in enumerate(texts):
            clock.advance(60)
            stored += shard.put_many(ctx, [MemoryNode(content=text, scope=scope, kind=MemoryKind.EPISODIC)],
                                     np.stack([_vec(i)]))
        results = []
        for offset, value in REGION:
            clock.set(T0 + 7200 + offset)
            results.append(shard.assert_fact(BOB, MemoryNode(content=value, key="deploy.region", scope=Scope("acme")),
                                             _vec(5)))
    finally:
        shard.close()
    kv = SqliteKV(data_dir / "bus-0" / "bus.sqlite")
    try:
        owner = Context("acme", "alice", "planner")
        sub = Subscription(subscription_id(owner, "facts"), owner, EventFilter.of(keys=["deploy.*"]), None, "on_event",
                           {Scope("acme").key: 1}, name="facts")
        SubscriptionStore(kv).save(sub)
    finally:
        kv.close()
    return {"memories": stored, "facts": results, "superseded": results[0].node.id, "current": results[1].node.id}


def write_report(out_dir: Path) -> None:
    """A simulation report directory: the JSON and one real PNG plot (matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    result = {"run": {"id": "run-7", "seconds": 12.5, "steps": 3, "ops": 120, "ops_per_second": 9.6},
              "accuracy": {"overall": {"recall": 0.91, "no_bus": 0.42}},
              "staleness": {"answer_days": [0.1, 0.2], "delivery": {"p50_ms": 3.1}},
              "series": [{"step": 0}, {"step": 1}, {"step": 2}], "faults": []}
    (out_dir / "simulation.json").write_text(json.dumps(result))
    fig, ax = plt.subplots(figsize=(4, 2))
    ax.plot([0, 1, 2], [0.5, 0.8, 0.9])
    fig.savefig(out_dir / "accuracy.png", dpi=50)
    plt.close(fig)
