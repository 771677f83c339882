"""What the runner hands an agent each step, and what the agent hands back.

Plain, picklable records. A task carries what the agent observed (which may be
wrong) and the questions it is asked; never the ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """One agent: its org, the users it serves (one context each), the reliability
    of its sources (what it states as confidence), and whether it is the org's lead
    (an authority for the ``authority`` strategy)."""

    name: str
    org: str
    users: tuple[str, ...]
    reliability: float
    lead: bool = False


@dataclass(frozen=True, slots=True)
class Write:
    """Something the agent observed and writes: a keyed fact (``op="fact"``) or a
    memory (``op="remember"``). ``id`` is chosen by the caller, so a retried write
    is the same write. ``day`` is when the agent observed it (simulated)."""

    id: str
    op: str
    user: str
    content: str
    level: str
    tag: str
    day: float
    key: str = ""
    value: str = ""
    confidence: float = 1.0
    strategy: str = ""
    kind: str = "episodic"
    importance: float = 5.0
    decay_rate: float = 0.05
    session: str = ""


@dataclass(frozen=True, slots=True)
class Question:
    """A question for the agent, asked from its context for ``user``. ``key`` and
    ``level`` name a keyed fact (for ``current_fact``); ``as_of`` (epoch seconds)
    asks about the past; ``methods`` are the calls to answer with: ``recall``,
    ``fact`` (current_fact), ``context`` (context_for)."""

    id: int
    user: str
    kind: str
    text: str
    methods: tuple[str, ...]
    key: str = ""
    level: str = "org"
    as_of: float | None = None


@dataclass(frozen=True, slots=True)
class StepTask:
    step: int
    day: float
    writes: tuple[Write, ...] = ()
    questions: tuple[Question, ...] = ()


@dataclass(frozen=True, slots=True)
class Hit:
    """A recalled memory as the agent saw it."""

    id: str
    content: str
    scope: tuple[str, str, str, str]
    key: str | None = None


@dataclass(slots=True)
class Ack:
    """A write the bus acknowledged: the write's id, the node it stored or reinforced,
    the outcome of a fact assertion, and when it returned (wall clock)."""

    write: str
    node: str
    scope: tuple[str, str, str, str]
    content: str
    at: float
    outcome: str = "stored"
    broadcast_of: str = ""


@dataclass(slots=True)
class Answer:
    question: int
    agent: str
    at: float
    recall: list[Hit] | None = None
    fact: Hit | None = None
    context: str | None = None
    context_hits: list[Hit] = field(default_factory=list)
    notebook: list[str] = field(default_factory=list)
    pushed: str | None = None
    errors: list[str] = field(default_factory=list)


@dataclass(slots=True)
class StepResult:
    agent: str
    step: int
    acks: list[Ack] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # write ids the bus never acknowledged
    answers: list[Answer] = field(default_factory=list)
    latencies: list[tuple[str, float, bool]] = field(default_factory=list)  # (op, seconds, ok)
    started: float = 0.0
    finished: float = 0.0


@dataclass(slots=True)
class Received:
    """One event an agent's subscription delivered: the subscription's user, the
    event's memory, scope, kind, the write it reports (for fact assertions), its
    commit time and when it arrived."""

    user: str
    node: str
    scope: tuple[str, str, str, str]
    kind: str
    write: str
    committed: float
    arrived: float
    extra: dict[str, Any] = field(default_factory=dict)
