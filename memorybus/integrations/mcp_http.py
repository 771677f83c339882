"""The MCP server's streamable-HTTP listener, with or without TLS.

The MCP SDK's ``run("streamable-http")`` starts uvicorn without TLS options; here the
SDK's ASGI app (``MCPServer.streamable_http_app``) is served by uvicorn directly, so
that ``memorybus mcp --transport http --tls-cert FILE --tls-key FILE`` serves HTTPS
(TLS 1.2+, uvicorn's defaults) with the same app, tools and bearer-token checks.

Guarantees: TLS files are checked before the bus starts (:func:`check_tls_files`:
both or neither, readable regular files; ConfigError naming the flag); a listener on
an address other than loopback without TLS is reported by :func:`plaintext_warning`
(bearer tokens would cross the network in clear) — the CLI prints it, it does not
refuse, since a TLS-terminating reverse proxy on the same host is a sound setup.
On SIGTERM or SIGINT the listener stops taking connections, gives the requests in flight
up to :data:`GRACEFUL_SHUTDOWN_S` seconds, then closes whatever connection is still open
(uvicorn's default waits for every one: over HTTPS, what a session and a refused
handshake left open kept the server up until it was killed); the bus is closed after that.
"""

from __future__ import annotations

import os
from typing import Any

from memorybus.config.urls import is_loopback
from memorybus.errors import ConfigError

#: seconds a stopping listener waits for open connections before it closes them
#: (uvicorn waits for ever by default: a connection a client left open kept the server up)
GRACEFUL_SHUTDOWN_S = 5


def check_tls_files(cert: str | None, key: str | None) -> bool:
    """True when TLS is asked for (both files given and readable); False for neither;
    ConfigError otherwise, naming the flag and the path."""
    if cert is None and key is None:
        return False
    if not cert or not key:
        raise ConfigError("--tls-cert" if not cert else "--tls-key",
                          "HTTPS needs both --tls-cert (the server's certificate chain, PEM) and --tls-key "
                          "(its private key, PEM)")
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not os.path.isfile(path):
            raise ConfigError(flag, f"{path} is not a file")
        if not os.access(path, os.R_OK):
            raise ConfigError(flag, f"{path} is not readable by this process")
    return True


def plaintext_warning(host: str, tls: bool) -> str | None:
    """The warning to print for a plaintext listener on a non-loopback address."""
    if tls or is_loopback(host):
        return None
    return (f"warning: serving MCP over plaintext HTTP on {host}: bearer tokens and memories cross the network "
            "unencrypted; pass --tls-cert/--tls-key, or bind 127.0.0.1 behind a TLS-terminating reverse proxy")


def http_server(server: Any, host: str, port: int, *, tls_cert: str | None = None,
                tls_key: str | None = None, path: str = "/mcp") -> Any:
    """A ``uvicorn.Server`` serving ``server`` (an ``MCPServer``) at ``path``; HTTPS when
    both TLS files are given. Run it with ``await srv.serve()``; set
    ``srv.should_exit = True`` to stop it."""
    import uvicorn

    tls = check_tls_files(tls_cert, tls_key)
    app = server.streamable_http_app(streamable_http_path=path, host=host)
    options: dict[str, Any] = {"ssl_certfile": tls_cert, "ssl_keyfile": tls_key} if tls else {}
    config = uvicorn.Config(app, host=host, port=port, log_level=server.settings.log_level.lower(),
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, **options)  # fmt: skip
    return uvicorn.Server(config)


def serve_http(server: Any, host: str, port: int, *, tls_cert: str | None = None, tls_key: str | None = None) -> None:
    """Serve until interrupted (blocking)."""
    import anyio

    srv = http_server(server, host, port, tls_cert=tls_cert, tls_key=tls_key)
    anyio.run(srv.serve)
