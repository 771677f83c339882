"""A seeded world that changes over simulated time, with its ground truth.

Orgs have people, teams, projects and policies; users have preferences. Facts
are keyed slots whose value changes over time: people change jobs, projects
change owners and deadlines, preferences flip, policies are issued and revoked.
Every value has a validity interval ``[day, next change)``, so the true answer
to "what is X now" and "what was X on day d" is known. Agents never read this
module's truth: the runner hands them observations and grades their answers.

Time is in days since day 0 of the simulated calendar (:data:`EPOCH0` in epoch
seconds, so every seed has the same calendar and runs are reproducible).
"""

from __future__ import annotations

import bisect
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memorybus.simulation.names import POLICY_TOPICS, PREFERENCES, SMALL_TALK, TEAMS, TITLES, TOOLS, Namer

EPOCH0 = 1_704_067_200.0  # 2024-01-01T00:00:00Z
DAY = 86_400.0
STRATEGIES = ("confidence_weighted", "recency", "authority")
#: expected changes per day of one fact, by category
RATES = {"job": 1 / 45, "owner": 1 / 20, "deadline": 1 / 10, "preference": 1 / 14}


def epoch(day: float) -> float:
    return EPOCH0 + day * DAY


def date_text(day: float) -> str:
    d = datetime.fromtimestamp(epoch(day), UTC)
    return f"{d.day} {d:%B %Y}"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@dataclass(frozen=True, slots=True)
class Org:
    id: str
    name: str
    users: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class User:
    id: str
    name: str
    org: str


@dataclass(frozen=True, slots=True)
class FactSpec:
    """A keyed fact: where it lives (``org``, and ``user`` for user facts), how it is
    written (``template`` with ``{value}``), asked (``question``, ``question_then``
    with ``{date}``) and recognised in a text (``markers`` plus the value)."""

    key: str
    category: str
    org: str
    user: str
    template: str
    question: str
    question_then: str
    markers: tuple[str, ...]
    options: tuple[str, ...]
    strategy: str

    @property
    def level(self) -> str:
        return "user" if self.user else "org"

    def content(self, value: str) -> str:
        return self.template.format(value=value)


@dataclass(frozen=True, slots=True)
class Change:
    """The fact ``key`` takes ``value`` from ``day`` on (its ``version``-th value)."""

    key: str
    value: str
    day: float
    version: int


@dataclass(frozen=True, slots=True)
class Finding:
    """Something one agent finds out (a tool result): true, fixed, not keyed."""

    org: str
    content: str
    value: str
    markers: tuple[str, ...]
    question: str
    day: float


