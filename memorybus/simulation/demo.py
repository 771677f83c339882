"""``memorybus demo``: a scripted walk-through with three agents.

Three agents serving one user share a memory bus: each records what it learns
(some privately, some for the whole user or org), then each asks questions
whose answers another agent stored. The measured, many-agent run is
``memorybus simulate`` (:mod:`memorybus.simulation.runner`). The agent logic is
a plain class; the Ray wrapper lives in :mod:`memorybus.actors.fleet`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memorybus.client import MemoryBus
from memorybus.scopes import Context


@dataclass(frozen=True)
class Observation:
    content: str
    scope: str  # "agent" | "user" | "org" | "session"
    importance: float = 5.0


SCRIPT: dict[str, tuple[list[Observation], list[str]]] = {
    "researcher": (
        [
            Observation("The user is building a payments service in Rust", "user", 8),
            Observation("The user's team deploys to Kubernetes on AWS", "user", 6),
            Observation("Competitor analysis draft is half done", "agent", 3),
            Observation("Company policy: customer data stays in the EU region", "org", 9),
        ],
        ["What is the deadline for the launch?"],
    ),
    "planner": (
        [
            Observation("The launch deadline is March 14", "user", 9),
            Observation("Sprint planning happens every Monday at 10am", "org", 5),
            Observation("Today's session is about the migration checklist", "session", 4),
        ],
        ["Which language is the payments service written in?", "Where must customer data be stored?"],
    ),
    "writer": (
        [
            Observation("The user prefers short bullet-point summaries", "user", 7),
            Observation("Draft of the release notes is in progress", "agent", 3),
        ],
        ["How does the user like summaries formatted?", "When is sprint planning?"],
    ),
}


class DemoAgent:
    """One simulated agent: remembers its observations, answers from the bus."""

    def __init__(self, bus: MemoryBus, org: str, user: str, name: str, session: str) -> None:
        self.bus = bus
        self.name = name
        self.context = Context(org=org, user=user, agent=name, session=session)

    def observe(self, observations: list[Observation]) -> list[str]:
        items = [
            {
                "content": o.content,
                "scope": o.scope,
                "importance": o.importance,
                "source": f"agent:{self.name}",
            }
            for o in observations
        ]
        stored = self.bus.remember_many(items, self.context)
        return [
            f"[{self.name}] stored ({o.scope}) {n.content}" for o, n in zip(observations, stored, strict=True)
        ]

    def ask(self, question: str, k: int = 2) -> list[str]:
        hits = self.bus.recall(question, self.context, k=k)
        lines = [f"[{self.name}] asks: {question}"]
        lines += [
            f"    {h.score:.3f}  {h.node.content}   (from {h.node.source or '?'}, {h.node.scope.level.value})"
            for h in hits
        ]
        return lines

    def ask_all(self, questions: list[str]) -> list[str]:
        lines: list[str] = []
        for q in questions:
            lines += self.ask(q)
        return lines


Call = Callable[[list[object], str, list[object]], list[list[str]]]


def run(
    bus: MemoryBus, spawn: Callable[..., list[object]], call: Call, out: Callable[[str], None]
) -> dict[str, int]:
    """Run the script with agents created by ``spawn`` and driven by ``call(agents,
    method, args)`` (Ray actors, or plain objects)."""
    names = list(SCRIPT)
    agents = spawn(bus, names)
    out("== phase 1: agents remember what they learned")
    for lines in call(agents, "observe", [SCRIPT[n][0] for n in names]):
        for line in lines:
            out(line)
    out("== phase 2: agents recall what other agents shared")
    answered = 0
    for lines in call(agents, "ask_all", [SCRIPT[n][1] for n in names]):
        for line in lines:
            out(line)
            answered += line.startswith("    ")
    total = bus.count()
    out(f"== {total} memories on {bus.config.num_shards} shards; {answered} recalled lines")
    return {"memories": total, "recalled": answered}

