"""The audit trail's part of :class:`~memorybus.storage.sqlite.SqliteStore`.

Tables: ``audit`` (org, seq, entry blob), ``audit_heads`` (each org's last seq and
hash: where the next entry links), ``audit_checkpoints`` (signed heads, apart from
the log). :func:`chain_audit` runs inside the transaction of a write, so a write and
its audit entry commit together or not at all.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any

from memorybus.audit import GENESIS, Checkpoint, Draft, chain, encode_checkpoint, encode_entry
from memorybus.audit.checkpoint import KEEP_CHECKPOINTS
from memorybus.errors import StoreUnavailable


def chain_audit(db: sqlite3.Connection, drafts: Sequence[Draft]) -> None:
        """Chain ``drafts`` onto their orgs' chains (inside the caller's transaction)."""
        by_org: dict[str, list[Draft]] = {}
        for d in drafts:
            by_org.setdefault(d.org, []).append(d)
        rows: list[tuple[str, int, bytes]] = []
        heads: list[tuple[str, int, str]] = []
        for org, group in by_org.items():
            row = db.execute("SELECT seq, hash FROM audit_heads WHERE org=?", (org,)).fetchone()
            entries = chain(group, (int(row[0]), str(row[1])) if row else (0, GENESIS))
            rows += [(org, e.seq, encode_entry(e)) for e in entries]
            heads.append((org, entries[-1].seq, entries[-1].hash))
        db.executemany("INSERT INTO audit(org, seq, blob) VALUES (?,?,?)", rows)
        db.executemany(
            "INSERT INTO audit_heads(org, seq, hash) VALUES (?,?,?) "
            "ON CONFLICT(org) DO UPDATE SET seq=excluded.seq, hash=excluded.hash",
            heads,
        )


class SqliteAudit:
    """Audit methods of the Store protocol over the store's connections."""

    _db: sqlite3.Connection
    _lock: threading.RLock
    _timeout_ms: int

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _write_if_free(self, wait: bool, work: Callable[[sqlite3.Connection], object]) -> bool:
        """``work`` in one write transaction. With ``wait=False`` nothing waits: False when a
        commit of this store or another connection holds the write lock (the caller keeps
        what it wanted to write for later). Raises StoreUnavailable for any other failure."""
        if not self._lock.acquire(blocking=wait):
            return False  # a commit is running
        try:
            if not wait:
                self._db.execute("PRAGMA busy_timeout=0")
            self._db.execute("BEGIN IMMEDIATE")
            try:
                work(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return True
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
            if not wait and isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                return False  # another connection holds the write lock
            raise StoreUnavailable("sqlite", str(exc)) from None
        finally:
            if not wait:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute(f"PRAGMA busy_timeout={self._timeout_ms}")
            self._lock.release()

    def append_audit(self, drafts: Sequence[Draft], *, wait: bool = True) -> bool:
        if not drafts:
            return True
        return self._write_if_free(wait, lambda db: chain_audit(db, drafts))

    def read_audit(self, org: str, after: int = 0, limit: int = 1000) -> list[tuple[int, bytes]]:
        rows = self._query("SELECT seq, blob FROM audit WHERE org=? AND seq>? ORDER BY seq LIMIT ?",
                           (org, after, limit))  # fmt: skip
        return [(int(r[0]), bytes(r[1])) for r in rows]

    def audit_orgs(self) -> list[str]:
        rows = self._query("SELECT org FROM audit UNION SELECT org FROM audit_heads "
                           "UNION SELECT org FROM audit_checkpoints ORDER BY org")  # fmt: skip
        return [str(r[0]) for r in rows]

    def audit_head(self, org: str) -> tuple[int, str]:
        rows = self._query("SELECT seq, hash FROM audit_heads WHERE org=?", (org,))
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, GENESIS)

    def put_checkpoint(self, checkpoint: Checkpoint) -> None:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute(
                    "INSERT INTO audit_checkpoints(org, seq, blob) VALUES (?,?,?) "
                    "ON CONFLICT(org, seq) DO UPDATE SET blob=excluded.blob",
                    (checkpoint.org, checkpoint.seq, encode_checkpoint(checkpoint)),
                )
                self._db.execute(  # the newest KEEP_CHECKPOINTS stay
                    "DELETE FROM audit_checkpoints WHERE org=? AND seq NOT IN "
                    "(SELECT seq FROM audit_checkpoints WHERE org=? ORDER BY seq DESC LIMIT ?)",
                    (checkpoint.org, checkpoint.org, KEEP_CHECKPOINTS),
                )
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise StoreUnavailable("sqlite", str(exc)) from None

    def checkpoints(self, org: str) -> list[bytes]:
        rows = self._query("SELECT blob FROM audit_checkpoints WHERE org=? ORDER BY seq", (org,))
        return [bytes(r[0]) for r in rows]
