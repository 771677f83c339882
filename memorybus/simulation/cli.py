"""``memorybus simulate``: the command line of the simulation.

Bad input (an unknown flag, sizes no world can have, an address nothing
answers on) gets one line on stderr and exit status 2, before anything is
started or written. A run whose integrity checks fail (a lost acknowledged
write, a scope leak, an event a live subscriber never got) exits with 1.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from typing import Any

from memorybus import env

DEFAULT_OUT = "simulation-out"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "simulate",
        help="many agents sharing changing knowledge through the bus, graded against ground truth",
        description="Agents (Ray actors) observe parts of a changing world, write and share it through the bus, "
        "and answer questions whose answers other agents observed; the run is graded against the ground truth.",
    )
    p.add_argument("--agents", type=int, default=24, help="agent actors (default 24)")
    p.add_argument("--users", type=int, default=8, help="users the agents serve (default 8)")
    p.add_argument("--orgs", type=int, default=2, help="orgs (default 2)")
    p.add_argument("--days", type=int, default=30, help="simulated days (default 30)")
    p.add_argument("--steps", type=int, default=None, help="steps (default: two per simulated day)")
    p.add_argument("--seed", type=int, default=0, help="seed of the world, the script and the faults")
    p.add_argument("--chaos", action="store_true",
                   help="inject faults: kill shard, embedder and hub actors; restart Redis; remove a worker node")
    p.add_argument("--faults", default=None, metavar="KINDS",
                   help="with --chaos, only these faults (comma-separated: shard,embedder,bus,redis,node)")
    p.add_argument("--backend", choices=("embedded", "redis"), default="embedded",
                   help="embedded: SQLite files; redis: a private redis-server this run starts")
    p.add_argument("--redis-url", default=None,
                   help="with --backend redis: use this server (one every node reaches) instead of a private one")
    p.add_argument("--address", default=None, help="a running Ray cluster (HOST:PORT); default: start Ray here")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"directory for simulation.json and plots ({DEFAULT_OUT})")
    p.add_argument("--shards", type=int, default=2, help="memory shards (default 2)")
    p.add_argument("--strategy", default=None, metavar="NAME",
                   help="resolve every fact with this strategy (evidence, confidence_weighted, recency, authority, "
                   "or default: the bus's); default: each fact its own, drawn by the world")
    p.add_argument("--questions", type=int, default=1, help="questions per agent per step (default 1)")
    p.add_argument("--no-progress", action="store_true", help="no live progress line")
    p.set_defaults(func=cmd_simulate)


def _fail(message: str) -> int:
    print(f"memorybus simulate: error: {message}", file=sys.stderr)
    return 2


def _reachable(address: str) -> str | None:
    """None when something listens at ``address`` (HOST:PORT), else why not."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return f"--address {address!r} is not HOST:PORT"
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            return None
    except OSError as exc:
        return f"cannot reach a Ray cluster at {address}: {exc.strerror or exc}"


class Progress:
    """A live line on a terminal; a line every tenth of the run otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.tty = sys.stdout.isatty()

    def __call__(self, p: dict[str, Any]) -> None:
        if not self.enabled:
            return
        acc = p["accuracy"]
        top1, base = acc["recall_top1"], acc["no_bus_top1"]
        line = (f"step {p['step'] + 1}/{p['steps']}  day {p['day']:.1f}  {p['ops_per_s']:.0f} ops/s  "
                f"recall top-1 {'-' if top1 is None else f'{top1:.2f}'} "
                f"(no bus {'-' if base is None else f'{base:.2f}'})  faults {p['faults']}")
        if self.tty:
            print("\r" + line.ljust(100), end="", flush=True)
        elif (p["step"] + 1) % max(1, p["steps"] // 10) == 0 or p["step"] + 1 == p["steps"]:
            print(line, flush=True)

    def done(self) -> None:
        if self.enabled and self.tty:
            print(flush=True)


def cmd_simulate(args: argparse.Namespace) -> int:
    from memorybus.errors import MemoryBusError
    from memorybus.simulation.settings import SimConfig

    try:
        config = SimConfig(agents=args.agents, users=args.users, orgs=args.orgs, days=args.days, steps=args.steps,
                           seed=args.seed, chaos=args.chaos, backend=args.backend, address=args.address,
                           redis_url=args.redis_url,
                           faults=tuple(k for k in args.faults.split(",") if k) if args.faults else None,
                           shards=args.shards, questions_per_step=args.questions, strategy=args.strategy)
    except MemoryBusError as exc:
        return _fail(str(exc))
    if args.address and (why := _reachable(args.address)):
        return _fail(why)
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        return _fail(f"--out {args.out} exists and is not a directory")
    env.prepare()
    from memorybus.actors import runtime
    from memorybus.simulation import report, runner

    print(f"memorybus simulate: {config.agents} agents, {config.users} users, {config.orgs} orgs, "
          f"{config.days} days in {config.total_steps} steps, seed {config.seed}, {config.backend} backend"
          + (", chaos" if config.chaos else ""), flush=True)
    progress = Progress(not args.no_progress)
    t0 = time.time()
    try:
        result = runner.simulate(config, args.out, progress=progress,
                                 ray_init={"log_to_driver": False, "include_dashboard": False})
    # a bus that cannot start, a cluster that refuses us (Ray raises ConnectionError,
    # RuntimeError or ValueError), an output folder we cannot write: one line, no traceback
    except (MemoryBusError, OSError, RuntimeError, ValueError) as exc:
        progress.done()
        text = (str(exc).strip().splitlines() or [""])[0]
        return _fail(text if isinstance(exc, MemoryBusError) else f"{type(exc).__name__}: {text}")
    except KeyboardInterrupt:
        progress.done()
        return _fail("interrupted")
    finally:
        runtime.shutdown()
    progress.done()
    print(report.summary(result))
    print(f"\nwrote {os.path.join(args.out, 'simulation.json')} and plots in {time.time() - t0:.0f} s")
    i = result["integrity"]
    broken = i["lost_acknowledged_writes"] or i["scope_leaks"] or i["events_missing"]
    return 1 if broken else 0
