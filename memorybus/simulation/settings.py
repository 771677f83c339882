"""What a simulation run is asked to do: sizes, seed, faults, backend, output."""

from __future__ import annotations

from dataclasses import dataclass

from memorybus.errors import InvalidRequest

#: upper bounds that keep a run on one machine sane (a larger world is a cluster job)
STRATEGY_NAMES = ("evidence", "confidence_weighted", "recency", "authority")
FAULT_KINDS = ("shard", "embedder", "hub", "redis", "node")
LIMITS = {"agents": 512, "users": 4096, "orgs": 64, "days": 3650, "steps": 100_000}


@dataclass(frozen=True, slots=True)
class SimConfig:
    """One simulation run.

    ``agents`` agent actors and ``users`` users are spread over ``orgs`` orgs; each
    org needs at least two agents (knowledge has to travel between agents) and at
    least one user, and every user is served by at least one agent. ``days`` of
    simulated time pass in ``steps`` steps (default: two per day). ``seed`` fixes
    the world, who observes what, the questions and the fault schedule.
    """

    agents: int = 24
    users: int = 8
    orgs: int = 2
    days: int = 30
    steps: int | None = None
    seed: int = 0
    chaos: bool = False
    #: fault kinds under chaos (None: every kind this run can inject; see simulation.chaos)
    faults: tuple[str, ...] | None = None
    backend: str = "embedded"
    address: str | None = None
    #: an existing Redis for ``backend="redis"`` (default: the run starts a private one on 127.0.0.1)
    redis_url: str | None = None
    questions_per_step: int = 1
    maintenance_every_days: float | None = None  # default: five runs per simulation
    op_timeout: float = 30.0
    shards: int = 2
    #: every fact resolved with this strategy (None: each fact its own, drawn by the world)
    strategy: str | None = None

    def __post_init__(self) -> None:
        for name, top in LIMITS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise InvalidRequest(name, f"must be a whole number between 1 and {top}, got {value!r}")
        if self.agents < 2 * self.orgs:
            raise InvalidRequest("agents", f"{self.agents} agents cannot give each of {self.orgs} orgs two agents")
        if self.users < self.orgs:
            raise InvalidRequest("users", f"{self.users} users cannot give each of {self.orgs} orgs a user")
        if self.users > self.agents:
            raise InvalidRequest("users", f"{self.users} users need at least as many agents (got {self.agents})")
        if self.backend not in ("embedded", "redis"):
            raise InvalidRequest("backend", f"must be 'embedded' or 'redis', got {self.backend!r}")
        if self.redis_url is not None and self.backend != "redis":
            raise InvalidRequest("redis_url", "is only used with the redis backend")
        if self.chaos and self.address and self.backend != "redis":
            raise InvalidRequest("backend", "chaos on a cluster removes a node: use the redis backend "
                                 "(records must outlive the node)")
        if self.faults is not None:
            unknown = set(self.faults) - set(FAULT_KINDS)
            if unknown or not self.faults:
                raise InvalidRequest("faults", f"must be some of {', '.join(FAULT_KINDS)}, got {sorted(unknown)}")
            if "redis" in self.faults and (self.backend != "redis" or self.redis_url):
                raise InvalidRequest("faults", "a redis fault needs the redis backend with a server the run starts")
            if "node" in self.faults and not self.address:
                raise InvalidRequest("faults", "removing a node needs a Ray cluster (an address)")
        if not 0 <= self.questions_per_step <= 20:
            raise InvalidRequest("questions_per_step", "must be between 0 and 20")
        if self.strategy is not None and self.strategy not in (*STRATEGY_NAMES, "default"):
            raise InvalidRequest("strategy", f"must be one of {', '.join(STRATEGY_NAMES)} or default")
        if not 1 <= self.shards <= 64:
            raise InvalidRequest("shards", "must be between 1 and 64")
        if not self.op_timeout > 0:
            raise InvalidRequest("op_timeout", "must be positive")
        if self.maintenance_every_days is not None and not self.maintenance_every_days > 0:
            raise InvalidRequest("maintenance_every_days", "must be positive")

    @property
    def total_steps(self) -> int:
        return self.steps if self.steps is not None else 2 * self.days

    @property
    def maintenance_days(self) -> float:
        return self.maintenance_every_days or self.days / 5

    @property
    def step_days(self) -> float:
        return self.days / self.total_steps
