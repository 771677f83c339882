"""Conflict strategies on the simulation's assertions, without a bus (seconds per seed).

Generates the simulation's world and script for each seed, treats every planned
fact assertion as acknowledged in the order of its simulated time, and grades
every strategy (and the oracle ceiling) at the same check points as
``memorybus simulate`` does: after each step, for each fact written in it whose
current version was asserted. Used to tune :mod:`memorybus.bus.evidence` on some
seeds and to report it on others.

    python -m benchmarks.truth_replay --seeds 0-4
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict
from typing import Any

from memorybus.simulation.plan import Planner, roster
from memorybus.simulation.replay import ALL_STRATEGIES, Replay, Seen, oracle
from memorybus.simulation.settings import SimConfig
from memorybus.simulation.world import generate


def run(seed: int, agents: int = 24, users: int = 8, orgs: int = 2, days: int = 30,
        overconfident: int = 0, shuffle: bool = False, replay: Replay | None = None,
        diag: dict[tuple[str, int], dict[str, Any]] | None = None) -> dict[str, list[int]]:
    """``overconfident``: that many of each org's least reliable agents state .95 whatever
    they know (the simulation's agents state their reliability; these do not).
    ``shuffle``: each step's assertions in a seeded random order (as the running bus
    acknowledges them) instead of time order. ``replay``: the replay to feed (its
    weighing and prior, see :mod:`benchmarks.truth_tune`). ``diag``: gets, per checked
    fact version, its assertions and what the evidence strategy held (the last check)."""
    cfg = SimConfig(agents=agents, users=users, orgs=orgs, days=days, seed=seed)
    world = generate(cfg.orgs, cfg.users, cfg.days, cfg.seed)
    specs = roster(cfg, world)
    by_name = {a.name: a for a in specs}
    loud = {a.name for o in world.orgs
            for a in sorted((a for a in specs if a.org == o.id), key=lambda a: a.reliability)[:overconfident]}
    planner = Planner(cfg, world, specs)
    replay = replay or Replay()
    order = random.Random(f"shuffle-{seed}")
    graded: dict[tuple[str, int], dict[str, object]] = {}
    asserted: dict[tuple[str, int], list[tuple[str, float, bool]]] = defaultdict(list)
    for step in range(cfg.total_steps):
        tasks = planner.plan(step)
        writes = sorted((w.day, name, w) for name, t in tasks.items() for w in t.writes if w.op == "fact")
        if shuffle:
            order.shuffle(writes)
        written = set()
        for _, name, w in writes:
            a = planner.assertions[w.id]
            a.acked = True
            spec = by_name[name]
            stated = 0.95 if name in loud else w.confidence
            replay.feed(Seen(w.key, spec.org, w.value, name, stated, w.day, spec.lead))
            asserted[(w.key, a.version)].append((w.value, spec.reliability, a.correct, name, stated, w.day))
            written.add(w.key)
        day = (step + 1) * cfg.step_days
        for key in written:
            cur = world.version_at(key, day)
            if cur is None or (key, cur.version) not in asserted:
                continue
            rows = asserted[(key, cur.version)]
            prev = world.versions(key)[cur.version - 1].value if cur.version else None
            row: dict[str, object] = {s: replay.value(s, key) == cur.value for s in ALL_STRATEGIES}
            row["oracle"] = oracle([(r[0], r[1]) for r in rows], cur.value, prev, len(world.facts[key].options))
            row["contested"] = len({r[2] for r in rows}) > 1
            graded[(key, cur.version)] = row
            if diag is not None:
                diag[(key, cur.version)] = {**row, "key": key, "version": cur.version, "truth": cur.value,
                                            "previous": prev, "held": replay.value("evidence", key),
                                            "claims": list(rows), "day": day}
    out: dict[str, list[int]] = {}
    for name in (*ALL_STRATEGIES, "oracle"):
        out[name] = [sum(bool(r[name]) for r in graded.values()), len(graded),
                     sum(bool(r[name]) for r in graded.values() if r["contested"]),
                     sum(1 for r in graded.values() if r["contested"])]
    return out


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seeds", default="0-4")
    p.add_argument("--overconfident", type=int, default=0,
                   help="per org, this many of the least reliable agents state .95 (default 0)")
    p.add_argument("--shuffle", action="store_true",
                   help="each step's assertions in a seeded random order (as the running bus acknowledges them)")
    args = p.parse_args()
    total: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for seed in _seeds(args.seeds):
        res = run(seed, overconfident=args.overconfident, shuffle=args.shuffle)
        for k, v in res.items():
            total[k] = [a + b for a, b in zip(total[k], v, strict=True)]
    o = total["oracle"]
    print(f"{'strategy':<22}{'all':>14}{'of oracle':>11}{'contested':>14}{'of oracle':>11}")
    for name, (w, n, cw, cn) in total.items():
        print(f"{name:<22}{w:>6}/{n:<6} {w / max(o[0], 1):>9.3f}  {cw:>5}/{cn:<6}  {cw / max(o[2], 1):>9.3f}"
              f"   ({w / max(n, 1):.3f}, contested {cw / max(cn, 1):.3f})")


if __name__ == "__main__":
    main()
