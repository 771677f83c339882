"""Ray actors for the demo agents (thin wrappers over simulation.SimAgent)."""

from __future__ import annotations

from typing import Any

import ray

from memorybus.client import MemoryBus
from memorybus.simulation import SimAgent


class AgentActor(SimAgent):
    def ask_all(self, questions: list[str]) -> list[str]:
        lines: list[str] = []
        for q in questions:
            lines += self.ask(q)
        return lines


def spawn(bus: MemoryBus, names: list[str], org: str = "acme", user: str = "u1") -> list[Any]:
    cls = ray.remote(num_cpus=0.01)(AgentActor)
    return [cls.remote(bus, org, user, name, f"session-{name}") for name in names]


def call_all(agents: list[Any], method: str, args: list[Any]) -> list[list[str]]:
    refs = [getattr(a, method).remote(arg) for a, arg in zip(agents, args, strict=True)]
    return list(ray.get(refs, timeout=300))


def kill_all(agents: list[Any]) -> None:
    for a in agents:
        ray.kill(a)
