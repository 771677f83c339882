"""The check, at connect, that a Redis server keeps what it acknowledges.

memorybus acknowledges a write once Redis has answered it, so the server must
append every write to its AOF and fsync it before answering: ``appendonly yes``
and ``appendfsync always``. With ``everysec`` a crash loses about a second of
acknowledged writes; with ``no`` (or AOF off) far more. :func:`check_durable`
reads the server's settings when a store opens and raises :class:`ConfigError`
unless both hold:

- ``CONFIG GET append*`` when the user may run it (deploy/redis.sh grants the
  ``memorybus`` ACL user ``+config|get``);
- else ``INFO persistence``: ``aof_enabled`` says whether the AOF is on, but not
  the fsync policy, which then cannot be verified: the store opens with a warning
  in the log (grant ``+config|get`` to have it checked);
- when the user may run neither, the store refuses to open.

``Config(redis_require_fsync=False)`` skips the check (tests, data you can lose).
Messages name the server by its redacted URL only.
"""

from __future__ import annotations

import logging
from typing import Any

import redis.exceptions as rexc

from memorybus.errors import ConfigError

log = logging.getLogger(__name__)

_HOW = ("run it with 'appendonly yes' and 'appendfsync always' (deploy/redis.sh does), or set "
        "Config(redis_require_fsync=False) to accept losing acknowledged writes in a crash")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def check_durable(client: Any, where: str) -> str:
    """Raise ConfigError unless the server at ``where`` (a redacted URL, for messages)
    fsyncs its AOF on every write; return how that was established (``"config"``, or
    ``"info"`` when only the AOF could be checked). Connection errors propagate as
    redis-py raises them (the caller maps them to StoreUnavailable)."""
    try:
        settings = {_text(k): _text(v) for k, v in client.config_get("append*").items()}
    except rexc.ResponseError:  # NOPERM for this ACL user, or CONFIG renamed away
        return _check_by_info(client, where)
    appendonly, appendfsync = settings.get("appendonly", "?"), settings.get("appendfsync", "?")
    if appendonly != "yes":
        raise ConfigError("redis_url", f"Redis at {where} runs with appendonly {appendonly}: its writes are not "
                                       f"logged, so acknowledged writes are lost in a crash; {_HOW}")
    if appendfsync != "always":
        raise ConfigError("redis_url", f"Redis at {where} runs with appendfsync {appendfsync}: writes it has "
                                       f"acknowledged but not yet fsync'd are lost in a crash; {_HOW}")
    return "config"


def _check_by_info(client: Any, where: str) -> str:
    try:
        info = client.info("persistence")
    except rexc.ResponseError:
        raise ConfigError("redis_url", f"the user of {where} may run neither CONFIG GET nor INFO, so memorybus "
                                       "cannot check that the server fsyncs every write: grant the user "
                                       "'+config|get' (deploy/redis.sh does), or set "
                                       "Config(redis_require_fsync=False)") from None
    if str(info.get("aof_enabled", "0")) != "1":
        raise ConfigError("redis_url", f"Redis at {where} has its AOF off (INFO persistence: aof_enabled=0): "
                                       f"acknowledged writes are lost in a crash; {_HOW}")
    log.warning("Redis at %s: the AOF is on, but its fsync policy cannot be read (this user may not run CONFIG "
                "GET): grant '+config|get' to have appendfsync always checked", where)
    return "info"
