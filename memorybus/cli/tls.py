"""The command line's Redis TLS flags, shared by every command that opens a Redis store.

``--redis-tls-ca``, ``--redis-tls-cert``, ``--redis-tls-key`` (defaults:
``$MEMORYBUS_REDIS_TLS_CA``, ``$MEMORYBUS_REDIS_TLS_CERT``, ``$MEMORYBUS_REDIS_TLS_KEY``)
become ``Config(redis_tls_ca=..., redis_tls_cert=..., redis_tls_key=...)``; they
apply to a ``rediss://`` URL only (Config refuses them with a plaintext one).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

_FLAGS = (
    ("ca", "PEM file of the CA that signed the Redis server's certificate (rediss://; default: system CAs)"),
    ("cert", "mutual TLS: this client's certificate (PEM)"),
    ("key", "mutual TLS: this client's private key (PEM)"),
)


def add_redis_tls_flags(group: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    for name, text in _FLAGS:
        var = f"MEMORYBUS_REDIS_TLS_{name.upper()}"
        group.add_argument(f"--redis-tls-{name}", metavar="FILE", help=f"{text} (default: ${var} if set)")


def redis_tls_options(args: argparse.Namespace) -> dict[str, Any]:
    """The Config keyword arguments the flags (or their environment variables) give;
    only those set, so a config without TLS is built exactly as before."""
    out: dict[str, Any] = {}
    for name, _ in _FLAGS:
        value = getattr(args, f"redis_tls_{name}", None) or os.environ.get(f"MEMORYBUS_REDIS_TLS_{name.upper()}")
        if value:
            out[f"redis_tls_{name}"] = value
    return out
