"""``memorybus ls|show|stats|export|import|top``: look at and manage what a bus stores.

Which path a command takes (:func:`_open`):

- **Reads straight from the files** (``ls``, ``show``, ``stats``, ``export``, ``top``
  on an embedded ``--data-dir`` that no running bus holds, without ``--ray-address``):
  :class:`memorybus.operator.offline.DirectReader`, no Ray, no model, in about a second. It
  needs the operator key: the data directory's ``auth.sqlite`` (readable only by its
  owner) must be readable by the caller, otherwise the command is refused
  (NotAuthorized). A directory without a key ring yet takes the bus path below.
- **Through the running bus** when one holds the data directory (a live holder of
  its ``LOCK`` files, see :mod:`memorybus.storage.dirlock`): the command joins it
  through ``--ray-address`` (or this process's Ray, when a program calls
  :func:`memorybus.cli.main`), in the namespace the lock names unless
  ``--namespace`` says otherwise. Without either it is refused at once with
  DataDirInUse naming the holder and ``--ray-address`` (nothing started, no Ray
  guessed: a shared machine may run several).
- **Through a bus the command joins or starts** otherwise (``import``; ``--redis``;
  ``--ray-address`` given; a directory without a key ring yet), stopped after when
  it started it.

These are operator commands: they see every memory, whatever its scope.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memorybus import env
from memorybus.cli.commands import command
from memorybus.cli.tls import add_redis_tls_flags, redis_tls_options
from memorybus.cli.top import scope_text as _scope_text
from memorybus.cli.top import stamp as _stamp

if TYPE_CHECKING:
    from memorybus.client import MemoryBus
    from memorybus.memory.model import MemoryNode
    from memorybus.scopes import Scope


def register(sub: Any) -> None:
    """Add the commands to the ``memorybus`` parser's subcommands."""
    ls = command(sub, "ls", cmd_ls, "list stored memories (an operator's view: every scope)", _store_flags,
                 _scope_flags)
    ls.add_argument("--exact", action="store_true", help="only the scope given, not the scopes inside it")
    ls.add_argument("--kind", action="append", help="episodic, semantic, procedural, working (repeatable)")
    ls.add_argument("--status", action="append", help="active, consolidated, deprecated, archived, or all")
    ls.add_argument("--key-prefix", help="only keyed facts whose key starts with this")
    ls.add_argument("--since", help="created at or after: epoch seconds, ISO date/time (UTC), or 7d/12h/30m ago")
    ls.add_argument("--until", help="created before (same forms as --since)")
    ls.add_argument("--limit", type=int, default=50, help="memories per page (default 50)")
    ls.add_argument("--cursor", help="continue after a previous page")
    ls.add_argument("--all", action="store_true", help="every page")
    ls.add_argument("--json", action="store_true", help="one JSON object per line")
    show = command(sub, "show", cmd_show, "one memory with its history and provenance", _store_flags)
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    stats = command(sub, "stats", cmd_stats, "counts per shard and per scope", _store_flags)
    stats.add_argument("--json", action="store_true")
    export = command(sub, "export", cmd_export, "write a scope (and the scopes inside it) or everything to a file",
                     _store_flags, _scope_flags)
    export.add_argument("file")
    export.add_argument("--key-file", help="seal the file with the key in this file (HMAC-SHA256; >= 16 bytes; "
                        "default: this bus's own export key)")
    imp = command(sub, "import", cmd_import, "restore an export file (validated first; refused whole on any problem)",
                  _store_flags)
    imp.add_argument("file")
    how = imp.add_mutually_exclusive_group()
    how.add_argument("--key-file", help="accept only a file sealed with the key in this file (default: this "
                     "bus's own export key)")
    how.add_argument("--trusted", action="store_true", help="accept an unsealed file: you vouch for its contents")
    top = command(sub, "top", cmd_top, "a live view: counts, writes/s, subscriptions, busiest scopes, most recalled",
                  _store_flags)
    top.add_argument("--interval", type=float, default=2.0)
    top.add_argument("--iterations", type=int, default=0, help="stop after N refreshes (0: until Ctrl-C)")

def _store_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("which bus")
    g.add_argument("--data-dir", default=".memorybus", help="embedded store directory (default .memorybus)")
    g.add_argument("--redis", help="Redis URL of a shared store (default: $MEMORYBUS_REDIS_URL if set)")
    add_redis_tls_flags(g)
    g.add_argument("--namespace", help="the bus's namespace (default: the running bus's, else memorybus)")
    g.add_argument("--shards", type=int, default=2, help="the bus's num_shards (default 2)")
    g.add_argument("--ray-address", help="join this Ray (host:port or auto) instead of starting one")


