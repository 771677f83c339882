"""Erasure where the bytes live, Redis: each scope's event stream rebuilt with the same
entry ids and new payloads, operation records rewritten, fact slots dropped, the erase
job's record, and an append-only-file rewrite so that earlier writes leave the disk.

:class:`~memorybus.storage.redis.RedisStore`'s ``scrub``, ``compact``, ``op_results``,
``erase_job`` and ``set_erase_job`` are thin calls of these functions. Every rewrite is
idempotent: running one twice leaves what running it once left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import redis.exceptions as rexc

from memorybus.errors import StoreUnavailable
from memorybus.storage.base import Scrub

if TYPE_CHECKING:
    import redis

    from memorybus.storage.redis_keys import RedisKeys


# ------------------------------------------------------------------- Redis
# KEYS[1]: a scope's stream; ARGV: seq, blob, seq, blob, ... The stream is rebuilt with
# the same entry ids, those named getting their new payload (a stream entry cannot be
# changed in place, and an id below the stream's last cannot be added again).
_REWRITE_STREAM = """
local repl = {}
for i = 1, #ARGV, 2 do repl[ARGV[i] .. '-1'] = ARGV[i + 1] end
local entries = redis.call('XRANGE', KEYS[1], '-', '+')
if #entries == 0 then return 0 end
redis.call('DEL', KEYS[1])
for _, e in ipairs(entries) do
  redis.call('XADD', KEYS[1], e[1], 'e', repl[e[1]] or e[2][2])
end
return #entries
"""


def redis_scrub(client: redis.Redis, keys: RedisKeys, scrub: Scrub) -> None:
    """Apply ``scrub``: each stream rebuilt in one script, op records rewritten (their
    expiry kept), slots and their fact-event lists deleted, kept slots' evidence rewritten."""
    try:
        script = client.register_script(_REWRITE_STREAM)
        for scope_key, by_seq in scrub.events.items():
            if by_seq:
                args: list[Any] = []
                for seq, blob in sorted(by_seq.items()):
                    args += [str(seq), blob]
                script(keys=[keys.stream(scope_key)], args=args)
        pipe = client.pipeline(transaction=False)
        for op, blob in scrub.ops.items():
            pipe.hset(keys.op(op), "r", blob)
        for scope_key, key in scrub.slots:
            pipe.delete(keys.slot(scope_key, key))  # one key a call: a cluster pipeline takes no more
            pipe.delete(keys.fact_events(scope_key, key))
        for (scope_key, key), blob in scrub.evidence.items():
            pipe.hset(keys.slot(scope_key, key), "e", blob)  # a slot kept: the erasure holds its writes
        pipe.execute()
    except rexc.RedisError as exc:
        raise StoreUnavailable("redis", f"{type(exc).__name__}: {exc}") from None


def redis_op_results(client: redis.Redis, keys: RedisKeys) -> list[tuple[str, bytes]]:
    head = keys.op("")
    try:
        names = list(client.scan_iter(match=f"{head}*", count=1000))
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.hget(name, "r")
        results = pipe.execute()
    except rexc.RedisError as exc:
        raise StoreUnavailable("redis", f"{type(exc).__name__}: {exc}") from None
    return [(n.decode()[len(head):], bytes(r)) for n, r in zip(names, results, strict=True) if r is not None]


def redis_compact(client: redis.Redis) -> None:
    """Ask the server to rewrite its append-only file (``BGREWRITEAOF``): the rewritten
    file holds the data as it is now, and the old files, with every earlier write, are
    deleted once it is done. In the background: the call returns before that (a rewrite
    already running is left to finish, and one is scheduled after it). Where the server
    also takes RDB snapshots (``save`` configured), a new snapshot is scheduled too.
    Replicas rewrite on their own schedule, and backups are not reached."""
    try:
        client.bgrewriteaof()
    except rexc.ResponseError as exc:  # AOF off, or a rewrite running: Redis then schedules one
        if "already in progress" not in str(exc) and "scheduled" not in str(exc):
            raise StoreUnavailable("redis", f"BGREWRITEAOF: {exc}") from None
    except rexc.RedisError as exc:
        raise StoreUnavailable("redis", f"{type(exc).__name__}: {exc}") from None
    try:
        if client.config_get("save").get("save"):
            client.bgsave(schedule=True)
    except rexc.ResponseError:  # CONFIG refused (a managed server): the AOF rewrite is what we asked for
        pass
    except rexc.RedisError as exc:
        raise StoreUnavailable("redis", f"{type(exc).__name__}: {exc}") from None


def redis_job(client: redis.Redis, keys: RedisKeys) -> bytes | None:
    try:
        value = client.get(f"{keys.prefix}:erase")
    except rexc.RedisError as exc:
        raise StoreUnavailable("redis", f"{type(exc).__name__}: {exc}") from None
    return None if value is None else value if isinstance(value, bytes) else value.encode()


def redis_set_job(client: redis.Redis, keys: RedisKeys, job: bytes | None) -> None:
    try:
        if job is None:
            client.delete(f"{keys.prefix}:erase")
        else:
            client.set(f"{keys.prefix}:erase", job)
    except rexc.RedisError as exc:
        raise StoreUnavailable("redis", f"{type(exc).__name__}: {exc}") from None


class RedisErasure:
    """The erasure methods of :class:`~memorybus.storage.redis.RedisStore` (a mixin:
    the store has ``_r``, its client, and ``keys``, its key names)."""

    _r: Any
    keys: Any

    def op_results(self) -> list[tuple[str, bytes]]:
        return redis_op_results(self._r, self.keys)

    def scrub(self, scrub: Scrub) -> None:
        redis_scrub(self._r, self.keys, scrub)

    def compact(self) -> None:
        from memorybus.storage.redis_cluster import node_clients

        for _, node in node_clients(self._r):  # a cluster: every node, replicas included
            redis_compact(node)

    def erase_job(self) -> bytes | None:
        return redis_job(self._r, self.keys)

    def set_erase_job(self, job: bytes | None) -> None:
        redis_set_job(self._r, self.keys, job)
