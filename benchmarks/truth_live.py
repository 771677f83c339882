"""Conflict resolution as the running bus does it: ``memorybus simulate`` per seed, pooled.

:mod:`benchmarks.truth_replay` replays the planned assertions without a bus. This
runs the simulation itself (one ``memorybus simulate`` process per seed, embedded
backend, Ray started and stopped by each) and pools, over the seeds:

- ``live``: the value the bus resolved (``current_fact`` after each step) was the
  true one, on all checked fact versions and on contested ones (asserted both truly
  and wrongly), as a share of the oracle's ceiling on the same acknowledged
  assertions;
- every strategy replayed on those assertions in the order the bus acknowledged them
  (``recency`` is the baseline the targets compare with);
- ``current_fact`` accuracy on questions whose answer some agent observed before;
- the latency table's ``assert_fact`` p50 per run, and the integrity audit.

``--tree`` runs another checkout's code (e.g. an older commit unpacked with
``git archive``) to compare latencies in the same session; without ``--strategy``
each fact keeps the strategy the world drew for it.

    python -m benchmarks.truth_live --seeds 400-405 --strategy evidence
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

from benchmarks.truth_replay import _seeds


def run(seed: int, tree: str, out: str, strategy: str | None, size: list[str]) -> dict[str, Any]:
    """One simulation in its own process; its report."""
    folder = os.path.join(out, f"seed{seed}")
    cmd = [sys.executable, "-m", "memorybus.cli", "simulate", "--seed", str(seed), "--no-progress",
           "--out", folder, *size]
    if strategy:
        cmd += ["--strategy", strategy]
    env = {**os.environ, "PYTHONPATH": tree, "HF_HUB_OFFLINE": "1"}
    t0 = time.time()
    done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if not os.path.exists(os.path.join(folder, "simulation.json")):
        raise SystemExit(f"seed {seed}: simulate failed ({done.returncode}):\n{done.stderr[-2000:]}")
    with open(os.path.join(folder, "simulation.json")) as f:
        report: dict[str, Any] = json.load(f)
    report["_wall"] = time.time() - t0
    return report


def pooled(reports: list[dict[str, Any]], strategy: str | None) -> dict[str, Any]:
    live = [0, 0, 0, 0]  # won, resolved, contested won, contested
    replay: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    cf = [0.0, 0]
    p50s, broken = [], []
    for r in reports:
        for name, c in r["conflicts"].items():
            if strategy is None or name == strategy:
                for i, k in enumerate(("won", "resolved", "contested_won", "contested")):
                    live[i] += int(c[k])
        for name, t in r.get("truth", {}).get("replay", {}).items():
            for i, k in enumerate(("won", "resolved", "contested_won", "contested")):
                replay[name][i] += int(t[k])
        obs = (r.get("truth", {}).get("current_fact_observed") or {})
        if obs.get("n"):
            cf[0] += float(obs["top1"]) * int(obs["n"])
            cf[1] += int(obs["n"])
        p50s.append(r["latency_ms"].get("assert_fact", {}).get("p50"))
        i = r["integrity"]
        broken.append((i["lost_acknowledged_writes"], i["scope_leaks"], i["duplicate_fact_assertions"],
                       i["events_missing"]))
    return {"live": live, "replay": dict(replay), "current_fact_observed": (cf[0] / cf[1], cf[1]) if cf[1] else None,
            "assert_fact_p50": p50s, "integrity": broken}


def show(p: dict[str, Any], label: str) -> None:
    o = p["replay"].get("oracle")

    def row(name: str, w: int, n: int, cw: int, cn: int) -> str:
        of = f"{w / max(o[0], 1):.3f}" if o else "-"
        cof = f"{cw / max(o[2], 1):.3f}" if o else "-"
        return (f"  {name:<28}{w:>5}/{n:<5} {of:>7}   contested {cw:>4}/{cn:<4} {cof:>7}"
                f"   ({w / max(n, 1):.3f}, contested {cw / max(cn, 1):.3f})")

    print(f"{label}: true value resolved (share of the oracle's ceiling)")
    print(row("live (the bus's current_fact)", *p["live"]))
    for name, v in p["replay"].items():
        print(row(f"replayed {name}", *v))
    cf = p["current_fact_observed"]
    print(f"  current_fact where the answer was observed: {'-' if cf is None else f'{cf[0]:.3f} (n {cf[1]})'}")
    p50 = [x for x in p["assert_fact_p50"] if x is not None]
    print(f"  assert_fact p50 per run (ms): {p50}  median {statistics.median(p50) if p50 else '-'}")
    print(f"  integrity per run (lost, leaks, duplicates, events missing): {p['integrity']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="400-405")
    p.add_argument("--strategy", default=None, help="every fact resolved with this strategy (default: the world's)")
    p.add_argument("--tree", default=os.getcwd(), help="the checkout whose code runs (default: this one)")
    p.add_argument("--out", default=None, help="where the runs' reports go (default: a temporary folder)")
    p.add_argument("--agents", default="24")
    p.add_argument("--users", default="8")
    p.add_argument("--days", default="30")
    args = p.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="truth-live-")
    size = ["--agents", args.agents, "--users", args.users, "--days", args.days]
    reports = []
    for seed in _seeds(args.seeds):
        r = run(seed, os.path.abspath(args.tree), out, args.strategy, size)
        reports.append(r)
        print(f"seed {seed}: {r['_wall']:.0f} s, conflicts {r['conflicts']}", flush=True)
    show(pooled(reports, args.strategy), f"{args.tree} seeds {args.seeds} strategy {args.strategy or 'the world'}")


if __name__ == "__main__":
    main()