def _scope_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scope (default: everything)")
    for name in ("org", "user", "agent", "session"):
        g.add_argument(f"--{name}", default="")


def _scope(args: argparse.Namespace) -> Scope | None:
    from memorybus.errors import InvalidRequest
    from memorybus.scopes import Scope

    if not args.org:
        if args.user or args.agent or args.session:
            raise InvalidRequest("--org", "is required with --user, --agent or --session")
        return None
    return Scope(args.org, args.user, args.agent, args.session)


def _open(args: argparse.Namespace) -> Any:
    """What the command reads through (see the module docstring): a DirectReader over
    the files, or a bus handle (joined or started). Both are context managers."""
    from memorybus.errors import ConfigError

    if args.shards < 1:
        raise ConfigError("--shards", "must be at least 1")
    if args.redis or os.environ.get("MEMORYBUS_REDIS_URL") or args.func is cmd_import:
        return _connect(args)
    if not os.path.isdir(args.data_dir):
        if args.ray_address:
            return _connect(args)
        raise ConfigError("--data-dir", f"{os.path.abspath(args.data_dir)} does not exist (no bus stored there)")
    from memorybus.operator import offline

    holders = offline.held(args.data_dir)
    if holders:
        return _join_running(args, holders)
    if args.ray_address or not offline.has_key_ring(args.data_dir):
        return _connect(args)  # asked for, or a directory no bus has keyed yet: the bus makes the key ring
    return offline.DirectReader(args.data_dir, namespace=args.namespace)


def _join_running(args: argparse.Namespace, holders: list[tuple[str, str]]) -> MemoryBus:
    """Join the bus that holds the data directory, in the namespace its lock names
    (unless ``--namespace`` is given), through ``--ray-address`` or this process's
    Ray; DataDirInUse (at once, nothing started) when neither is there."""
    from memorybus.errors import DataDirInUse
    from memorybus.operator import offline

    directory, holder = holders[0]
    args.namespace = args.namespace or offline.holder_namespace(holder)
    if args.ray_address is None and not _ray_here():
        raise DataDirInUse(directory, f"{holder or 'a running bus'}; to read through it, pass its Ray's address "
                           "with --ray-address (host:port, or auto for the one Ray on this machine)")
    return _connect(args)


def _ray_here() -> bool:
    """Whether this process is connected to Ray already (without importing it)."""
    import sys

    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


def _connect(args: argparse.Namespace) -> MemoryBus:
    env.prepare()
    import memorybus
    from memorybus.cli.progress import progress

    if args.shards < 1:
        raise memorybus.ConfigError("--shards", "must be at least 1")
    redis_url = args.redis or os.environ.get("MEMORYBUS_REDIS_URL")
    common: dict[str, Any] = {
        "namespace": args.namespace or "memorybus",
        "num_shards": args.shards,
        "ray_address": args.ray_address,
        "query_encoder": "embedder",  # these commands never recall: no model in this process
        "data_dir": args.data_dir,
    }
    cfg = (memorybus.Config.redis(redis_url, **common, **redis_tls_options(args)) if redis_url
           else memorybus.Config(**common))
    if not redis_url and not os.path.isdir(cfg.data_dir) and args.func is not cmd_import:
        raise memorybus.ConfigError("--data-dir", f"{cfg.data_dir} does not exist (no bus stored there)")
    with progress():
        return memorybus.connect(cfg, log_to_driver=False)


def _when(text: str | None, name: str) -> float | None:
    from memorybus.errors import InvalidRequest

    if text is None:
        return None
    ago = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text.strip())
    if ago:
        unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[ago.group(2)]
        return time.time() - float(ago.group(1)) * unit
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRequest(name, f"{text!r} is not epoch seconds, an ISO date/time, or 7d/12h/30m") from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _node_json(node: MemoryNode) -> dict[str, Any]:
    from memorybus.memory.codec import node_to_dict

    d = node_to_dict(node, with_embedding=False)
    d.pop("embedding", None)
    return d


def _line(node: MemoryNode) -> str:
    content = " ".join(node.content.split())
    content = content if len(content) <= 80 else content[:77] + "..."
    key = f" [{node.key}]" if node.key else ""
    return (
        f"{_stamp(node.created_at)}  {node.id}  {node.kind.value:<10} {node.status.value:<12} "
        f"v{node.version:<3} {_scope_text(node.scope)}{key}  {content}"
    )


