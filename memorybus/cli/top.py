"""``memorybus top``: a live view of a bus, through it or read from its files.

Refreshed every ``--interval`` seconds: totals and writes/s, each shard's counts, the
hubs' subscriptions and deliveries (only through a running bus: with none running
there are none), the busiest scopes (most memories) and the most recalled memories
(highest access counts, as stored). Read from the files (no bus holds the data
directory, see :mod:`memorybus.cli.manage`), each refresh reads them again.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memorybus.scopes import Scope


def run(args: argparse.Namespace, source: Any) -> int:
    """Counts, writes/s, the busiest scopes and the most recalled memories, refreshed
    every ``--interval`` seconds; hub figures (subscriptions, deliveries) only through
    a running bus (read from the files, none runs)."""
    with source as bus:
        namespace = getattr(bus, "namespace", None) or bus.config.namespace
        last: tuple[float, int] | None = None
        n = 0
        while True:
            if n and hasattr(bus, "reload"):
                bus.reload()  # read from the files: read them again
            stats, hubs = bus.stats(), bus.hub_stats()
            now = time.monotonic()
            rate = (stats["events"] - last[1]) / max(1e-9, now - last[0]) if last else 0.0
            last = (now, stats["events"])
            if sys.stdout.isatty():
                print("\x1b[H\x1b[J", end="")
            print("\n".join(top_lines(namespace, stats, hubs, rate)), flush=True)
            n += 1
            if args.iterations and n >= args.iterations:
                return 0
            time.sleep(args.interval)


def top_lines(namespace: str, stats: dict[str, Any], hubs: list[dict[str, int]] | None, rate: float,
              rows: int = 5) -> list[str]:  # fmt: skip
    """``memorybus top``'s screen: totals, shards, hubs (None: no bus runs), the
    ``rows`` busiest scopes (most memories) and most recalled memories."""
    from memorybus.scopes import Scope

    lines = [
        f"memorybus {namespace}  {stamp(time.time())} UTC" + ("" if hubs is not None else "  (read from the files)"),
        f"{stats['memories']} memories  {stats['events']} events  {stats['facts']} facts  {rate:.1f} writes/s",
        *[f"  {s['shard']:<10} {s['memories']:>8} memories {s['events']:>9} events" for s in stats["shards"]],
    ]
    if hubs is None:
        lines.append("  hubs: no bus running (subscriptions and deliveries are shown through a running bus)")
    else:
        lines += [f"  hub-{i:<6} {h['subscriptions']:>4} subscriptions ({h['replaying']} replaying, "
                  f"{h.get('parked', 0)} parked)  {h['published']} published  {h['delivered']} delivered"
                  for i, h in enumerate(hubs)]  # fmt: skip
    busiest = sorted(stats["by_scope"].items(), key=lambda kv: (-kv[1], kv[0]))[:rows]
    lines.append("busiest scopes:")
    lines += [f"  {count:>8}  {scope_text(Scope.from_key(key))}" for key, count in busiest]
    lines.append("most recalled:")
    lines += [f"  {count:>8}  {memory_id}  {scope_text(Scope.from_key(key))}"
              for memory_id, count, key in stats.get("most_recalled", [])[:rows]] or ["         -"]  # fmt: skip
    return lines


def stamp(ts: float) -> str:
    """A Unix time as UTC ``YYYY-mm-dd HH:MM:SS`` ("-" for none)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S") if ts > 0 else "-"


def scope_text(scope: Scope) -> str:
    """A scope as ``org/user/agent/session``, empty trailing parts left out."""
    return "/".join(part or "*" for part in scope.as_tuple()).rstrip("/*") or scope.org
