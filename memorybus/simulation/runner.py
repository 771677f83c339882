"""``memorybus simulate``: many agents sharing changing knowledge through the bus.

One run: generate the world, start the bus (embedded, or a private Redis) and
one actor per agent, then step through simulated time. Each step every agent
writes what it observed and answers its questions; maintenance (decay,
consolidation) runs on its schedule at simulated time; with chaos, faults hit
while agents work. Answers are graded against the ground truth as they come
in; at the end the run waits for event delivery, audits what the bus holds,
and writes the report (:mod:`memorybus.simulation.report`).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from memorybus.client import MemoryBus, connect
from memorybus.config import BusPolicy, Config
from memorybus.errors import InvalidRequest, MemoryBusError
from memorybus.scopes import Context
from memorybus.simulation import audit, chaos, report
from memorybus.simulation.agent import FAULTS, AgentActor
from memorybus.simulation.grading import Grader, states
from memorybus.simulation.plan import Planner, Truth, roster
from memorybus.simulation.redis_server import RedisServer
from memorybus.simulation.replay import ALL_STRATEGIES, Replay, Seen, oracle
from memorybus.simulation.settings import SimConfig
from memorybus.simulation.tasks import Ack, StepResult
from memorybus.simulation.world import World, epoch, generate

Progress = Callable[[dict[str, Any]], None]


class Run:
    """The state of one run (see :func:`simulate`)."""

    def __init__(self, config: SimConfig, data_dir: str, remove_node: chaos.RemoveNode | None) -> None:
        self.config = config
        self.data_dir = data_dir
        self.world: World = generate(config.orgs, config.users, config.days, config.seed)
        self.agents = roster(config, self.world)
        self.planner = Planner(config, self.world, self.agents)
        self.grader = Grader(tokens=self.planner.tokens)
        self.run_id = f"sim{uuid.uuid4().hex[:8]}"
        self.redis: RedisServer | None = None
        self.remove_node = remove_node
        self.acks: list[Ack] = []
        self.failed: list[str] = []
        self.latencies: list[tuple[str, float, bool]] = []
        self.series: list[dict[str, Any]] = []
        self.conflicts: dict[tuple[str, int], dict[str, Any]] = {}
        self.maintenance: list[dict[str, Any]] = []
        self.step_walls: list[float] = []
        #: every strategy replayed on the acknowledged assertions, and the oracle's ceiling
        self.replay = Replay()
        self.replayed: dict[tuple[str, int], dict[str, bool]] = {}
        self.reports: dict[tuple[str, int], list[tuple[str, float]]] = {}  # (value, true reliability)
        self.observed_at: dict[tuple[str, int], int] = {}  # version -> step of its first true acked report
        self.by_name = {a.name: a for a in self.agents}
        self.started = time.time()
        self.steps_started = self.started

    # ------------------------------------------------------------- the bus
    def bus_config(self) -> Config:
        common: dict[str, Any] = {
            "num_shards": self.config.shards,
            "namespace": self.run_id,
            "bus": BusPolicy(authorities=("role:lead",)),
            "ray_address": self.config.address,
            "data_dir": os.path.join(self.data_dir, "bus"),
        }
        if self.config.backend == "redis" and self.config.redis_url:
            return Config.redis(self.config.redis_url, **common)
        if self.config.backend == "redis":
            self.redis = RedisServer(os.path.join(self.data_dir, "redis"))
            self.redis.start()
            return Config.redis(self.redis.url, **common)
        return Config.embedded(**common)

    # ------------------------------------------------------------ one step
    def absorb(self, step: int, day: float, results: list[StepResult]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        acks = [a for r in results for a in r.acks]
        self.acks += acks
        for r in results:
            self.failed += r.failed
            self.latencies += r.latencies
        for a in acks:
            self.grader.register(a.node, a.scope)
        self.planner.absorb(acks)
        for a in sorted(acks, key=lambda x: x.at):  # the order the bus acknowledged them
            s = self.planner.assertions.get(a.write)
            if s is None:
                continue
            spec = self.by_name[s.agent]
            self.replay.feed(Seen(s.key, spec.org, s.value, s.agent, s.confidence, s.day, spec.lead))
            self.reports.setdefault((s.key, s.version), []).append((s.value, spec.reliability))
            if s.correct:
                self.observed_at.setdefault((s.key, s.version), step)
        for r in results:
            for ans in r.answers:
                q, t = self.planner.questions[ans.question], self.planner.truths[ans.question]
                graded = self.grader.grade(step, day, ans.at, q, t, ans)
                explain(self, step, t, ans, graded)
                rows += graded
        return rows

    def check_conflicts(self, bus: MemoryBus, day: float, acks: list[Ack]) -> None:
        """After a step's writes: for every fact written to in the step whose current
        world value was asserted, is the value the bus resolved (``current_fact``) the
        true one? A fact's head only moves when it is written to, so the last judgement
        of a version stands. ``contested``: the version was asserted both truly and
        wrongly; otherwise the bus chose between the previous value and a new one."""
        seen: dict[tuple[str, int], set[bool]] = {}
        for a in self.planner.assertions.values():
            if a.acked:
                seen.setdefault((a.key, a.version), set()).add(a.correct)
        todo = []
        for key in {self.planner.assertions[a.write].key for a in acks if a.write in self.planner.assertions}:
            current = self.world.version_at(key, day)
            if current is not None and (key, current.version) in seen:
                todo.append((key, current))

        async def read(key: str) -> Any:
            spec = self.world.facts[key]
            try:
                return await asyncio.wait_for(bus.current_fact_async(key, Context(spec.org, spec.user),
                                                                     scope=spec.level), 30)
            except FAULTS as exc:  # a fault in progress: judged after a later write
                return exc

        async def read_all() -> list[Any]:
            return list(await asyncio.gather(*(read(key) for key, _ in todo)))

        for key, current in todo:
            spec = self.world.facts[key]
            version = (key, current.version)
            previous = self.world.versions(key)[current.version - 1].value if current.version else None
            self.replayed[version] = {
                **{s: self.replay.value(s, key) == current.value for s in ALL_STRATEGIES},
                "oracle": oracle(self.reports.get(version, []), current.value, previous, len(spec.options)),
                "contested": len(seen[version]) > 1,
            }
        for (key, current), node in zip(todo, asyncio.run(read_all()) if todo else [], strict=True):
            if isinstance(node, BaseException):
                continue
            spec = self.world.facts[key]
            truth = Truth(-1, "", 0, spec.category, current.value, spec.markers)
            self.conflicts[(key, current.version)] = {
                "strategy": self.config.strategy or spec.strategy, "category": spec.category,
                "contested": len(seen[(key, current.version)]) > 1,
                "won": node is not None and states(node.content, truth),
            }


def explain(run: Run, step: int, t: Truth, ans: Any, rows: list[dict[str, Any]]) -> None:
    """Mark each graded row ``observed`` (a true report of the asked version was
    acknowledged before this step) and give each wrong recall or current_fact answer
    a ``why``: ``never observed`` (no true report acknowledged yet), ``late`` (the
    first true report came in this step), ``stale`` (it states the version before),
    ``wrong`` (the truth was known in time and another value came back)."""
    first = run.observed_at.get(t.version) if t.version else None
    observed = first is not None and first < step
    previous = None
    if t.version and t.version[1] > 0:
        prev = run.world.versions(t.version[0])[t.version[1] - 1].value
        previous = Truth(-1, "", 0, t.category, prev, t.markers)
    for row in rows:
        row["observed"] = observed
        if row["top1"] or row["method"] not in ("recall", "current_fact"):
            continue
        if t.version is None:
            row["why"] = "wrong"
            continue
        text = (ans.fact.content if ans.fact else "") if row["method"] == "current_fact" else \
            (ans.recall[0].content if ans.recall else "")
        if first is None:
            row["why"] = "never observed"
        elif first >= step:
            row["why"] = "late"
        elif previous is not None and states(text, previous):
            row["why"] = "stale"
        else:
            row["why"] = "wrong"


def _maintain(bus: MemoryBus, day: float, records: list[dict[str, Any]], orgs: list[str]) -> None:
    """Decay and consolidation of every org at the simulated day (maintenance is scoped:
    each org's context runs its own)."""
    now = epoch(day)
    for kind in ("decay", "consolidation"):
        t0 = time.perf_counter()
        try:
            counts: dict[str, int] = {}
            for org in orgs:
                ctx = Context(org)
                status = bus.run_decay(ctx, now) if kind == "decay" else bus.run_consolidation(ctx, now)
                for k, v in status.get("last_counts", {}).items():
                    counts[k] = counts.get(k, 0) + int(v)
            records.append({"kind": kind, "day": day, "seconds": time.perf_counter() - t0,
                            "counts": counts, "ok": True})
        except MemoryBusError as exc:
            records.append({"kind": kind, "day": day, "ok": False, "error": f"{type(exc).__name__}: {exc}"[:200]})


def simulate(
    config: SimConfig,
    out_dir: str | None = None,
    *,
    progress: Progress | None = None,
    remove_node: chaos.RemoveNode | None = None,
    ray_init: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run one simulation; returns the report (also written to ``out_dir`` with plots).

    ``remove_node`` removes a worker node when the chaos schedule says so (tests
    pass a ``ray.cluster_utils.Cluster``'s; with ``config.address`` the default
    kills a worker node's raylet). ``ray_init``: keyword arguments for
    ``ray.init`` when this call starts Ray. ``overrides``: fields of the bus's
    :class:`~memorybus.Config` (e.g. ``shard_resources`` to place shards).
    """
    from memorybus.actors import fleet

    data_dir = tempfile.mkdtemp(prefix="memorybus-sim-")
    run = Run(config, data_dir, remove_node)
    bus: MemoryBus | None = None
    handles: list[Any] = []
    try:
        cfg = run.bus_config().with_(**(overrides or {}))
        bus = connect(cfg, **(ray_init or {}))
        if config.chaos and remove_node is None and config.address:
            run.remove_node = lambda: fleet.kill_worker_node(cfg)
        live = bus.config  # as connect resolved it (an embedder pool named by the environment)
        injector = chaos.Injector(lambda kind, i: fleet.kill_bus_actor(live, kind, i), run.redis, run.remove_node)
        kinds = injector.kinds(config.faults)
        if config.chaos and config.faults and set(config.faults) - set(kinds):
            raise InvalidRequest("faults", f"this run cannot inject {sorted(set(config.faults) - set(kinds))} "
                                 "(redis needs --backend redis; node needs --address)")
        faults = chaos.schedule(config.total_steps, kinds, config.shards, config.seed) if config.chaos else []
        handles = fleet.spawn_agents(AgentActor, bus, run.agents, run.run_id, config.seed, config.op_timeout)
        _steps(run, bus, handles, faults, injector, progress)
        return _finish(run, bus, handles, injector, out_dir)
    finally:
        fleet.kill_all(handles)
        if bus is not None:
            bus.shutdown()
        if run.redis is not None:
            run.redis.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def _steps(run: Run, bus: MemoryBus, handles: list[Any], faults: list[chaos.Fault], injector: chaos.Injector,
           progress: Progress | None) -> None:
    from memorybus.actors import fleet

    config = run.config
    maint_thread: threading.Thread | None = None
    next_maintenance = config.maintenance_days
    run.steps_started = time.time()
    step_timeout = max(120.0, config.op_timeout * 20)
    for step in range(config.total_steps):
        day = step * config.step_days
        tasks = run.planner.plan(step)
        t0 = time.time()
        run.step_walls.append(t0)
        refs = fleet.step_agents(handles, [tasks[a.name] for a in run.agents])
        if day >= next_maintenance and (maint_thread is None or not maint_thread.is_alive()):
            next_maintenance += config.maintenance_days
            orgs = [o.id for o in run.world.orgs]
            maint_thread = threading.Thread(target=_maintain, args=(bus, day, run.maintenance, orgs), daemon=True)
            maint_thread.start()
        for fault in [f for f in faults if f.step == step]:
            time.sleep(fault.delay)
            injector.inject(fault, day, run.steps_started)
        results = fleet.collect(refs, step_timeout)
        rows = run.absorb(step, day, results)
        run.check_conflicts(bus, day + config.step_days, [a for r in results for a in r.acks])
        lat = [x for r in results for x in r.latencies]
        elapsed = max(1e-6, time.time() - t0)
        point = report.step_point(step, day, time.time() - run.steps_started, elapsed, rows, lat)
        run.series.append(point)
        if progress is not None:
            progress({**point, "steps": config.total_steps, "faults": len(injector.records),
                      "accuracy": report.running_accuracy(run.grader.rows)})
    if maint_thread is not None:
        maint_thread.join(timeout=600)


def _finish(run: Run, bus: MemoryBus, handles: list[Any], injector: chaos.Injector,
            out_dir: str | None) -> dict[str, Any]:
    from memorybus.actors import fleet

    phase = time.time() - run.steps_started
    deadline = time.monotonic() + (120.0 if run.config.chaos else 45.0)
    while True:  # let the subscriptions catch up
        received = fleet.reports(handles)
        delivery = audit.deliveries(run.agents, received, run.acks)
        if delivery["missing"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    for spec, events in zip(run.agents, received, strict=True):
        run.grader.check_received(spec.name, spec.org, events)
    facts: dict[str, tuple[tuple[str, str, str, str], str, list[str]]] = {}
    for a in run.acks:
        assertion = run.planner.assertions.get(a.write)
        if assertion is not None:
            fact = run.world.facts[assertion.key]
            facts.setdefault(assertion.key, ((fact.org, fact.user, "", ""), fact.level, []))[2].append(a.write)
    lost = asyncio.run(audit.lost_writes(bus, run.acks))
    histories = asyncio.run(audit.fact_histories(bus, facts))
    consolidated = sum(int(m.get("counts", {}).get("consolidated", 0)) for m in run.maintenance if m["ok"])
    held = bus.count()
    acked_nodes = len({a.node for a in run.acks})
    audits = {
        "lost_acknowledged_writes": lost["lost"] + histories["missing"],
        "lost_detail": {"memories": lost, "fact_histories": histories},
        "scope_leaks": len(run.grader.leaks),
        "leak_examples": run.grader.leaks[:10],
        "duplicate_fact_assertions": histories["duplicated"],
        "memories_held": held,
        "memories_acknowledged": acked_nodes,
        "consolidation_summaries": consolidated,
        "writes_failed": len(run.failed),
        "unaccounted_memories": max(0, held - acked_nodes - consolidated - len(run.failed)),
        "failed_examples": run.failed[:10],
    }
    result = report.build(run, phase, audits, delivery, injector.records, [asdict(a) for a in run.agents])
    if out_dir:
        report.write(result, out_dir)
    return result
