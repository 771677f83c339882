"""``memorybus ui``: serve the inspector over a data directory, optionally joined to
the running bus that holds it (``--ray-address``) for semantic search and the
maintenance schedule.

Binds 127.0.0.1 unless told otherwise; a plaintext listener on any other address is
warned about (the operator's token and the memories would cross the network in
clear). The operator token is printed once at start, with a URL that logs the browser
in (the token sits in the URL's fragment, which browsers never send to the server).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from memorybus.config.urls import is_loopback


def register(sub: Any) -> None:
    ui = sub.add_parser("ui", help="a local, read-only web page over a bus's memories (operator only)")
    ui.add_argument("--data-dir", default=".memorybus", help="embedded store directory (default .memorybus)")
    ui.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    ui.add_argument("--port", type=int, default=8765)
    ui.add_argument("--report", help="a simulation's output directory (simulation.json and its PNG plots)")
    ui.add_argument("--ray-address", help="join the bus running in this Ray (semantic search, maintenance status)")
    ui.add_argument("--namespace", default="memorybus")
    ui.add_argument("--shards", type=int, default=2, help="the bus's num_shards (with --ray-address)")
    ui.add_argument("--tls-cert", help="serve HTTPS with this certificate chain (PEM)")
    ui.add_argument("--tls-key", help="and this private key (PEM)")
    ui.set_defaults(func=cmd_ui)


def plaintext_warning(host: str, tls: bool) -> str | None:
    if tls or is_loopback(host):
        return None
    return (f"warning: serving the inspector over plaintext HTTP on {host}: the operator token and memories cross "
            "the network unencrypted; pass --tls-cert/--tls-key, or bind 127.0.0.1")


def build(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """``(app, guard, bus or None)`` for the flags; bad input raises a MemoryBusError
    before anything is served."""
    from memorybus.config import Config
    from memorybus.errors import InvalidRequest
    from memorybus.inspector.app import create_app
    from memorybus.inspector.guard import OperatorGuard
    from memorybus.inspector.readonly import open_data_dir
    from memorybus.inspector.source import Inspector

    if args.report and not os.path.isdir(args.report):
        raise InvalidRequest("--report", f"{args.report} is not a directory")
    if not 0 < args.port < 65536:
        raise InvalidRequest("--port", "must be from 1 to 65535")
    stores, hubs = open_data_dir(args.data_dir)
    cfg = Config(data_dir=args.data_dir, namespace=args.namespace, num_shards=max(1, args.shards),
                 ray_address=args.ray_address, query_encoder="embedder")
    bus = None
    if args.ray_address:
        from memorybus import connect

        bus = connect(cfg, log_to_driver=False)
    insp = Inspector(stores, hubs, bus=bus, report_dir=args.report,
                     source=f"{os.path.abspath(args.data_dir)}" + (" (joined to its bus)" if bus else ""))
    guard = OperatorGuard.for_config(cfg)
    return create_app(insp, guard), guard, bus


def cmd_ui(args: argparse.Namespace) -> int:
    from memorybus import env
    from memorybus.integrations.mcp_http import check_tls_files

    env.prepare()
    tls = check_tls_files(args.tls_cert, args.tls_key)
    app, guard, bus = build(args)
    warning = plaintext_warning(args.host, tls)
    if warning:
        print(warning, file=sys.stderr)
    import uvicorn

    scheme = "https" if tls else "http"
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"memorybus ui: {scheme}://{host}:{args.port}/  (read-only)\n"
          f"operator token (keep it private): {guard.token}\n"
          f"log in with: {scheme}://{host}:{args.port}/#token={guard.token}", flush=True)
    options: dict[str, Any] = {"ssl_certfile": args.tls_cert, "ssl_keyfile": args.tls_key} if tls else {}
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning", **options)
    finally:
        if bus is not None:
            bus.close()
    return 0
