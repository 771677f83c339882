"""What a Redis connection is secured with: :class:`RedisTLS` (the PEM files of
``rediss://``, checked before anything is sent) and :func:`warn_if_plaintext` (one
warning per host and process for a plaintext URL to another machine). Used by
:mod:`memorybus.storage.redis_client` and :mod:`memorybus.storage.redis_sentinel`;
imports no Redis client."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from memorybus.config.urls import is_loopback, redact_url
from memorybus.errors import ConfigError

log = logging.getLogger("memorybus.storage.redis_client")  # where operators filter it

#: hosts already warned about (plaintext to a non-loopback host), per process
_warned: set[str] = set()
_warned_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class RedisTLS:
    """PEM files for ``rediss://``: the CA that signed the server's certificate, and
    for mutual TLS this client's certificate and key (both or neither)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    @classmethod
    def from_config(cls, config: Any) -> RedisTLS:
        return cls(config.redis_tls_ca, config.redis_tls_cert, config.redis_tls_key)

    def __bool__(self) -> bool:
        return bool(self.ca or self.cert or self.key)

    def check_files(self) -> None:
        """ConfigError unless every file named is a readable regular file."""
        for name, path in (("redis_tls_ca", self.ca), ("redis_tls_cert", self.cert), ("redis_tls_key", self.key)):
            if path is None:
                continue
            if not os.path.isfile(path):
                raise ConfigError(name, f"{path} is not a file on this node")
            if not os.access(path, os.R_OK):
                raise ConfigError(name, f"{path} is not readable by this process (uid {os.getuid()})")
        if bool(self.cert) != bool(self.key):
            raise ConfigError("redis_tls_cert", "a client certificate needs its key (redis_tls_key), and a key "
                                                "its certificate: set both for mutual TLS, or neither")


def warn_if_plaintext(url: str) -> bool:
    """Log, once per host and process, that ``url`` is plaintext to another machine;
    True when it is (whether or not it was logged this time)."""
    try:
        parts = urlsplit(url)
        host = f"{parts.hostname}:{parts.port or 6379}"
    except ValueError:  # does not parse: open_redis refuses it (and never echoes it)
        return False
    if parts.scheme != "redis" or is_loopback(parts.hostname):
        return False
    with _warned_lock:
        first = host not in _warned
        _warned.add(host)
    if first:
        log.warning("Redis at %s is reached over plaintext redis://: its password and every record cross the "
                    "network unencrypted; use rediss:// with Config(redis_tls_ca=...) (see the README, "
                    "'Transport security')", redact_url(url))
    return True
