"""``memorybus audit verify|export``: check and export the audit chains, reading the
stores directly (no Ray, no running bus needed).

The embedded backend is read from ``--data-dir`` (every ``shard-*/records.sqlite``
in it); a shared store from ``--redis URL`` with ``--namespace`` and ``--shards``.
``verify`` exits 0 when every chain is intact and matches its checkpoints, 1 when one
is not (naming the org, shard, first bad seq and why), 2 on bad input. Checkpoint
signatures are checked with ``--key-file`` (the raw HMAC key); without it, only
their seq and hash are compared.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from memorybus.cli.commands import command
from memorybus.cli.tls import add_redis_tls_flags, redis_tls_options
from memorybus.errors import InvalidRequest


def register(sub: Any) -> None:
    audit = sub.add_parser("audit", help="verify or export the audit trail (reads the stores directly)")
    cmds = audit.add_subparsers(dest="audit_command", required=True)
    verify = command(cmds, "verify", cmd_verify, "check every audit chain; exit 0 intact, 1 tampered", _flags)
    verify.add_argument("--key-file", help="file holding the HMAC key checkpoints are signed with (default: "
                        "the key the bus derives from its operator secret, read from its key ring)")
    verify.add_argument("--json", action="store_true", help="one JSON report per chain")
    export = command(cmds, "export", cmd_export, "write audit entries as JSON lines", _flags)
    export.add_argument("--since", help="at or after: epoch seconds, ISO date/time (UTC), or 7d/12h/30m ago")
    export.add_argument("--until", help="before (same forms as --since)")
    export.add_argument("--principal", help="only this principal's entries (org/user/agent[/session])")
    export.add_argument("--out", help="file to write (default: standard output)")

def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", default=".memorybus", help="embedded store directory (default .memorybus)")
    p.add_argument("--redis", help="Redis URL of a shared store (default: $MEMORYBUS_REDIS_URL if set)")
    add_redis_tls_flags(p)
    p.add_argument("--namespace", default="memorybus")
    p.add_argument("--shards", type=int, default=2, help="the bus's num_shards (Redis; default 2)")
    p.add_argument("--org", action="append", help="only this org (repeatable; default: every org)")


@contextlib.contextmanager
def _stores(args: argparse.Namespace) -> Iterator[list[tuple[str, Any]]]:
    """``(shard name, store)`` for every shard of the bus the flags name."""
    opened: list[tuple[str, Any]] = []
    try:
        url = args.redis or os.environ.get("MEMORYBUS_REDIS_URL")
        if url:
            from memorybus.config import Config
            from memorybus.storage.redis import RedisStore
            from memorybus.storage.redis_client import RedisTLS

            if args.shards < 1:
                raise InvalidRequest("--shards", "must be at least 1")
            tls = RedisTLS.from_config(Config.redis(url, **redis_tls_options(args)))  # checked as connect does
            for i in range(args.shards):
                opened.append((f"shard-{i}", RedisStore(url, args.namespace, f"shard-{i}", tls=tls)))
        else:
            from memorybus.storage.sqlite import SqliteStore

            if not os.path.isdir(args.data_dir):
                raise InvalidRequest("--data-dir", f"{args.data_dir} does not exist (no bus stored there)")
            paths = sorted(glob.glob(os.path.join(args.data_dir, "shard-*", "records.sqlite")))
            if not paths:
                raise InvalidRequest("--data-dir", f"no shard-*/records.sqlite in {args.data_dir}")
            for path in paths:
                opened.append((os.path.basename(os.path.dirname(path)), SqliteStore(path)))
        yield opened
    finally:
        for _, store in opened:
            store.close()


def _key(path: str | None) -> bytes | None:
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            key = fh.read().strip()
    except OSError as exc:
        raise InvalidRequest("--key-file", str(exc)) from None
    if len(key) < 16:
        raise InvalidRequest("--key-file", "holds fewer than 16 bytes")
    return key


def _bus_key(args: argparse.Namespace) -> bytes | None:
    """The checkpoint key the bus derives from its operator secret (see
    ``memorybus.auth.keyring.derived_key``), when the flags name a bus with a key ring."""
    from memorybus.auth.keyring import derived_key
    from memorybus.config import Config

    url = args.redis or os.environ.get("MEMORYBUS_REDIS_URL")
    if url:
        return derived_key(Config.redis(url, namespace=args.namespace, **redis_tls_options(args)), "audit checkpoint")
    if not os.path.exists(os.path.join(args.data_dir, "auth.sqlite")):
        return None
    return derived_key(Config.embedded(args.data_dir, namespace=args.namespace), "audit checkpoint")


def cmd_verify(args: argparse.Namespace) -> int:
    from memorybus.audit.read import verify_store

    key = _key(args.key_file) if args.key_file else _bus_key(args)
    bad = 0
    chains = 0
    with _stores(args) as stores:
        for shard, store in stores:
            orgs = [o for o in store.audit_orgs() if args.org is None or o in args.org]
            for report in verify_store(store, key, orgs):
                chains += 1
                bad += not report.ok
                if args.json:
                    print(json.dumps({"shard": shard, **report.to_dict()}))
                else:
                    print(f"{shard}  {report}")
    if not args.json:
        verdict = f"{bad} of {chains} chains TAMPERED" if bad else f"all {chains} chains intact"
        print(verdict, file=sys.stderr)
    return 1 if bad else 0


def cmd_export(args: argparse.Namespace) -> int:
    from memorybus.audit.read import AuditQuery, select
    from memorybus.cli.manage import _when

    since, until = _when(args.since, "--since"), _when(args.until, "--until")
    q = AuditQuery(since, until, args.principal)
    count = 0
    with _stores(args) as stores, _output(args.out) as out:
        for shard, store in stores:
            for org in store.audit_orgs():
                if args.org is not None and org not in args.org:
                    continue
                for entry in select(store, org, q):
                    out.write(json.dumps({"shard": shard, **entry.to_dict()}) + "\n")
                    count += 1
    print(f"exported {count} audit entries", file=sys.stderr)
    return 0


@contextlib.contextmanager
def _output(path: str | None) -> Iterator[Any]:
    if path is None:
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8") as fh:
        yield fh
