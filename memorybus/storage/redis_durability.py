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

A crash of the master with a replica promoted in its place (Sentinel) loses what the
replica had not received, fsync or not: :class:`ReplicatedScript` acknowledges a
commit only after ``WAIT`` says enough replicas have it (``Config.redis_wait_replicas``).
"""

from __future__ import annotations

import logging
from typing import Any

import redis.exceptions as rexc

from memorybus.errors import ConfigError, StoreUnavailable

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


class ReplicatedScript:
    """A registered Lua script whose every call is followed by ``WAIT replicas timeout``
    on the same connection (one pipeline: WAIT counts the replicas that have this
    connection's writes, and every write the master made before them).

    Returns the script's reply once at least ``replicas`` replicas confirmed; raises
    StoreUnavailable (the write is on the master, maybe on fewer replicas: a failover
    may lose it; the caller treats its outcome as unknown) when fewer did within
    ``timeout`` seconds. A script reply that writes nothing is confirmed trivially, so
    a script that answers from a record an earlier connection wrote must itself write
    (refresh the record's expiry) to have that record's replication confirmed."""

    def __init__(self, client: Any, script: Any, replicas: int, timeout: float) -> None:
        self.client, self.script, self.replicas = client, script, replicas
        self.timeout_ms = max(1, int(timeout * 1000))

    def __call__(self, keys: list[Any], args: list[Any]) -> Any:
        for _ in range(2):
            pipe = self.client.pipeline(transaction=False)
            pipe.evalsha(self.script.sha, len(keys), *keys, *args)
            pipe.execute_command("WAIT", self.replicas, self.timeout_ms)
            reply, acked = pipe.execute(raise_on_error=False)
            if isinstance(reply, rexc.NoScriptError):  # a new master's empty script cache: nothing ran
                self.client.script_load(self.script.script)
                continue
            for value in (reply, acked):
                if isinstance(value, Exception):
                    raise value
            if int(acked) < self.replicas:
                raise unconfirmed(int(acked), self.replicas, self.timeout_ms)
            return reply
        raise rexc.NoScriptError("the commit script could not be loaded")


def unconfirmed(acked: int, replicas: int, timeout_ms: int) -> StoreUnavailable:
    return StoreUnavailable("redis", f"only {acked} of {replicas} replica(s) confirmed the write within "
                                     f"{timeout_ms} ms: it is on the master but a failover could lose it "
                                     "(see Config.redis_wait_replicas)")


def confirm_record(client: Any, key: str, retention_ms: str, replicas: int, timeout: float, *,
                   create: bool = False) -> None:
    """Refresh the expiry of operation record ``key`` and WAIT for ``replicas`` replicas
    (the record may have been written by a connection whose WAIT failed): StoreUnavailable
    unless they confirm within ``timeout`` seconds. ``create``: set ``key`` to a marker
    instead (a write even where no record exists: a replica confirming it has every
    write the master made before it)."""
    timeout_ms = max(1, int(timeout * 1000))
    pipe = client.pipeline(transaction=False)
    mark(pipe, key, retention_ms, create)
    pipe.execute_command("WAIT", replicas, timeout_ms)
    _, acked = pipe.execute()
    if int(acked) < replicas:
        raise unconfirmed(int(acked), replicas, timeout_ms)


def mark(pipe: Any, key: str, retention_ms: str, create: bool) -> None:
    """Queue the write that :func:`confirm_record` WAITs for."""
    if create:
        pipe.set(key, b"1", px=int(retention_ms))
    else:
        pipe.pexpire(key, int(retention_ms))
