"""Who observes what, and who is asked what: the runner's script, step by step.

The planner turns the world's changes into observations for some agents (a
partial view each; unreliable sources report a wrong or stale value, some
reports arrive late), adds everyday noise (small talk, tool runs, private
notes, findings), and asks questions, mostly about what *another* agent
observed. It keeps the truth of every question for grading; agents get only
the question.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

from memorybus.memory.ids import derived_id
from memorybus.scopes import Context
from memorybus.simulation.names import TOOLS, Namer
from memorybus.simulation.settings import SimConfig
from memorybus.simulation.tasks import Ack, AgentSpec, Question, StepTask, Write
from memorybus.simulation.world import Change, Finding, World, date_text, epoch

#: per agent and step: chance of small talk, a tool run, a private note, a finding
NOISE = {"chat": 0.3, "tool": 0.2, "note": 0.08, "finding": 0.15}


def roster(config: SimConfig, world: World) -> list[AgentSpec]:
    """Agents spread over orgs; each serves its org's users round robin (every user
    has an agent), half of them a second user; the first agent of an org is its lead."""
    rng = random.Random(f"roster-{config.seed}")
    agents: list[AgentSpec] = []
    for o, org in enumerate(world.orgs):
        names = [f"agent{i:02d}" for i in range(config.agents) if i % len(world.orgs) == o]
        for j, name in enumerate(names):
            users = [org.users[j % len(org.users)]]
            if len(org.users) > 1 and rng.random() < 0.5:
                users.append(rng.choice([u for u in org.users if u != users[0]]))
            lead = j == 0
            reliability = 0.97 if lead else round(rng.uniform(0.6, 0.95), 3)
            agents.append(AgentSpec(name, org.id, tuple(users), reliability, lead))
    return agents


@dataclass(slots=True)
class Truth:
    """What grading needs to know about question ``qid`` (never sent to the agent):
    the true value and how to recognise it in a text (``markers``), the fact version
    it is about, whether the asker observed that version itself, the asking scope."""

    qid: int
    agent: str
    step: int
    category: str
    value: str = ""
    markers: tuple[str, ...] = ()
    version: tuple[str, int] | None = None
    asker_observed: bool = False
    scope: tuple[str, str, str, str] = ("", "", "", "")


@dataclass(slots=True)
class Assertion:
    """A planned fact write: the fact version true when it is written, whether it
    states that version's value, who writes it, with which strategy, and whether
    the bus acknowledged it."""

    key: str
    version: int
    correct: bool
    agent: str
    strategy: str
    acked: bool = False
    value: str = ""
    confidence: float = 1.0
    day: float = 0.0
    step: int = 0


@dataclass
class Planner:
    config: SimConfig
    world: World
    agents: list[AgentSpec]
    rng: random.Random = field(init=False)
    truths: dict[int, Truth] = field(default_factory=dict)
    questions: dict[int, Question] = field(default_factory=dict)
    assertions: dict[str, Assertion] = field(default_factory=dict)
    observers: dict[tuple[str, int], set[str]] = field(default_factory=dict)
    known: dict[tuple[str, int], int] = field(default_factory=dict)  # version -> step of its first write
    findings: dict[str, tuple[Finding, str, str]] = field(default_factory=dict)  # write id -> (finding, agent, user)
    shared: list[tuple[Finding, str, tuple[str, str, str, str]]] = field(default_factory=list)
    notes: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # write id -> (agent, user, content)
    tokens: dict[str, str] = field(default_factory=dict)  # canary token -> owning agent
    _delayed: dict[int, list[tuple[str, Write]]] = field(default_factory=dict)
    _next_q: int = 0

    def __post_init__(self) -> None:
        self.rng = random.Random(f"plan-{self.config.seed}")
        self.namer = Namer(random.Random(f"tokens-{self.config.seed}"))
        self.by_name = {a.name: a for a in self.agents}

    # ---------------------------------------------------------------- helpers
    def _id(self, agent: AgentSpec, user: str, level: str, session: str = "", raw: str | None = None) -> str:
        """A seeded id of the scope the write lands in (ids carry their scope: see
        :mod:`memorybus.memory.ids`), so a retried write is the same write."""
        scope = Context(agent.org, user, agent.name, session).resolve_scope(level)
        return derived_id(scope, raw or self._raw_id())

    def _raw_id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def eligible(self, key: str) -> list[AgentSpec]:
        spec = self.world.facts[key]
        return [a for a in self.agents if a.org == spec.org and (not spec.user or spec.user in a.users)]

    def _span(self, step: int) -> tuple[float, float]:
        d = self.config.step_days
        return step * d, (step + 1) * d

    # ---------------------------------------------------------- observations
    def _observe(self, c: Change, step: int) -> list[tuple[str, Write]]:
        spec = self.world.facts[c.key]
        pool = self.eligible(c.key)
        if not pool:
            return []
        out = []
        for agent in self.rng.sample(pool, min(len(pool), 1 if self.rng.random() < 0.5 else 2)):
            value = c.value
            if self.rng.random() > agent.reliability:  # an unreliable source: a stale or a wrong value
                if c.version > 0 and self.rng.random() < 0.5:
                    value = self.world.versions(c.key)[c.version - 1].value
                else:
                    value = self.rng.choice([v for v in spec.options if v != c.value])
            delay = 0 if self.rng.random() > 0.15 else self.rng.randint(1, 3)
            at = step + delay
            if at >= self.config.total_steps:
                continue
            start, _ = self._span(at)
            day = max(c.day, start) + self.rng.uniform(0, self.config.step_days / 2)
            raw = self._raw_id()  # drawn first: the seeded sequence stays what it was
            user = spec.user or self.rng.choice(agent.users)
            w = Write(self._id(agent, user, spec.level, raw=raw), "fact", user, spec.content(value),
                      spec.level, "fact", day, key=c.key, value=value,
                      confidence=round(agent.reliability * self.rng.uniform(0.92, 1.0), 3),
                      strategy=self.config.strategy or spec.strategy, kind="semantic", importance=8.0,
                      decay_rate=0.02)
            # judged against the value true when the agent writes it (a late report may be stale)
            now = self.world.version_at(c.key, day) or c
            self.assertions[w.id] = Assertion(c.key, now.version, value == now.value, agent.name, w.strategy,
                                              value=value, confidence=w.confidence, day=day, step=at)
            self.observers.setdefault((c.key, c.version), set()).add(agent.name)
            self.known[(c.key, c.version)] = min(at, self.known.get((c.key, c.version), at))
            if delay:
                self._delayed.setdefault(at, []).append((agent.name, w))
            else:
                out.append((agent.name, w))
        return out

    def _noise(self, agent: AgentSpec, day: float) -> list[Write]:
        rng, out = self.rng, []
        user = rng.choice(agent.users)
        name = self.world.users[user].name
        if rng.random() < NOISE["chat"]:
            session = f"{agent.name}-{user}-d{int(day)}"
            out.append(Write(self._id(agent, user, "session", session), "remember", user,
                             f"{self.world.small_talk(rng, user)} on {date_text(day)}",
                             "session", "chat", day, importance=2.0, decay_rate=0.3, session=session))
        if rng.random() < NOISE["tool"]:
            out.append(Write(self._id(agent, user, "agent"), "remember", user, f"Ran {rng.choice(TOOLS)} for {name}: "
                             f"{rng.randint(1, 90)} results", "agent", "tool", day, importance=3.0, decay_rate=0.2))
        if rng.random() < NOISE["note"]:
            token = self.namer.token()
            w = Write(self._id(agent, user, "agent"), "remember", user,
                      f"Private note {token}: follow up with {name} before "
                      f"{date_text(day + 3)}", "agent", "note", day, importance=4.0)
            self.notes[w.id], self.tokens[token] = (agent.name, user, w.content), agent.name
            out.append(w)
        if rng.random() < NOISE["finding"]:
            f = self.world.finding(rng, agent.org, day)
            w = Write(self._id(agent, user, "agent"), "remember", user, f.content, "agent", "finding", day,
                      importance=6.0)
            self.findings[w.id] = (f, agent.name, user)
            out.append(w)
        return out

    # -------------------------------------------------------------- questions
    def _ask(self, agent: AgentSpec, step: int, question: Question, truth: Truth) -> Question:
        self.truths[question.id] = truth
        self.questions[question.id] = question
        return question

    def _qid(self) -> int:
        self._next_q += 1
        return self._next_q - 1

    def _truth(self, agent: AgentSpec, step: int, user: str, category: str, value: str = "",
               markers: tuple[str, ...] = (), version: tuple[str, int] | None = None) -> Truth:
        observed = version is not None and agent.name in self.observers.get(version, ())
        return Truth(self._qid(), agent.name, step, category, value, markers, version, observed,
                     (agent.org, user, agent.name, ""))

    def _fact_question(self, agent: AgentSpec, step: int, key: str, past: bool) -> Question | None:
        spec = self.world.facts[key]
        start, _ = self._span(step)
        now_v = self.world.version_at(key, start)
        if now_v is None:
            return None
        versions = [v for v in self.world.versions(key)[: now_v.version] if (key, v.version) in self.known]
        user = spec.user or self.rng.choice(agent.users)
        if past and versions:
            v = self.rng.choice(versions)
            end = min(self.world.valid_until(v), start)
            day = v.day + (end - v.day) * self.rng.uniform(0.4, 0.8)
            t = self._truth(agent, step, user, spec.category, v.value, spec.markers, (key, v.version))
            q = Question(t.qid, user, "as_of", spec.question_then.format(date=date_text(day)), ("recall",), key,
                         spec.level, epoch(day))
            return self._ask(agent, step, q, t)
        methods = ("recall", "fact", "context") if self.rng.random() < 0.25 else ("recall", "fact")
        t = self._truth(agent, step, user, spec.category, now_v.value, spec.markers, (key, now_v.version))
        return self._ask(agent, step, Question(t.qid, user, "current", spec.question, methods, key, spec.level), t)

    def _askable(self, agent: AgentSpec, step: int) -> tuple[list[str], list[str]]:
        """Fact keys whose current value some agent wrote before this step: those this
        agent did not observe, and those it did."""
        start, _ = self._span(step)
        others: list[str] = []
        own: list[str] = []
        for key, spec in self.world.facts.items():
            if spec.org != agent.org or (spec.user and spec.user not in agent.users):
                continue
            v = self.world.version_at(key, start)
            if v is None or self.known.get((key, v.version), step) >= step:
                continue
            (own if agent.name in self.observers.get((key, v.version), ()) else others).append(key)
        return others, own

    def _questions(self, agent: AgentSpec, step: int, probes: list[str]) -> list[Question]:
        out: list[Question] = []
        rng = self.rng
        if probes:
            q = self._fact_question(agent, step, rng.choice(probes), past=False)
            if q:
                out.append(q)
        others, own = self._askable(agent, step)
        for _ in range(self.config.questions_per_step):
            shared = [s for s in self.shared if s[1] != agent.name and s[2][0] == agent.org
                      and (not s[2][1] or s[2][1] in agent.users)]
            if shared and rng.random() < 0.2:
                f, _, scope = rng.choice(shared)
                user = scope[1] or rng.choice(agent.users)
                methods = ("recall", "context") if rng.random() < 0.25 else ("recall",)
                t = self._truth(agent, step, user, "finding", f.value, f.markers)
                out.append(self._ask(agent, step, Question(t.qid, user, "finding", f.question, methods), t))
                continue
            pool = others if others and (rng.random() < 0.75 or not own) else own
            if pool:
                q = self._fact_question(agent, step, rng.choice(pool), past=rng.random() < 0.3)
                if q:
                    out.append(q)
        mine = [(a, u, text) for a, u, text in self.notes.values() if a != agent.name
                and self.by_name[a].org == agent.org]
        if mine and rng.random() < 0.1:
            _, _, text = rng.choice(mine)
            user = rng.choice(agent.users)
            t = self._truth(agent, step, user, "canary")
            out.append(self._ask(agent, step, Question(t.qid, user, "canary", text, ("recall",)), t))
        return out

    # ------------------------------------------------------------------- plan
    def plan(self, step: int) -> dict[str, StepTask]:
        start, end = self._span(step)
        writes: dict[str, list[Write]] = {a.name: [] for a in self.agents}
        fresh: list[Change] = []
        for c in self.world.changes_between(start, end):
            for name, w in self._observe(c, step):
                writes[name].append(w)
            fresh.append(c)
        for name, w in self._delayed.pop(step, []):
            writes[name].append(w)
        probes: dict[str, list[str]] = {}
        for (key, version), first in self.known.items():
            if first == step - 1 and self.world.version_at(key, start) == self.world.versions(key)[version]:
                seen = self.observers.get((key, version), set())
                pool = [a for a in self.eligible(key) if a.name not in seen]
                if pool:
                    probes.setdefault(self.rng.choice(pool).name, []).append(key)
        tasks = {}
        for agent in self.agents:
            writes[agent.name] += self._noise(agent, start + self.rng.uniform(0, end - start))
            questions = self._questions(agent, step, probes.get(agent.name, []))
            tasks[agent.name] = StepTask(step, start, tuple(writes[agent.name]), tuple(questions))
        return tasks

    def absorb(self, acks: list[Ack]) -> None:
        """Learn from acknowledged writes: which assertions landed, which findings
        were shared (and how widely)."""
        for ack in acks:
            if ack.write in self.assertions:
                self.assertions[ack.write].acked = True
            if ack.broadcast_of in self.findings:
                f, agent, _ = self.findings[ack.broadcast_of]
                self.shared.append((f, agent, ack.scope))
