"""Faults on demand (``--chaos``): a seeded schedule and the injector that runs it.

Kinds: ``shard``, ``embedder`` and ``hub`` kill that actor (Ray restarts it);
``redis`` kills the Redis server with SIGKILL and starts it again on the same
directory (only when the run started the server); ``node`` removes a worker
node (only with a Ray address or a test cluster). Each kind in the schedule
happens at least once, at a random moment inside a step, while agents work.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from memorybus.errors import ConfigError, MemoryBusError
from memorybus.simulation.redis_server import RedisServer

#: kills one of the bus's actors by kind and index, returns its name (ActorUnavailable if it cannot)
KillActor = Callable[[str, int], str]
#: removes a worker node, returns its id (a MemoryBusError if it cannot)
RemoveNode = Callable[[], str]


@dataclass(frozen=True, slots=True)
class Fault:
    step: int
    kind: str
    index: int = 0
    delay: float = 0.0  # seconds after the step started


def schedule(steps: int, kinds: list[str], shards: int, seed: int) -> list[Fault]:
    """About one fault per eight steps (each kind at least once, a node at most once),
    between 10% and 85% of the run, never two in one step."""
    rng = random.Random(f"chaos-{seed}")
    lo, hi = max(1, steps // 10), max(1, int(steps * 0.85))
    slots = list(range(lo, hi + 1))
    rng.shuffle(slots)
    count = min(len(slots), max(len(kinds), steps // 8))
    picks = list(kinds) + [rng.choice([k for k in kinds if k != "node"] or kinds) for _ in range(count - len(kinds))]
    rng.shuffle(picks)
    faults = [
        Fault(step, kind, rng.randrange(shards) if kind == "shard" else 0, round(rng.uniform(0.05, 0.6), 3))
        for step, kind in zip(sorted(slots[:count]), picks, strict=False)
    ]
    return sorted(faults, key=lambda f: f.step)


@dataclass
class Injector:
    """Runs faults; each leaves a record (what, when, whether it took)."""

    kill_actor: KillActor
    redis: RedisServer | None = None
    remove_node: RemoveNode | None = None
    redis_down_seconds: float = 1.5
    records: list[dict[str, Any]] = field(default_factory=list)

    def kinds(self, wanted: tuple[str, ...] | None = None) -> list[str]:
        """The kinds this run can inject (of ``wanted``; None: all of them)."""
        out = ["shard", "embedder", "hub"]
        if self.redis is not None:
            out.append("redis")
        if self.remove_node is not None:
            out.append("node")
        return [k for k in out if wanted is None or k in wanted]

    def inject(self, fault: Fault, day: float, started: float) -> dict[str, Any]:
        record: dict[str, Any] = {**asdict(fault), "day": day, "wall": time.time() - started, "ok": True}
        try:
            if fault.kind == "redis":
                if self.redis is None:
                    raise ConfigError("faults", "a redis fault needs the redis backend")
                self.redis.kill9()
                time.sleep(self.redis_down_seconds)
                self.redis.start()
                record["target"] = f"redis-server :{self.redis.port}"
            elif fault.kind == "node":
                if self.remove_node is None:
                    raise ConfigError("faults", "a node fault needs a multi-node cluster")
                record["target"] = f"node {self.remove_node()}"
            else:
                record["target"] = self.kill_actor(fault.kind, fault.index)
        except (MemoryBusError, OSError, subprocess.SubprocessError) as exc:  # the bus's, the OS's
            record.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
        self.records.append(record)
        return record
