"""The ``memorybus`` command line."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence


def _ray_env() -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def cmd_demo(args: argparse.Namespace) -> int:
    _ray_env()
    import memorybus
    from memorybus import simulation
    from memorybus.actors import agents

    data_dir = args.data_dir or tempfile.mkdtemp(prefix="memorybus-demo-")
    cfg = memorybus.Config.embedded(data_dir, num_shards=args.shards, namespace="memorybus_demo")
    print(f"memorybus demo: embedded store in {data_dir}, {args.shards} shards", flush=True)
    bus = memorybus.connect(cfg, num_cpus=args.num_cpus, log_to_driver=False)
    spawned: list[object] = []

    def spawn(b: memorybus.MemoryBus, names: list[str]) -> list[object]:
        spawned.extend(agents.spawn(b, names))
        return spawned

    try:
        result = simulation.run(bus, spawn, lambda line: print(line, flush=True))
    finally:
        agents.kill_all(spawned)
        bus.shutdown()
    expected = sum(len(obs) for obs, _ in simulation.SCRIPT.values())
    if result["memories"] < expected:
        print(f"error: expected at least {expected} memories, found {result['memories']}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="memorybus", description="A distributed memory bus for agent teams.")
    sub = p.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a local multi-agent simulation on the embedded default")
    demo.add_argument("--data-dir", help="where SQLite and Qdrant Edge files go (default: a temp dir)")
    demo.add_argument("--shards", type=int, default=2)
    demo.add_argument("--num-cpus", type=int, default=2)
    demo.set_defaults(func=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
