"""PNG plots of a simulation report (matplotlib, no display needed)."""

from __future__ import annotations

import os
from typing import Any


def _running(series: list[dict[str, Any]], key: str, window: int) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for i, p in enumerate(series):
        vals = [q[key] for q in series[max(0, i - window + 1) : i + 1] if q[key] is not None]
        if vals:
            xs.append(p["day"])
            ys.append(sum(vals) / len(vals))
    return xs, ys


def _faults(ax: Any, faults: list[dict[str, Any]]) -> None:
    for i, f in enumerate(faults):
        ax.axvline(f["day"], color="crimson", alpha=0.5, linestyle="--", linewidth=1,
                   label="fault" if i == 0 else None)
        ax.annotate(f["kind"], (f["day"], 1), xycoords=("data", "axes fraction"), rotation=90, fontsize=7,
                    va="top", ha="right", color="crimson")


def plot_all(result: dict[str, Any], out_dir: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series, faults = result["series"], result["faults"]
    window = max(1, len(series) // 10)
    paths = []

    fig, ax = plt.subplots(figsize=(8, 4))
    for key, label in (("recall_top1", "memorybus (recall top-1)"), ("no_bus_top1", "no bus (own observations)")):
        xs, ys = _running(series, key, window)
        ax.plot(xs, ys, label=label)
    _faults(ax, faults)
    ax.set(xlabel="simulated day", ylabel=f"accuracy (running mean over {window} steps)", ylim=(0, 1.05),
           title="Answer accuracy over simulated time")
    ax.legend(loc="center right")
    paths.append(_save(fig, out_dir, "accuracy.png"))

    fig, ax = plt.subplots(figsize=(8, 4))
    for key, label in (("read_ms", "reads p50 (recall, current_fact, context_for)"), ("write_ms", "writes p50")):
        pts = [(p["day"], p[key]) for p in series if p[key] is not None]
        ax.plot([x for x, _ in pts], [y for _, y in pts], label=label)
    _faults(ax, faults)
    ax.set(xlabel="simulated day", ylabel="latency per step (ms)", title="Operation latency over simulated time")
    ax.set_yscale("log")
    ax.legend(loc="upper right")
    paths.append(_save(fig, out_dir, "latency.png"))

    st = result["staleness"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.hist(st["answer_days"] or [0], bins=20, color="tab:blue")
    a1.set(xlabel="simulated days", ylabel="fact changes",
           title="World change -> first correct answer\nby an agent that did not observe it")
    a2.hist([x * 1000 for x in st["delivery_seconds"]] or [0], bins=30, color="tab:green")
    a2.set(xlabel="ms", ylabel="deliveries", title="Commit -> event delivered to a subscriber")
    a2.set_yscale("log")
    paths.append(_save(fig, out_dir, "staleness.png"))
    return paths


def _save(fig: Any, out_dir: str, name: str) -> str:
    import matplotlib.pyplot as plt

    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
