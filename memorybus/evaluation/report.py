"""Progress bars, the JSON result file and the recall-by-category plot."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], desc: str, total: int | None = None, enabled: bool = True) -> Iterator[T]:
    """A tqdm progress bar on stderr (a plain iterator when tqdm is missing or disabled)."""
    if not enabled:
        yield from items
        return
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm ships with the bench extra
        yield from items
        return
    yield from tqdm(items, desc=desc, total=total, file=sys.stderr, dynamic_ncols=True, leave=False)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def write_json(path: Path, result: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, sort_keys=False, default=float) + "\n")


def plot_by_category(
    path: Path,
    result: Mapping[str, Any],
    methods: Sequence[str],
    groups: Sequence[str],
    metrics: Sequence[str],
    title: str,
) -> bool:
    """Grouped bars: one panel per metric, one group per category (and overall), one bar per method.

    ``result[method]["by_category"][group][metric]`` (or ``["overall"]`` for the group
    ``overall``). Returns False when matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover
        return False
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 4.2), squeeze=False)
    width = 0.8 / max(1, len(methods))
    for ax, metric in zip(axes[0], metrics, strict=True):
        for m_i, method in enumerate(methods):
            values = []
            for g in groups:
                block = result[method]["overall"] if g == "overall" else result[method]["by_category"].get(g, {})
                values.append(float(block.get(metric, 0.0)))
            xs = [x + (m_i - (len(methods) - 1) / 2) * width for x in range(len(groups))]
            bars = ax.bar(xs, values, width, label=method)
            if method.startswith("memorybus") or method == methods[0]:
                for bar, v in zip(bars, values, strict=True):
                    ax.annotate(f"{v:.2f}", (bar.get_x() + bar.get_width() / 2, v), ha="center", va="bottom",
                                fontsize=7)  # fmt: skip
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups, rotation=15)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel(metric)
        ax.grid(axis="y", alpha=0.3)
        ax.set_title(f"{title}: {metric}")
    axes[0][0].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True
