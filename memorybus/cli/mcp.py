"""``memorybus mcp``: serve the bus over MCP (stdio or streamable HTTP).

Registered by :mod:`memorybus.cli`; the server itself is
:mod:`memorybus.integrations.mcp` (``pip install memorybus[mcp]``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile

from memorybus import env
from memorybus.cli.commands import command
from memorybus.cli.tls import add_redis_tls_flags, redis_tls_options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(
        sub,
        "mcp",
        cmd_mcp,
        "serve the bus over MCP (stdio, or streamable HTTP on 127.0.0.1) for MCP clients",
        description="Serve the bus to MCP clients. Identity is the server's: stdio acts as --org/--user/--agent/"
        "--session; over HTTP each bearer token is a memorybus credential (bus.issue_credential: verified "
        "against the bus's key ring, and again by every shard it reaches; an operator's is refused), or "
        "a token that --tokens FILE maps to an identity "
        '(JSON: {"<token>": {"org": "acme", "user": "alice", "agent": "claude"}}; private to its owner: '
        "chmod 600, a file others may read is refused). --tls-cert/--tls-key serve HTTPS; a plaintext listener "
        "on an address other than loopback is warned about (put it behind a TLS-terminating proxy).",
    )
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default loopback only)")
    p.add_argument("--port", type=int, default=8765, help="HTTP: port (default 8765)")
    p.add_argument("--tokens", help="HTTP: JSON file mapping other bearer tokens to identities (mode 600)")
    p.add_argument("--tls-cert", metavar="FILE", help="HTTP: serve HTTPS with this certificate chain (PEM)")
    p.add_argument("--tls-key", metavar="FILE", help="HTTP: the private key of --tls-cert (PEM)")
    p.add_argument("--org", help="stdio: the org this server acts as (required for stdio)")
    p.add_argument("--user", default="")
    p.add_argument("--agent", default="")
    p.add_argument("--session", default="")
    p.add_argument("--data-dir", help="embedded store directory (default: a new temp dir)")
    p.add_argument("--redis-url", help="use Redis records at this URL instead of the embedded store")
    add_redis_tls_flags(p)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--namespace", default="memorybus_mcp", help="Ray namespace of the bus's actors")
    p.add_argument("--num-cpus", type=float, default=None, help="CPUs for a Ray started here")


def cmd_mcp(args: argparse.Namespace) -> int:
    env.prepare()
    try:
        from memorybus.integrations import mcp as door
        from memorybus.integrations import mcp_http
    except ImportError as exc:
        print(f"error: the MCP server needs the mcp extra (pip install 'memorybus[mcp]'): {exc}", file=sys.stderr)
        return 2
    import memorybus as mb

    try:
        tls = mcp_http.check_tls_files(args.tls_cert, args.tls_key)  # before the bus starts
        if tls and args.transport != "http":
            raise mb.ConfigError("--tls-cert", "TLS applies to --transport http only")
        if args.transport == "stdio":
            if not args.org:
                raise mb.ConfigError("org", "stdio serves one identity: pass --org (and --user/--agent/--session)")
            identity: mb.Context | None = mb.Context(args.org, args.user, args.agent, args.session)
            tokens = None
        else:
            identity, tokens = None, (door.load_tokens(args.tokens) if args.tokens else {})
            warning = mcp_http.plaintext_warning(args.host, tls)
            if warning:
                print(warning, file=sys.stderr)
        # the server's calls are async: queries batch in the embedder actor, so this
        # process never loads the model (connect would preload it for synchronous recalls)
        common = {"num_shards": args.shards, "namespace": args.namespace, "query_encoder": "embedder"}
        if args.redis_url:
            cfg = mb.Config.redis(args.redis_url, **common, **redis_tls_options(args))
        else:
            data_dir = args.data_dir or tempfile.mkdtemp(prefix="memorybus-mcp-")
            cfg = mb.Config.embedded(data_dir, **common)
    except mb.MemoryBusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ray_kwargs = {"log_to_driver": False} | ({"num_cpus": args.num_cpus} if args.num_cpus else {})
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the stdio transport's: keep it clean
        bus = mb.connect(cfg, **ray_kwargs)
    shown = "https" if tls else args.transport
    print(f"memorybus mcp: {shown}, {cfg.num_shards} shards, namespace {cfg.namespace}", file=sys.stderr)
    try:
        if identity is not None:
            door.build_server(bus, identity).run("stdio")
        else:
            from mcp.server.auth.settings import AuthSettings

            base = f"{'https' if tls else 'http'}://{args.host}:{args.port}"
            auth = AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp")  # type: ignore[arg-type]
            server = door.build_server(bus, None, token_verifier=door.TokenIdentities(tokens or {}, bus), auth=auth)
            mcp_http.serve_http(server, args.host, args.port, tls_cert=args.tls_cert, tls_key=args.tls_key)
    finally:
        bus.shutdown()
    return 0
