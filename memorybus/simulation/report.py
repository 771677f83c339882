"""The simulation's report: figures per run and over time, JSON, terminal table.

Methods graded: ``recall`` (top-1 / top-5 of the hits), ``current_fact``,
``context_for`` (a line of the prompt block states the answer), ``pushed`` (the
value the agent's subscriptions pushed to it) and ``no_bus`` (the baseline: the
agent's own observations only, newest first, perfectly remembered).

``truth``: every conflict strategy replayed on the assertions the bus
acknowledged, as a share of the oracle's ceiling (:mod:`memorybus.simulation.replay`),
the wrong answers per question kind and method with their reason, and for the
changes no non-observer ever answered correctly, why.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Protocol

from memorybus.latency import percentile
from memorybus.simulation.grading import accuracy
from memorybus.simulation.replay import ALL_STRATEGIES

if TYPE_CHECKING:
    from memorybus.simulation.grading import Grader
    from memorybus.simulation.plan import Planner
    from memorybus.simulation.settings import SimConfig
    from memorybus.simulation.world import World


class Run(Protocol):
    """What the report reads of a finished run (:class:`memorybus.simulation.runner.Run`
    has it; the report never imports the runner)."""

    config: SimConfig
    run_id: str
    world: World
    planner: Planner
    grader: Grader
    latencies: list[tuple[str, float, bool]]
    series: list[dict[str, Any]]
    conflicts: dict[tuple[str, int], dict[str, Any]]
    maintenance: list[dict[str, Any]]
    step_walls: list[float]
    replayed: dict[tuple[str, int], dict[str, bool]]
    observed_at: dict[tuple[str, int], int]

METHODS = ("recall", "current_fact", "context_for", "pushed", "no_bus")
KINDS = ("current", "as_of", "finding")
WRITE_OPS = ("remember", "assert_fact", "broadcast")
READ_OPS = ("recall", "recall_as_of", "current_fact", "context_for")


def _ms(values: Sequence[float]) -> dict[str, Any]:
    return {f"p{q}": None if (v := percentile(values, q)) is None else round(v * 1000, 2) for q in (50, 95, 99)}


def step_point(step: int, day: float, wall: float, elapsed: float, rows: list[dict[str, Any]],
               latencies: list[tuple[str, float, bool]]) -> dict[str, Any]:
    ok = [x for x in latencies if x[2]]
    return {
        "step": step, "day": round(day, 3), "wall": round(wall, 2), "ops": len(ok),
        "ops_per_s": round(len(ok) / elapsed, 1), "errors": len(latencies) - len(ok),
        "recall_top1": accuracy(rows, "recall"), "no_bus_top1": accuracy(rows, "no_bus"),
        "questions": len({r["question"] for r in rows}),
        "read_ms": _ms([s for op, s, good in latencies if good and op in READ_OPS])["p50"],
        "write_ms": _ms([s for op, s, good in latencies if good and op in WRITE_OPS])["p50"],
    }


def running_accuracy(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    return {"recall_top1": accuracy(rows, "recall"), "no_bus_top1": accuracy(rows, "no_bus")}


def _acc(rows: list[dict[str, Any]], **where: Any) -> dict[str, Any]:
    out = {}
    for m in METHODS:
        n = sum(1 for r in rows if r["method"] == m and all(r.get(k) == v for k, v in where.items()))
        if n:
            out[m] = {"top1": accuracy(rows, m, "top1", **where), "top5": accuracy(rows, m, "top5", **where), "n": n}
    return out


def _dist(values: Sequence[float], unit: str, scale: float = 1.0) -> dict[str, Any]:
    return {"n": len(values), **{f"p{q}_{unit}": None if (v := percentile(values, q)) is None else round(v * scale, 3)
                                 for q in (50, 90, 99)}}


def build(run: Run, phase_seconds: float, audits: dict[str, Any], delivery: dict[str, Any],
          faults: list[dict[str, Any]], agents: list[dict[str, Any]]) -> dict[str, Any]:
    rows = run.grader.rows
    ok = [x for x in run.latencies if x[2]]
    by_op: dict[str, list[float]] = {}
    errors: Counter[str] = Counter()
    for op, s, good in run.latencies:
        if good:
            by_op.setdefault(op, []).append(s)
        else:
            errors[op] += 1
    stale_s, stale_days, never = [], [], 0
    for (key, version), first in run.grader.first_correct.items():
        change = run.world.versions(key)[version]
        step = min(len(run.step_walls) - 1, int(change.day / run.config.step_days))
        stale_s.append(max(0.0, first["wall"] - run.step_walls[step]))
        stale_days.append(max(0.0, first["day"] - change.day))
    asked = {r["question"]: r for r in rows if r["kind"] == "current" and not r["asker_observed"]}
    asked_versions = {run.planner.truths[q].version for q in asked}
    never = len(asked_versions - set(run.grader.first_correct))
    conflicts: dict[str, dict[str, Any]] = {}
    for c in run.conflicts.values():
        tally = conflicts.setdefault(c["strategy"], {"resolved": 0, "won": 0, "contested": 0, "contested_won": 0})
        tally["resolved"] += 1
        tally["won"] += int(c["won"])
        tally["contested"] += int(c["contested"])
        tally["contested_won"] += int(c["contested"] and c["won"])
    for tally in conflicts.values():
        tally["rate"] = round(tally["won"] / tally["resolved"], 3)
    return {
        **_truth(run, rows, asked_versions),
        "config": asdict(run.config),
        "run": {"id": run.run_id, "seconds": round(phase_seconds, 2), "steps": len(run.series),
                "ops": len(ok), "ops_per_second": round(len(ok) / max(phase_seconds, 1e-6), 1)},
        "world": {"facts": len(run.world.facts), "changes": len(run.world.changes),
                  "changes_by_category": dict(Counter(run.world.facts[c.key].category for c in run.world.changes))},
        "accuracy": {
            "overall": _acc(rows),
            "by_kind": {k: _acc(rows, kind=k) for k in KINDS},
            "observed_by_another_agent": _acc(rows, asker_observed=False),
            "by_category": {c: _acc(rows, category=c) for c in sorted({r["category"] for r in rows})},
            "wrong_examples": run.grader.wrong[:20],
        },
        "staleness": {
            "first_correct_answer": {**_dist(stale_s, "s"), **_dist(stale_days, "days"), "never": never},
            "delivery": _dist(delivery["latencies"], "ms", 1000),
            "delivery_to_every_subscriber": _dist(delivery["to_every_subscriber"], "ms", 1000),
            "answer_seconds": [round(x, 3) for x in stale_s],
            "answer_days": [round(x, 3) for x in stale_days],
            "delivery_seconds": [round(x, 4) for x in delivery["latencies"]],
        },
        "conflicts": conflicts,
        "integrity": {**audits, "events_committed": delivery["committed"], "events_delivered": delivery["delivered"],
                      "events_missing": delivery["missing"], "missing_examples": delivery["examples"]},
        "latency_ms": {op: {"n": len(v), "errors": errors[op], **_ms(v)} for op, v in sorted(by_op.items())},
        "maintenance": run.maintenance,
        "faults": faults,
        "series": run.series,
        "agents": agents,
    }


def _truth(run: Run, rows: list[dict[str, Any]], asked: set[Any]) -> dict[str, Any]:
    """Every strategy replayed on the same acknowledged assertions, as a share of the
    oracle's ceiling; the wrong answers explained; the changes never answered, why."""
    points = list(run.replayed.values())
    contested = [p for p in points if p["contested"]]
    ceiling = {"all": sum(p["oracle"] for p in points), "contested": sum(p["oracle"] for p in contested)}
    replay: dict[str, Any] = {}
    for name in (*ALL_STRATEGIES, "oracle"):
        won, cwon = sum(p[name] for p in points), sum(p[name] for p in contested)
        replay[name] = {"won": won, "resolved": len(points), "contested_won": cwon, "contested": len(contested),
                        "of_oracle": round(won / max(1, ceiling["all"]), 3),
                        "contested_of_oracle": round(cwon / max(1, ceiling["contested"]), 3)}
    errors: dict[str, dict[str, dict[str, int]]] = {}
    for r in rows:
        if "why" in r:
            tally = errors.setdefault(r["kind"], {}).setdefault(r["method"], {})
            tally[r["why"]] = tally.get(r["why"], 0) + 1
    first = run.grader.first_correct
    never = {"no agent asked": 0, "never observed": 0, "lost to a wrong value": 0}
    for c in run.world.changes:
        version = (c.key, c.version)
        if version in first:
            continue
        if version not in asked:
            never["no agent asked"] += 1
        elif version not in run.observed_at:
            never["never observed"] += 1
        else:
            never["lost to a wrong value"] += 1
    return {"truth": {"replay": replay, "errors": errors, "never_answered": never,
                      "current_fact_observed": _acc([r for r in rows if r.get("observed")], kind="current")
                      .get("current_fact")}}