@dataclass
class World:
    days: int
    orgs: list[Org]
    users: dict[str, User]
    facts: dict[str, FactSpec]
    changes: list[Change]
    services: dict[str, list[str]] = field(default_factory=dict)
    _by_key: dict[str, list[Change]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.changes.sort(key=lambda c: (c.day, c.key))
        for c in self.changes:
            self._by_key.setdefault(c.key, []).append(c)

    # ------------------------------------------------------------ ground truth
    def versions(self, key: str) -> list[Change]:
        return self._by_key.get(key, [])

    def version_at(self, key: str, day: float) -> Change | None:
        """The value valid at ``day`` (None before the fact exists)."""
        versions = self._by_key.get(key, [])
        i = bisect.bisect_right([c.day for c in versions], day) - 1
        return versions[i] if i >= 0 else None

    def value_at(self, key: str, day: float) -> str | None:
        c = self.version_at(key, day)
        return c.value if c else None

    def changes_between(self, start: float, end: float) -> list[Change]:
        """Changes with ``start <= day < end``."""
        days = [c.day for c in self.changes]
        return self.changes[bisect.bisect_left(days, start) : bisect.bisect_left(days, end)]

    def valid_until(self, change: Change) -> float:
        versions = self._by_key[change.key]
        nxt = change.version + 1
        return versions[nxt].day if nxt < len(versions) else float("inf")

    # ------------------------------------------------------------------ noise
    def finding(self, rng: random.Random, org: str, day: float) -> Finding:
        service = rng.choice(self.services[org])
        tool = rng.choice(TOOLS)
        value = f"{rng.randint(3, 400)} items"
        when = date_text(day)
        return Finding(
            org,
            f"On {when} {tool} reported {value} for the {service} service",
            value,
            (service, tool.split()[-1]),
            f"What did {tool} report for the {service} service on {when}?",
            day,
        )

    def small_talk(self, rng: random.Random, user: str) -> str:
        return f"{self.users[user].name} chatted about {rng.choice(SMALL_TALK)}"


def generate(orgs: int, users: int, days: int, seed: int) -> World:
    """A world of ``orgs`` orgs sharing ``users`` users, changing over ``days`` days."""
    rng = random.Random(f"world-{seed}")
    namer = Namer(rng)
    org_list: list[Org] = []
    user_map: dict[str, User] = {}
    facts: dict[str, FactSpec] = {}
    changes: list[Change] = []
    services: dict[str, list[str]] = {}
    for o in range(orgs):
        oid = f"o{o}"
        uids = tuple(f"u{i}" for i in range(users) if i % orgs == o)
        for uid in uids:
            user_map[uid] = User(uid, namer.person(), oid)
        org_list.append(Org(oid, namer.word(), uids))
        people = [user_map[u].name for u in uids] + [namer.person() for _ in range(3 + len(uids))]
        services[oid] = [namer.word().lower() for _ in range(4)]
        specs = _org_facts(rng, namer, oid, people, days)
        specs += _user_facts(rng, oid, [user_map[u] for u in uids])
        for spec in specs:
            facts[spec.key] = spec
            changes += _timeline(rng, spec, days)
    return World(days, org_list, user_map, facts, changes, services)


def _strategy(rng: random.Random) -> str:
    return rng.choice(STRATEGIES)


def _org_facts(rng: random.Random, namer: Namer, org: str, people: list[str], days: int) -> list[FactSpec]:
    jobs = tuple(f"{t} in the {team} team" for t in TITLES for team in TEAMS)
    specs = [
        FactSpec(f"{org}/person/{slug(p)}/job", "job", org, "", f"{p} works as {{value}}",
                 f"What is {p}'s current role?", f"What was {p}'s role on {{date}}?", (p,), jobs, _strategy(rng))
        for p in people
    ]
    dates = tuple(date_text(d) for d in range(7, days + 90))
    for _ in range(max(2, len(people) // 3)):
        name = f"project {namer.word()}"
        specs.append(FactSpec(f"{org}/{slug(name)}/owner", "owner", org, "", f"The owner of {name} is {{value}}",
                              f"Who owns {name}?", f"Who owned {name} on {{date}}?", (name, "owner"),
                              tuple(people), _strategy(rng)))
        specs.append(FactSpec(f"{org}/{slug(name)}/deadline", "deadline", org, "",
                              f"The deadline of {name} is {{value}}", f"When is the deadline of {name}?",
                              f"What was the deadline of {name} on {{date}}?", (name, "deadline"), dates,
                              _strategy(rng)))
    for topic in rng.sample(POLICY_TOPICS, 3):
        code = f"{topic.split()[0][:3].upper()}-{rng.randint(10, 99)}"
        specs.append(FactSpec(f"{org}/policy/{slug(code)}", "policy", org, "", f"The {topic} policy {code} {{value}}",
                              f"Is the {topic} policy {code} in force?",
                              f"Was the {topic} policy {code} in force on {{date}}?", (code,),
                              ("is in force", "was revoked"), _strategy(rng)))
    return specs


def _user_facts(rng: random.Random, org: str, users: list[User]) -> list[FactSpec]:
    specs = []
    for user in users:
        for topic in rng.sample(sorted(PREFERENCES), 2):
            specs.append(FactSpec(f"{org}/{user.id}/prefers/{slug(topic)}", "preference", org, user.id,
                                  f"For {topic}, {user.name} prefers {{value}}",
                                  f"What does {user.name} prefer for {topic}?",
                                  f"What did {user.name} prefer for {topic} on {{date}}?", (user.name, topic),
                                  PREFERENCES[topic], _strategy(rng)))
    return specs


def _timeline(rng: random.Random, spec: FactSpec, days: int) -> list[Change]:
    """The values of one fact over ``[0, days)``; consecutive values differ."""
    if spec.category == "policy":
        issued = round(rng.uniform(0, days * 0.6), 2)
        out = [Change(spec.key, spec.options[0], issued, 0)]
        revoked = round(issued + rng.uniform(2, days), 2)
        if rng.random() < 0.6 and revoked < days:
            out.append(Change(spec.key, spec.options[1], revoked, 1))
        return out
    value = rng.choice(spec.options)
    out = [Change(spec.key, value, 0.0, 0)]
    day = 0.0
    while True:
        day = round(day + rng.expovariate(RATES[spec.category]), 2)
        if day >= days:
            return out
        value = rng.choice([v for v in spec.options if v != value])
        out.append(Change(spec.key, value, day, len(out)))
