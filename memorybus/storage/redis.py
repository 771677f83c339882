"""RedisStore: shard records in a Redis server (the shared deployment).

Every key of a shard is built by :class:`RedisKeys` and carries the shard's
hash tag, so a shard's keys share one Redis Cluster slot. A whole
:class:`WriteBatch` is one Lua script: it checks every operation first and
writes only if all pass, so compare-and-set is atomic where the data lives.
Durability is the server's: acknowledged-means-durable needs Redis with
``appendonly yes`` and ``appendfsync always``, which opening a store checks
(:mod:`memorybus.storage.redis_durability`; ``require_fsync=False`` skips it).
With ``wait_replicas`` > 0 a commit is acknowledged only after that many replicas
confirm it (``WAIT``), so a promoted replica has every acknowledged write; fewer
confirmations raise StoreUnavailable (the shard reports OutcomeUnknown and settles it).
The URL may name an ACL user (``redis://user:password@host:port/db``); errors
show it without the password.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import msgpack
import redis
import redis.exceptions as rexc

from memorybus.config.urls import redact_url
from memorybus.errors import ConfigError, MemoryNotFound, StoreUnavailable, VersionConflict
from memorybus.memory.codec import decode_node, encode_node
from memorybus.memory.model import MemoryNode
from memorybus.storage.base import DEFAULT_OP_RETENTION, AlreadyApplied, OpRecord, WriteBatch
from memorybus.storage.redis_audit import RedisAudit
from memorybus.storage.redis_client import RedisTLS, describe, open_redis
from memorybus.storage.redis_cluster import (
    OwnerReplicatedScript,
    commit_keys,
    confirm_on_owner,
    is_cluster,
    node_clients,
    read_on_owner,
)
from memorybus.storage.redis_durability import ReplicatedScript, check_durable, confirm_record
from memorybus.storage.redis_keys import RedisKeys
from memorybus.storage.redis_scripts import COMMIT as _COMMIT
from memorybus.storage.redis_scripts import RESOLVE as _RESOLVE
from memorybus.storage.redis_scripts import TOUCH as _TOUCH
from memorybus.storage.redis_scrub import RedisErasure

_FIELDS = ("d", "v", "ac", "la")


def _seqs(blob: Any) -> list[int]:
    value = msgpack.unpackb(blob) if blob else []
    return [int(x) for x in value] if isinstance(value, list) else []


def _record(reply: Sequence[Any]) -> OpRecord:
    return OpRecord(bytes(reply[1]), _seqs(reply[2]))


def _to_node(values: Sequence[Any]) -> MemoryNode | None:
    if values[0] is None:
        return None
    node = decode_node(values[0])
    node.version = int(values[1])
    node.access_count = int(values[2])
    node.last_accessed = float(values[3])
    return node


class RedisStore(RedisAudit, RedisErasure):
    """Records of one shard in Redis, under the shard's own key prefix.

    Opening raises StoreUnavailable when the server cannot be reached or refuses
    the credentials or (``rediss://``, :mod:`memorybus.storage.redis_client`) the TLS
    handshake, and ConfigError when the URL does not parse, a TLS file is missing, or (with
    ``require_fsync``) the server does not fsync every write; neither names the
    password."""

    backend = "redis"
    #: one operation record per commit (its script's keys): a group of calls commits one by one
    group_ops = False

    def __init__(
        self,
        url: str,
        namespace: str,
        shard: str,
        *,
        socket_timeout: float = 5.0,
        client: redis.Redis | None = None,
        op_retention: float = DEFAULT_OP_RETENTION,
        require_fsync: bool = True,
        tls: RedisTLS | None = None,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
    ) -> None:
        self.keys = RedisKeys(namespace, shard)
        #: org -> (seq, hash) of its audit chain's last entry, as this store last wrote or read it
        self._heads: dict[str, tuple[int, str]] = {}
        self._retention_ms = str(max(1, int(op_retention * 1000)))
        where = redact_url(url)
        self._r = client or open_redis(url, tls=tls, socket_timeout=socket_timeout)
        try:
            self._commit = self._r.register_script(_COMMIT)
            self._touch = self._r.register_script(_TOUCH)
            self._resolve: Any = self._r.register_script(_RESOLVE)
            #: replicas that must confirm each commit (WAIT) before it is acknowledged
            self.wait_replicas, self._wait_timeout = wait_replicas, wait_timeout
            #: a Redis Cluster (memorybus.storage.redis_cluster): WAIT goes to the slot's own primary
            self.cluster = is_cluster(self._r)
            if wait_replicas:
                replicated = OwnerReplicatedScript if self.cluster else ReplicatedScript
                self._commit = replicated(self._r, self._commit, wait_replicas, wait_timeout)
                self._resolve = replicated(self._r, self._resolve, wait_replicas, wait_timeout)
            self._r.ping()
            self.durability = "unchecked"
            for name, node in node_clients(self._r) if require_fsync else ():
                self.durability = check_durable(node, f"{where} (node {name})" if name else str(where))
        except rexc.RedisError as exc:
            self._r.close()
            raise StoreUnavailable("redis", describe(exc, where)) from None
        except ConfigError:
            self._r.close()
            raise

    @property
    def client(self) -> redis.Redis:
        return self._r

    def _call(self, fn: Any, *args: Any, **kw: Any) -> Any:
        try:
            return fn(*args, **kw)
        except rexc.RedisError as exc:
            raise StoreUnavailable("redis", f"{type(exc).__name__}: {exc}") from None

    # ------------------------------------------------------------------ writes
    def commit(self, batch: WriteBatch) -> list[int]:
        if not batch:
            return []
        ops: list[list[Any]] = []
        for slot in batch.slots:
            ops.append(["slot", slot.scope_key, slot.key, slot.expected_seq, slot.head_id, slot.count,
                        slot.evidence or b""])
        for n in batch.puts:
            ops.append(
                [
                    "put",
                    n.id,
                    encode_node(n),
                    n.version,
                    str(n.access_count),
                    repr(float(n.last_accessed)),
                    n.scope.key,
                    n.key or "",
                ]
            )
        for n, expected in batch.updates:
            ops.append(["cas", n.id, encode_node(n), expected])
        for memory_id, expected_del in batch.deletes:
            ops.append(["del", memory_id, b"", -1 if expected_del is None else expected_del])
        keys = batch.event_keys or [None] * len(batch.events)
        for (scope_key, blob), key in zip(batch.events, keys, strict=True):
            ops.append(["evt", scope_key, blob, key or ""])
        reply = self._run(ops, batch.audit, batch.op or "", batch.op_result, batch.attempt)
        status = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
        if status == "ok":
            return [int(x) for x in reply[1:]]
        if status == "done":
            raise AlreadyApplied(_record(reply))
        if status == "fenced":
            raise StoreUnavailable("redis", f"commit attempt of operation {batch.op} was fenced off after a failure")
        memory_id = reply[1].decode() if isinstance(reply[1], bytes) else reply[1]
        if status == "missing":
            raise MemoryNotFound(memory_id)
        expected = int(reply[2])
        raise VersionConflict(memory_id, None if expected < 0 else expected, int(reply[3]))

    def op_record(self, op: str) -> OpRecord | None:
        result, seqs = self._call(self._r.hmget, self.keys.op(op), ("r", "q"))
        if result is None:
            return None
        if self.wait_replicas:  # an answer is given only for a write the replicas have
            confirm = confirm_on_owner if self.cluster else confirm_record
            self._call(confirm, self._r, self.keys.op(op), self._retention_ms, self.wait_replicas,
                       self._wait_timeout)
        return OpRecord(bytes(result), _seqs(seqs))

    def _script(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        return self._call(script, keys=keys, args=args)

    def _commit_keys(self, ops: list[list[Any]], op: str) -> list[str]:
        """The keys the commit script is given: all it touches on a cluster (so that a
        moving slot redirects it before it runs), the shard's id set alone otherwise."""
        return commit_keys(self.keys.prefix, ops, op) if self.cluster else [self.keys.all()]

    def resolve(self, op: str, attempt: str) -> OpRecord | None:
        reply = self._script(self._resolve, [self.keys.op(op)], [attempt, self._retention_ms])
        return _record(reply) if reply[0] in (b"done", "done") else None

    def touch(self, stats: Mapping[str, tuple[int, float]], *, wait: bool = True) -> bool:
        if not stats:
            return True
        pipe = self._r.pipeline(transaction=False)
        for mid, (count, when) in stats.items():
            if self.cluster:  # a cluster pipeline does not load scripts: the text itself
                pipe.execute_command("EVAL", _TOUCH, 1, self.keys.node(mid), int(count), repr(float(when)))
            else:
                self._touch(keys=[self.keys.node(mid)], args=[int(count), repr(float(when))], client=pipe)
        self._call(pipe.execute)
        return True

    # ------------------------------------------------------------------- reads
    def get(self, memory_id: str) -> MemoryNode | None:
        return _to_node(self._call(self._r.hmget, self.keys.node(memory_id), _FIELDS))

    def get_many(self, ids: Sequence[str]) -> list[MemoryNode | None]:
        if not ids:
            return []
        def fill(pipe: Any) -> None:
            for mid in ids:
                pipe.hmget(self.keys.node(mid), _FIELDS)

        values = self._call(read_on_owner, self._r, self.keys.all(), fill) if self.cluster else None
        if values is None:
            pipe = self._r.pipeline(transaction=False)
            fill(pipe)
            values = self._call(pipe.execute)
        return [_to_node(v) for v in values]

    def slot(self, scope_key: str, key: str) -> tuple[str | None, int]:
        head, seq = self._call(self._r.hmget, self.keys.slot(scope_key, key), ("id", "q"))
        return (head.decode() if head else None, int(seq or 0))

    def fact_slot(self, scope_key: str, key: str) -> tuple[str | None, int, bytes | None]:
        head, seq, ev = self._call(self._r.hmget, self.keys.slot(scope_key, key), ("id", "q", "e"))
        return (head.decode() if head else None, int(seq or 0), bytes(ev) if ev else None)

    def all_evidence(self) -> list[tuple[str, str, bytes]]:
        names = self._scan("h")
        if not names:
            return []
        pipe = self._r.pipeline(transaction=False)
        for name in names:
            pipe.hget(f"{self.keys.prefix}:h:{name}", "e")
        out = []
        for name, blob in zip(names, self._call(pipe.execute), strict=True):
            parts = name.split("\x1f", 4)  # the scope key's four fields, then the fact key
            if len(parts) == 5 and blob:
                out.append(("\x1f".join(parts[:4]), parts[4], bytes(blob)))
        return sorted(out)

    def read_events(self, scope_key: str, after: int = 0, limit: int = 1000) -> list[tuple[int, bytes]]:
        entries = self._call(
            self._r.xrange, self.keys.stream(scope_key), min=f"({after}-1", max="+", count=limit
        )
        return [(int(eid.split(b"-")[0]), fields[b"e"]) for eid, fields in entries]

    def last_seq(self, scope_key: str) -> int:
        return int(self._call(self._r.get, self.keys.seq(scope_key)) or 0)

    def confirm_reads(self) -> None:
        if self.wait_replicas:  # the marker carries the shard's hash tag: on a cluster, its slot's primary
            confirm = confirm_on_owner if self.cluster else confirm_record
            self._call(confirm, self._r, self.keys.fence(), "60000", self.wait_replicas, self._wait_timeout,
                       create=True)

    def fact_events(self, scope_key: str, key: str) -> list[tuple[int, bytes]]:
        seqs = [int(x) for x in self._call(self._r.lrange, self.keys.fact_events(scope_key, key), 0, -1)]
        if not seqs:
            return []
        pipe = self._r.pipeline(transaction=False)
        stream = self.keys.stream(scope_key)
        for seq in seqs:
            pipe.xrange(stream, min=f"{seq}-1", max=f"{seq}-1", count=1)
        out = []
        for seq, entries in zip(seqs, self._call(pipe.execute), strict=True):
            if entries:
                out.append((seq, entries[0][1][b"e"]))
        return out

    def _scan(self, kind: str) -> list[str]:
        """The parts after ``prefix:kind:`` of this shard's keys of that kind."""
        head = f"{self.keys.prefix}:{kind}:"
        found = self._call(lambda: list(self._r.scan_iter(match=f"{head}*", count=1000)))
        return sorted(k.decode()[len(head) :] for k in found)

    def event_scopes(self) -> list[str]:
        return self._scan("q")

    def all_slots(self) -> list[tuple[str, str, str, int]]:
        names = self._scan("h")
        if not names:
            return []
        pipe = self._r.pipeline(transaction=False)
        for name in names:
            pipe.hmget(f"{self.keys.prefix}:h:{name}", ("id", "q"))
        out = []
        for name, (head, seq) in zip(names, self._call(pipe.execute), strict=True):
            parts = name.split("\x1f", 4)  # the scope key's four fields, then the fact key
            if len(parts) == 5 and head is not None:
                out.append(("\x1f".join(parts[:4]), parts[4], head.decode(), int(seq or 0)))
        return sorted(out)

    def iter_all(self, batch_size: int = 1000) -> Iterator[MemoryNode]:
        cursor = 0
        seen: set[str] = set()
        while True:
            cursor, members = self._call(self._r.sscan, self.keys.all(), cursor=cursor, count=batch_size)
            ids = [m.decode() for m in members if m.decode() not in seen]
            seen.update(ids)
            for node in self.get_many(ids):
                if node is not None:
                    yield node
            if cursor == 0:
                return

    def count(self) -> int:
        return int(self._call(self._r.scard, self.keys.all()))

    def meta(self) -> dict[str, str]:
        raw = self._call(self._r.hgetall, self.keys.meta())
        return {k.decode(): v.decode() for k, v in raw.items()}

    def set_meta(self, items: Mapping[str, str]) -> None:
        if items:
            self._call(self._r.hset, self.keys.meta(), None, None, dict(items))

    def clear(self) -> None:
        keys = self._call(lambda: list(self._r.scan_iter(match=f"{self.keys.prefix}:*", count=1000)))
        for i in range(0, len(keys), 500):
            self._call(self._r.delete, *keys[i : i + 500])
        self._heads.clear()

    def close(self) -> None:
        with contextlib.suppress(rexc.RedisError):
            self._r.close()
