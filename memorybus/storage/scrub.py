"""Erasure where the bytes live: in-place rewrites of event payloads and operation
records, dropped fact slots, the erase job's durable record, and compaction so that
removed bytes leave the files (SQLite) or the append-only file (Redis).

The stores' :meth:`~memorybus.storage.base.Store.scrub`, ``compact``, ``op_results``,
``erase_job`` and ``set_erase_job`` are thin calls of these functions. Every rewrite is
idempotent: running one twice leaves what running it once left.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from typing import TYPE_CHECKING, Any

import redis.exceptions as rexc

from memorybus.errors import StoreUnavailable
from memorybus.storage.base import Scrub

if TYPE_CHECKING:
    import redis

    from memorybus.storage.redis import RedisKeys

JOBS_SCHEMA = "CREATE TABLE IF NOT EXISTS jobs (k TEXT PRIMARY KEY, v BLOB NOT NULL);"
_ERASE = "erase"


# ------------------------------------------------------------------ SQLite
def _sqlite(lock: threading.RLock, db: sqlite3.Connection, statements: list[tuple[str, list[Any]]]) -> None:
    """Run ``(sql, rows)`` pairs (executemany) in one ``BEGIN IMMEDIATE`` transaction."""
    with lock:
        try:
            db.execute("BEGIN IMMEDIATE")
            for sql, rows in statements:
                db.executemany(sql, rows)
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise StoreUnavailable("sqlite", str(exc)) from None


def sqlite_scrub(lock: threading.RLock, db: sqlite3.Connection, scrub: Scrub) -> None:
    """Apply ``scrub`` in one transaction, with ``secure_delete`` on (freed and rewritten
    cells are zeroed in the page)."""
    with lock:
        db.execute("PRAGMA secure_delete=ON")
    events = [(blob, key, seq) for key, by_seq in scrub.events.items() for seq, blob in by_seq.items()]
    _sqlite(lock, db, [
        ("UPDATE events SET blob=? WHERE scope_key=? AND seq=?", events),
        ("UPDATE ops SET result=? WHERE op=?", [(blob, op) for op, blob in scrub.ops.items()]),
        ("DELETE FROM slots WHERE scope_key=? AND mkey=?", list(scrub.slots)),
        ("DELETE FROM fact_events WHERE scope_key=? AND mkey=?", list(scrub.slots)),
    ])


def sqlite_compact(lock: threading.RLock, db: sqlite3.Connection) -> None:
    """Rewrite the database file without free pages (VACUUM, ``secure_delete`` on) and
    checkpoint the WAL into it, truncating the WAL to 0 bytes: no byte of a removed or
    rewritten row is left in ``.sqlite`` or ``-wal``."""
    with lock:
        try:
            db.execute("PRAGMA secure_delete=ON")
            db.execute("VACUUM")
            busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            db.execute("PRAGMA secure_delete=OFF")
        except sqlite3.Error as exc:
            raise StoreUnavailable("sqlite", str(exc)) from None
    if busy:
        raise StoreUnavailable("sqlite", "the WAL checkpoint after an erasure was blocked by a reader")


def sqlite_op_results(rows: list[tuple[Any, ...]]) -> list[tuple[str, bytes]]:
    return [(str(op), bytes(result)) for op, result in rows]


def sqlite_set_job(lock: threading.RLock, db: sqlite3.Connection, job: bytes | None) -> None:
    if job is None:
        _sqlite(lock, db, [("DELETE FROM jobs WHERE k=?", [(_ERASE,)])])
    else:
        _sqlite(lock, db, [("INSERT INTO jobs(k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v=excluded.v",
                            [(_ERASE, job)])])


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
    expiry kept), slots and their fact-event lists deleted."""
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
            pipe.delete(keys.slot(scope_key, key), keys.fact_events(scope_key, key))
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
    already running is left to finish, and one is scheduled after it)."""
    try:
        client.bgrewriteaof()
    except rexc.ResponseError as exc:  # AOF off, or a rewrite running: Redis then schedules one
        if "already in progress" not in str(exc) and "scheduled" not in str(exc):
            raise StoreUnavailable("redis", f"BGREWRITEAOF: {exc}") from None
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
