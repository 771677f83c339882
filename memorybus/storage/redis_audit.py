"""The audit trail's part of :class:`~memorybus.storage.redis.RedisStore`.

Keys (under the shard's prefix, so one slot): ``:a:<org>`` a list of entry blobs
(the chain, in order), ``:ah:<org>`` its head ("seq hash"), ``:ac:<org>`` a list of
signed checkpoints, apart from the log. Entries are chained in Python after the head
this store last saw and appended by the commit script of their write, which refuses
them whole when the head has moved; they are then re-chained and the commit retried.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgpack
import redis

from memorybus.audit import GENESIS, Checkpoint, Draft, chain, encode_checkpoint, encode_entry
from memorybus.audit.checkpoint import KEEP_CHECKPOINTS
from memorybus.errors import StoreUnavailable


def _head_text(head: tuple[int, str]) -> str:
    return "" if head[0] == 0 else f"{head[0]} {head[1]}"


def _parse_head(value: Any) -> tuple[int, str]:
    if not value:
        return (0, GENESIS)
    seq, digest = (value.decode() if isinstance(value, bytes) else str(value)).split(" ")
    return (int(seq), digest)


class RedisAudit:
    """Audit methods of the Store protocol, and the commit script's runner."""

    _r: redis.Redis
    _commit: Callable[..., Any]
    _retention_ms: str
    _heads: dict[str, tuple[int, str]]
    keys: Any

    def _call(self, fn: Any, *args: Any, **kw: Any) -> Any:
        raise NotImplementedError

    def _scan(self, kind: str) -> list[str]:
        raise NotImplementedError

    def _script(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        raise NotImplementedError

    def _commit_keys(self, ops: list[list[Any]], op: str) -> list[str]:
        raise NotImplementedError

    def _run(self, ops: list[list[Any]], audit: Sequence[Draft], op: str, result: bytes, attempt: str) -> Any:
        """Run the commit script; audit entries are chained here after the heads this
        store last saw, and re-chained when the script finds a head moved (another
        process appended, or a commit whose outcome was unknown did apply)."""
        by_org: dict[str, list[Draft]] = {}
        for d in audit:
            by_org.setdefault(d.org, []).append(d)
        for _ in range(8):
            todo = [org for org in by_org if org not in self._heads]
            if todo:
                self._heads.update(zip(todo, self._call(self._read_heads, todo), strict=True))
            chained: list[list[Any]] = []
            for org, drafts in by_org.items():
                head = self._heads[org]
                entries = chain(drafts, head)
                new = (entries[-1].seq, entries[-1].hash)
                chained.append(["aud", org, _head_text(head), _head_text(new), *map(encode_entry, entries)])
            payload = msgpack.packb(ops + chained, use_bin_type=False)
            args = [payload, self.keys.prefix, op, result, attempt, self._retention_ms]
            try:
                reply = self._script(self._commit, self._commit_keys(ops + chained, op), args)
            except StoreUnavailable:
                for org in by_org:
                    self._heads.pop(org, None)  # it may have applied: read the heads again
                raise
            status = reply[0].decode() if isinstance(reply[0], bytes) else reply[0]
            if status != "audit":
                if status == "ok":
                    for org, item in zip(by_org, chained, strict=True):
                        seq, digest = item[3].split(" ")
                        self._heads[org] = (int(seq), digest)
                return reply
            for org in by_org:
                self._heads.pop(org, None)
        raise StoreUnavailable("redis", "audit chain head kept moving: another writer appends to this shard")

    def _read_heads(self, orgs: list[str]) -> list[tuple[int, str]]:
        return [_parse_head(v) for v in self._r.mget([self.keys.audit_head(o) for o in orgs])]

    # ------------------------------------------------------------ audit trail
    def append_audit(self, drafts: Sequence[Draft], *, wait: bool = True) -> bool:
        if drafts:
            reply = self._run([], drafts, "", b"", "")
            if reply[0] not in (b"ok", "ok"):  # pragma: no cover - no op record, no node ops
                raise StoreUnavailable("redis", f"audit append refused: {reply!r}")
        return True

    def read_audit(self, org: str, after: int = 0, limit: int = 1000) -> list[tuple[int, bytes]]:
        blobs = self._call(self._r.lrange, self.keys.audit(org), after, after + limit - 1)
        return [(after + i + 1, bytes(b)) for i, b in enumerate(blobs)]

    def audit_orgs(self) -> list[str]:
        return sorted({*self._scan("a"), *self._scan("ah"), *self._scan("ac")})

    def audit_head(self, org: str) -> tuple[int, str]:
        return _parse_head(self._call(self._r.get, self.keys.audit_head(org)))

    def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        key = self.keys.checkpoints(checkpoint.org)
        pipe = self._r.pipeline(transaction=True)
        pipe.rpush(key, encode_checkpoint(checkpoint))
        pipe.ltrim(key, -KEEP_CHECKPOINTS, -1)
        self._call(pipe.execute)

    def checkpoints(self, org: str) -> list[bytes]:
        return [bytes(b) for b in self._call(self._r.lrange, self.keys.checkpoints(org), 0, -1)]
