"""The ``memorybus`` command line."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import NoReturn

from memorybus import __version__, env
from memorybus.cli import audit as cli_audit
from memorybus.cli import manage as cli_manage
from memorybus.cli.commands import command


def cmd_demo(args: argparse.Namespace) -> int:
    env.prepare()
    # flags are checked before anything is created: a bad one leaves nothing behind
    if args.shards < 1 or args.num_cpus < 1:
        return _fail("--shards and --num-cpus must be at least 1")
    import memorybus
    from memorybus.actors import fleet
    from memorybus.cli.progress import progress
    from memorybus.simulation import demo as script

    with _data_dir(args.data_dir, "memorybus-demo-") as data_dir:
        cfg = memorybus.Config.embedded(data_dir, num_shards=args.shards, namespace="memorybus_demo")
        print(f"memorybus demo: embedded store in {data_dir}, {args.shards} shards", flush=True)
        with progress():
            bus = memorybus.connect(cfg, num_cpus=args.num_cpus, log_to_driver=False)
        with bus:  # closing stops the actors and the local Ray this run started
            spawned: list[object] = []

            def spawn(b: memorybus.MemoryBus, names: list[str]) -> list[object]:
                spawned.extend(fleet.spawn_demo(script.DemoAgent, b, names))
                return spawned

            try:
                result = script.run(bus, spawn, fleet.call_all, lambda line: print(line, flush=True))
            finally:
                fleet.kill_all(spawned)
    expected = sum(len(obs) for obs, _ in script.SCRIPT.values())
    if result["memories"] < expected:
        return _fail(f"expected at least {expected} memories, found {result['memories']}", 1)
    return 0


@contextlib.contextmanager
def _data_dir(given: str | None, prefix: str) -> Iterator[str]:
    """``given``, or a temporary directory removed afterwards, whatever happens."""
    if given:
        yield given
        return
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _fail(message: str, code: int = 2) -> int:
    print(f"memorybus: error: {message}", file=sys.stderr)
    return code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # bad input: one line, status 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from memorybus.simulation import cli as simulate_cli

    p: argparse.ArgumentParser = _Parser(prog="memorybus", description="A distributed memory bus for agent teams.")
    p.add_argument("--version", action="version", version=f"memorybus {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    simulate_cli.add_parser(sub)
    demo = command(sub, "demo", cmd_demo, "run a local multi-agent simulation on the embedded default")
    demo.add_argument("--data-dir", help="where SQLite and Qdrant Edge files go (default: a temp dir)")
    demo.add_argument("--shards", type=int, default=2)
    demo.add_argument("--num-cpus", type=int, default=2)
    ev = command(sub, "eval", cmd_eval, "retrieval evaluation through the bus (LoCoMo, LongMemEval) with baselines")
    ev.add_argument("dataset", choices=["locomo", "longmemeval"])
    ev.add_argument("--data", required=True, help="path of the dataset JSON (locomo_dev.json, longmemeval_s*.json)")
    ev.add_argument("--out", required=True, help="directory for the JSON results and the PNG plot")
    ev.add_argument("--shards", type=int, default=2)
    ev.add_argument("--conversations", help="LoCoMo: comma-separated sample ids to run (default: all)")
    ev.add_argument("--limit", type=int, help="LongMemEval: only the first N questions")
    ev.add_argument(
        "--weight",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a RankingWeights field, e.g. --weight context_mix=0 --weight contextual_text=true",
    )
    ev.add_argument("--model", help="a sentence-transformers model (directory, or a name in the local Hugging Face "
                                    "cache) for the bus and the baselines (default: the shipped MiniLM)")
    ev.add_argument("--no-progress", action="store_true", help="no progress bars")
    ev.add_argument(
        "--no-index-path",
        action="store_true",
        help="LoCoMo: skip the second run whose shards search the vector index instead of the exact RAM path",
    )
    from memorybus.cli import mcp as mcp_cli

    mcp_cli.register(sub)
    cli_manage.register(sub)
    cli_audit.register(sub)
    from memorybus.inspector import cli as ui_cli

    ui_cli.register(sub)
    return p


def _weights(pairs: Sequence[str]) -> dict[str, object]:
    from dataclasses import fields

    from memorybus.config import RankingWeights

    types = {f.name: f.type for f in fields(RankingWeights)}
    out: dict[str, object] = {}
    for pair in pairs:
        name, _, raw = pair.partition("=")
        if name not in types or not raw:
            raise SystemExit(f"--weight {pair!r}: expected NAME=VALUE with NAME one of {sorted(types)}")
        kind = str(types[name])
        out[name] = raw.lower() in ("1", "true", "yes") if kind == "bool" else int(raw) if kind == "int" else float(raw)
    return out


def cmd_eval(args: argparse.Namespace) -> int:
    # the raw model (this process) and the bus's embedder take turns on the same cores
    env.prepare(**env.BESIDE_MODEL_ENV)  # numpy is not loaded yet here
    if not os.path.exists(args.data):
        print(f"error: no such file {args.data}", file=sys.stderr)
        return 2
    from memorybus.evaluation import runner

    weights = runner.with_weights(None, _weights(args.weight))
    if args.dataset == "locomo":
        convs = [c for c in (args.conversations or "").split(",") if c] or None
        result = runner.run_locomo(
            args.data, args.out, conversations=convs, shards=args.shards, ranking=weights,
            show_progress=not args.no_progress, index_path=not args.no_index_path, model=args.model,
        )  # fmt: skip
        print(runner.summary_locomo(result))
    else:
        result = runner.run_longmemeval(
            args.data, args.out, limit=args.limit, shards=args.shards, ranking=weights,
            show_progress=not args.no_progress, model=args.model,
        )  # fmt: skip
        print(runner.summary_longmemeval(result))
    return 0


def local_ray_on_loopback(args: argparse.Namespace) -> None:
    """A Ray this command starts itself binds to 127.0.0.1, not to the machine's
    interfaces. Ray reads the switch once, when it is first imported, so this runs
    before anything imports it; joining a cluster (``--address``, ``--ray-address``,
    ``RAY_ADDRESS``) leaves Ray's own choice alone."""
    if getattr(args, "address", None) or getattr(args, "ray_address", None) or os.environ.get("RAY_ADDRESS"):
        return
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Errors of memorybus end it with one line on stderr and exit
    status 2 (1 for a failed check), never a traceback."""
    args = build_parser().parse_args(argv)
    local_ray_on_loopback(args)
    from memorybus.errors import MemoryBusError

    try:
        return int(args.func(args))
    except MemoryBusError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
