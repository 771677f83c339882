"""Erasure where the bytes live, SQLite: in-place rewrites of event payloads and
operation records, dropped fact slots, the erase job's durable record, and compaction
so that removed bytes leave the files (Redis: :mod:`memorybus.storage.redis_scrub`).

:class:`~memorybus.storage.sqlite.SqliteStore`'s ``scrub``, ``compact``, ``op_results``,
``erase_job`` and ``set_erase_job`` are thin calls of these functions. Every rewrite is
idempotent: running one twice leaves what running it once left.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from typing import Any

from memorybus.errors import StoreUnavailable
from memorybus.storage.base import Scrub

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
        try:
            db.execute("PRAGMA secure_delete=ON")
        except sqlite3.Error as exc:
            raise StoreUnavailable("sqlite", str(exc)) from None
    events = [(blob, key, seq) for key, by_seq in scrub.events.items() for seq, blob in by_seq.items()]
    _sqlite(lock, db, [
        ("UPDATE events SET blob=? WHERE scope_key=? AND seq=?", events),
        ("UPDATE ops SET result=? WHERE op=?", [(blob, op) for op, blob in scrub.ops.items()]),
        ("DELETE FROM slots WHERE scope_key=? AND mkey=?", list(scrub.slots)),
        ("DELETE FROM fact_events WHERE scope_key=? AND mkey=?", list(scrub.slots)),
        ("DELETE FROM slot_evidence WHERE scope_key=? AND mkey=?", list(scrub.slots)),
        ("UPDATE slot_evidence SET blob=? WHERE scope_key=? AND mkey=?",
         [(blob, scope_key, key) for (scope_key, key), blob in scrub.evidence.items()]),
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


class SqliteErasure:
    """The erasure methods of :class:`~memorybus.storage.sqlite.SqliteStore` (a mixin:
    the store has ``_lock`` and ``_db``, its writer, and ``_query``, its reader)."""

    _lock: Any
    _db: Any

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def op_results(self) -> list[tuple[str, bytes]]:
        return sqlite_op_results(self._query("SELECT op, result FROM ops"))

    def scrub(self, scrub: Scrub) -> None:
        sqlite_scrub(self._lock, self._db, scrub)

    def compact(self) -> None:
        sqlite_compact(self._lock, self._db)

    def erase_job(self) -> bytes | None:
        rows = self._query("SELECT v FROM jobs WHERE k='erase'")
        return bytes(rows[0][0]) if rows else None

    def set_erase_job(self, job: bytes | None) -> None:
        sqlite_set_job(self._lock, self._db, job)