def _pages(bus: Any, args: argparse.Namespace) -> Iterator[tuple[list[MemoryNode], str | None]]:
    from memorybus.memory.model import MemoryStatus

    scope = _scope(args)
    statuses = args.status
    if statuses and "all" in statuses:
        statuses = [s.value for s in MemoryStatus]
    cursor = args.cursor
    while True:
        page = bus.list_memories(
            None,
            scope=scope if args.exact else None,
            within=None if args.exact else scope,
            kinds=args.kind,
            statuses=statuses,
            key_prefix=args.key_prefix,
            since=_when(args.since, "--since"),
            until=_when(args.until, "--until"),
            limit=args.limit,
            cursor=cursor,
        )
        yield page.memories, page.cursor
        cursor = page.cursor
        if cursor is None or not args.all:
            return


def cmd_ls(args: argparse.Namespace) -> int:
    if args.exact and not args.org:
        from memorybus.errors import InvalidRequest

        raise InvalidRequest("--exact", "needs a scope (--org ...)")
    with _open(args) as bus:
        shown = 0
        cursor = None
        for memories, next_cursor in _pages(bus, args):
            for node in memories:
                print(json.dumps(_node_json(node)) if args.json else _line(node))
            shown += len(memories)
            cursor = next_cursor
        if not args.json:
            more = f"; more: --cursor '{cursor}'" if cursor else ""
            print(f"({shown} memories{more})", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with _open(args) as bus:
        found = bus.inspect(args.id)
    if args.json:
        print(json.dumps({
            "memory": _node_json(found.node),
            "shard": found.shard,
            "history": [{"seq": e.seq, "kind": e.kind.value, "at": e.at, "by": e.by, "data": e.data,
                         "content": e.node.content, "version": e.node.version} for e in found.history],
            "links": {k: [n.id for n in v] for k, v in found.links.items()},
            "missing": found.missing,
        }, default=str))
        return 0
    node = found.node
    print(f"memory {node.id}  ({found.shard})")
    for name, value in _node_json(node).items():
        if name != "id" and value not in (None, [], {}, ""):
            print(f"  {name:<14} {value}")
    print("history:")
    for e in found.history:
        detail = " ".join(f"{k}={v}" for k, v in e.data.items())
        print(f"  #{e.seq:<5} {_stamp(e.at)}  {e.kind.value:<12} by {e.by or '-'}  v{e.node.version}  {detail}")
    if found.links or found.missing:
        print("provenance:")
        for name, nodes in found.links.items():
            for n in nodes:
                print(f"  {name:<12} {n.id}  {_scope_text(n.scope)}  {' '.join(n.content.split())[:60]}")
        for memory_id in found.missing:
            print(f"  (gone)       {memory_id}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with _open(args) as bus:
        stats = bus.stats()
    if args.json:
        print(json.dumps(stats))
        return 0
    print(f"{stats['memories']} memories, {stats['events']} events, {stats['facts']} keyed facts")
    for s in stats["shards"]:
        print(f"  {s['shard']:<10} {s['memories']:>8} memories {s['events']:>9} events  ({s['backend']})")
    print("by kind:   " + ", ".join(f"{k} {v}" for k, v in sorted(stats["by_kind"].items())))
    print("by status: " + ", ".join(f"{k} {v}" for k, v in sorted(stats["by_status"].items())))
    print("by scope:")
    from memorybus.scopes import Scope

    for key, n in sorted(stats["by_scope"].items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:>8}  {_scope_text(Scope.from_key(key))}")
    return 0


def _key(args: argparse.Namespace) -> bytes | None:
    """The export key in ``--key-file`` (its bytes, surrounding whitespace removed)."""
    from memorybus.errors import InvalidRequest
    from memorybus.transfer import check_key

    if not args.key_file:
        return None
    try:
        with open(args.key_file, "rb") as f:
            return check_key(f.read().strip())
    except OSError as exc:
        raise InvalidRequest("key-file", f"cannot read {args.key_file}: {exc}") from None


def cmd_export(args: argparse.Namespace) -> int:
    scope = _scope(args)
    key = _key(args)
    with _open(args) as bus:
        counts = bus.export(args.file, within=scope, key=key)
    print(f"exported {counts['nodes']} memories, {counts['events']} events, {counts['slots']} facts to {args.file}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from memorybus.transfer import read_export

    key = _key(args)
    if key is not None or args.trusted:  # a bad file is refused before any bus is started
        read_export(args.file, key=key, trusted=args.trusted)
    with _connect(args) as bus:
        counts = bus.import_(args.file, key=key, trusted=args.trusted)
    print(f"imported {counts['nodes']} memories, {counts['events']} events, {counts['slots']} facts")
    return 0


def cmd_top(args: argparse.Namespace) -> int:
    from memorybus.cli.top import run

    return run(args, _open(args))