def write(result: dict[str, Any], out_dir: str) -> list[str]:
    """``out_dir/simulation.json`` and the plots; returns the paths written."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "simulation.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1, default=str)
    from memorybus.simulation.plots import plot_all

    return [path, *plot_all(result, out_dir)]


def _f(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _truth_lines(truth: dict[str, Any]) -> list[str]:
    rep = truth["replay"]
    o = rep["oracle"]
    lines = [f"truth      replayed on the acknowledged assertions (true value resolved; share of the oracle's "
             f"{o['won']}/{o['resolved']}, contested {o['contested_won']}/{o['contested']}):"]
    for name in ALL_STRATEGIES:
        r = rep[name]
        lines.append(f"           {name:<20} {r['won']:>4}/{r['resolved']:<4} {r['of_oracle']:.3f}   contested "
                     f"{r['contested_won']:>3}/{r['contested']:<3} {r['contested_of_oracle']:.3f}")
    cf = truth["current_fact_observed"] or {}
    lines.append(f"           current_fact, answer observed by some agent before the question: {_f(cf.get('top1'))} "
                 f"(n {cf.get('n', 0)})")
    for kind, methods in sorted(truth["errors"].items()):
        for method, why in sorted(methods.items()):
            lines.append(f"           wrong {kind}/{method}: " + ", ".join(f"{k} {v}" for k, v in sorted(why.items())))
    lines.append("           changes never answered correctly: " + ", ".join(
        f"{k} {v}" for k, v in truth["never_answered"].items()))
    return lines


def summary(result: dict[str, Any]) -> str:
    """The terminal table."""
    c, acc = result["config"], result["accuracy"]
    lines = [
        f"memorybus simulate: {c['agents']} agents, {c['users']} users, {c['orgs']} orgs, {c['days']} days, "
        f"{result['run']['steps']} steps, seed {c['seed']}, {c['backend']}, chaos {'on' if c['chaos'] else 'off'}",
        "",
        f"{'accuracy':<34}{'top-1':>8}{'top-5':>8}{'no-bus':>9}{'n':>7}",
    ]
    for kind, label in (("current", "current value (recall)"), ("as_of", "as of a past day (recall)"),
                        ("finding", "another agent's finding (recall)")):
        m = acc["by_kind"].get(kind, {})
        r, b = m.get("recall", {}), m.get("no_bus", {})
        lines.append(f"{label:<34}{_f(r.get('top1')):>8}{_f(r.get('top5')):>8}{_f(b.get('top1')):>9}"
                     f"{r.get('n', 0):>7}")
    for method, label in (("current_fact", "current value (current_fact)"),
                          ("context_for", "in the prompt (context_for)"), ("pushed", "pushed by subscriptions")):
        m = acc["overall"].get(method, {})
        lines.append(f"{label:<34}{_f(m.get('top1')):>8}{'':>8}{'':>9}{m.get('n', 0):>7}")
    o = acc["overall"]
    lines.append(f"{'all questions (recall)':<34}{_f(o.get('recall', {}).get('top1')):>8}"
                 f"{_f(o.get('recall', {}).get('top5')):>8}{_f(o.get('no_bus', {}).get('top1')):>9}"
                 f"{o.get('recall', {}).get('n', 0):>7}")
    st = result["staleness"]
    a, d, e = st["first_correct_answer"], st["delivery"], st["delivery_to_every_subscriber"]
    lines += [
        "",
        f"staleness  first correct answer by a non-observer: p50 {_f(a['p50_s'], 1)} s / p99 {_f(a['p99_s'], 1)} s "
        f"(simulated p50 {_f(a['p50_days'])} / p99 {_f(a['p99_days'])} days; "
        f"never {a['never']} of {a['n'] + a['never']})",
        f"           event delivery: p50 {_f(d['p50_ms'], 1)} ms / p99 {_f(d['p99_ms'], 1)} ms; "
        f"to every subscriber p50 {_f(e['p50_ms'], 1)} ms / p99 {_f(e['p99_ms'], 1)} ms",
        "conflicts  true value is the resolved one: " + (", ".join(
            f"{k} {v['won']}/{v['resolved']} (asserted both truly and wrongly: {v['contested_won']}/{v['contested']})"
            for k, v in sorted(result["conflicts"].items())) or "no fact written"),
    ]
    lines += _truth_lines(result["truth"])
    i = result["integrity"]
    lines.append(f"integrity  lost acknowledged writes {i['lost_acknowledged_writes']}, "
                 f"scope leaks {i['scope_leaks']}, "
                 f"duplicate assertions {i['duplicate_fact_assertions']}, unaccounted memories "
                 f"{i['unaccounted_memories']}; events committed {i['events_committed']}, delivered "
                 f"{i['events_delivered']}")
    runs = {k: [m for m in result["maintenance"] if m["kind"] == k] for k in ("decay", "consolidation")}
    archived = sum(m["counts"].get("archived", 0) for m in runs["decay"] if m["ok"])
    lines.append(f"maintenance  decay {len(runs['decay'])} runs ({archived} archived), consolidation "
                 f"{len(runs['consolidation'])} runs ({i['consolidation_summaries']} summaries); failed runs "
                 f"{sum(not m['ok'] for m in result['maintenance'])}")
    lines.append("")
    lines.append(f"{'latency (ms)':<16}{'p50':>9}{'p95':>9}{'p99':>9}{'n':>7}{'errors':>8}")
    for op, v in result["latency_ms"].items():
        lines.append(f"{op:<16}{_f(v['p50'], 1):>9}{_f(v['p95'], 1):>9}{_f(v['p99'], 1):>9}{v['n']:>7}{v['errors']:>8}")
    r = result["run"]
    faults = Counter(f["kind"] for f in result["faults"])
    lines.append("")
    lines.append(f"throughput {r['ops_per_second']} ops/s ({r['ops']} ops in {r['seconds']} s); faults injected: "
                 + (", ".join(f"{k} x{n}" for k, n in sorted(faults.items())) or "none"))
    return "\n".join(lines)
