"""SqliteStore: the embedded default, one SQLite file per shard in WAL mode.

Durability: ``synchronous=FULL`` in WAL mode, so a committed transaction is on
disk when :meth:`SqliteStore.commit` returns. Compare-and-set is a conditional
``UPDATE ... WHERE version = ?`` inside one ``BEGIN IMMEDIATE`` transaction; the
operation id of a batch is a row of ``ops`` written in that same transaction, kept
``op_retention`` seconds. Audit entries are chained onto ``audit`` (heads in
``audit_heads``) in the transaction of their write; checkpoints live in
``audit_checkpoints``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import msgpack

from memorybus.errors import MemoryNotFound, StoreUnavailable, VersionConflict
from memorybus.memory.codec import decode_node, encode_node
from memorybus.memory.model import MemoryNode
from memorybus.storage.base import DEFAULT_OP_RETENTION, AlreadyApplied, OpRecord, WriteBatch
from memorybus.storage.scrub import JOBS_SCHEMA, SqliteErasure
from memorybus.storage.sqlite_audit import SqliteAudit, chain_audit
from memorybus.storage.sqlite_schema import SCHEMA

_COLS = "blob, version, access_count, last_accessed"
#: ids per ``IN (...)`` lookup (well under SQLite's bound on a statement's parameters)
_IN_GROUP = 500


def fetch_all(lock: threading.Lock, db: sqlite3.Connection, sql: str,
              params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:  # fmt: skip
    """The rows of one statement run on ``db`` under ``lock``; a SQLite failure as StoreUnavailable."""
    with lock:
        try:
            return db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise StoreUnavailable("sqlite", str(exc)) from None


def _row_to_node(row: tuple[Any, ...]) -> MemoryNode:
    node = decode_node(row[0])
    node.version, node.access_count, node.last_accessed = row[1], row[2], row[3]
    return node


class SqliteStore(SqliteAudit, SqliteErasure):
    """Records of one shard in one SQLite file."""

    backend = "sqlite"
    #: takes a batch's ``more_ops`` (several calls' operation records in one transaction)
    group_ops = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        op_retention: float = DEFAULT_OP_RETENTION,
        timeout: float = 30.0,
        read_only: bool = False,
    ) -> None:
        """``timeout``: how long a write waits for a lock another connection holds
        before StoreUnavailable. Reads use a connection of their own: in WAL mode they
        see the last commit and never wait for a writer.

        ``read_only``: open an existing file for reading only (SQLite's ``mode=ro``):
        nothing is created, no schema or pragma written, no checkpoint on close; every
        write raises StoreUnavailable. SQLite may still create the ``-wal``/``-shm``
        side files it needs to read a WAL database."""
        self.path = os.fspath(path)
        self.op_retention = float(op_retention)
        self._timeout_ms = max(1, int(timeout * 1000))
        self._pruned = 0.0
        self._lock = threading.RLock()  # the writer connection
        self._rlock = threading.Lock()  # the reader connection
        self.read_only = read_only
        if read_only:
            try:
                uri = f"file:{quote(os.path.abspath(self.path))}?mode=ro"
                self._db = self._reader = sqlite3.connect(uri, uri=True, isolation_level=None,
                                                          check_same_thread=False, timeout=timeout)
                self._reader.execute("SELECT 1 FROM nodes LIMIT 1").fetchall()  # a records file, readable
            except sqlite3.Error as exc:
                raise StoreUnavailable("sqlite", f"{self.path}: {exc}") from None
            return
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=timeout)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA + JOBS_SCHEMA)
            self._reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=timeout)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable("sqlite", f"{self.path}: {exc}") from None

    # ------------------------------------------------------------------ writes
    def commit(self, batch: WriteBatch) -> list[int]:
        if not batch:
            return []
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreUnavailable("sqlite", str(exc)) from None
            try:
                seqs = self._apply(db, batch)
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StoreUnavailable("sqlite", str(exc)) from None
                raise
            try:
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise StoreUnavailable("sqlite", str(exc)) from None
            return seqs

    def _apply(self, db: sqlite3.Connection, batch: WriteBatch) -> list[int]:
        for op in ([] if batch.op is None else [batch.op]) + [o for o, _, _ in batch.more_ops]:
            row = db.execute("SELECT result, seqs FROM ops WHERE op=?", (op,)).fetchone()
            if row is not None:
                raise AlreadyApplied(OpRecord(bytes(row[0]), list(msgpack.unpackb(row[1]))), op)
        for slot in batch.slots:
            row = db.execute(
                "SELECT seq FROM slots WHERE scope_key=? AND mkey=?", (slot.scope_key, slot.key)
            ).fetchone()
            current = row[0] if row else 0
            if current != slot.expected_seq:
                raise VersionConflict(f"{slot.key}@{slot.scope_key}", slot.expected_seq, current)
            db.execute(
                "INSERT INTO slots(scope_key, mkey, head, seq) VALUES (?,?,?,?) "
                "ON CONFLICT(scope_key, mkey) DO UPDATE SET head=excluded.head, seq=excluded.seq",
                (slot.scope_key, slot.key, slot.head_id, slot.expected_seq + slot.count),
            )
            if slot.evidence is not None:
                db.execute("INSERT OR REPLACE INTO slot_evidence(scope_key, mkey, blob) VALUES (?,?,?)",
                           (slot.scope_key, slot.key, slot.evidence))
        self._insert_puts(db, batch.puts)
        for node, expected in batch.updates:
            cur = db.execute(
                "UPDATE nodes SET version=?, blob=? WHERE id=? AND version=?",
                (node.version, encode_node(node), node.id, expected),
            )
            if cur.rowcount != 1:
                self._raise_for(db, node.id, expected)
        for memory_id, expected_del in batch.deletes:
            if expected_del is None:
                cur = db.execute("DELETE FROM nodes WHERE id=?", (memory_id,))
            else:
                cur = db.execute("DELETE FROM nodes WHERE id=? AND version=?", (memory_id, expected_del))
            if cur.rowcount != 1:
                self._raise_for(db, memory_id, expected_del)
        seqs = self._append_events(db, batch)
        if batch.audit:
            chain_audit(db, batch.audit)
        if batch.op is not None:
            now = time.time()
            db.execute(
                "INSERT INTO ops(op, at, result, seqs) VALUES (?,?,?,?)",
                (batch.op, now, batch.op_result, msgpack.packb(seqs)),
            )
            db.executemany("INSERT INTO ops(op, at, result, seqs) VALUES (?,?,?,?)",
                           [(op, now, answer, msgpack.packb([seqs[i] for i in own]))
                            for op, answer, own in batch.more_ops])  # fmt: skip
            if now - self._pruned > min(60.0, self.op_retention):  # drop records past retention (<= once a min)
                self._pruned = now
                db.execute("DELETE FROM ops WHERE at < ?", (now - self.op_retention,))
        return seqs

    @staticmethod
    def _insert_puts(db: sqlite3.Connection, puts: Sequence[MemoryNode]) -> None:
        """Insert new nodes: one that is stored (or put earlier in the batch) with the
        same record is skipped (a retry), one with another record is a conflict.
        Existing ids are looked up in groups and the new rows inserted in one statement."""
        if not puts:
            return
        blobs = [encode_node(n) for n in puts]
        stored: dict[str, tuple[bytes, int]] = {}
        ids = list(dict.fromkeys(n.id for n in puts))
        for start in range(0, len(ids), _IN_GROUP):
            group = ids[start : start + _IN_GROUP]
            marks = ",".join("?" * len(group))
            for mid, blob, version in db.execute(f"SELECT id, blob, version FROM nodes WHERE id IN ({marks})", group):
                stored[mid] = (bytes(blob), version)
        rows = []
        for node, blob in zip(puts, blobs, strict=True):
            held = stored.get(node.id)
            if held is not None:
                if held[0] != blob:
                    raise VersionConflict(node.id, 0, held[1])
                continue
            stored[node.id] = (blob, node.version)
            rows.append((node.id, node.scope.key, node.key, node.version, node.access_count, node.last_accessed, blob))
        db.executemany(
            "INSERT INTO nodes(id, scope_key, mkey, version, access_count, last_accessed, blob) VALUES (?,?,?,?,?,?,?)",
            rows,
        )

    @staticmethod
    def _append_events(db: sqlite3.Connection, batch: WriteBatch) -> list[int]:
        """Give the batch's events the next sequence numbers of their scopes, in batch
        order (one counter step per scope), and append them; their numbers, in order."""
        counts: dict[str, int] = {}
        for scope_key, _ in batch.events:
            counts[scope_key] = counts.get(scope_key, 0) + 1
        nxt: dict[str, int] = {}
        for scope_key, count in counts.items():
            (last,) = db.execute(
                "INSERT INTO seqs(scope_key, seq) VALUES (?, ?) "
                "ON CONFLICT(scope_key) DO UPDATE SET seq=seq+excluded.seq RETURNING seq",
                (scope_key, count),
            ).fetchone()
            nxt[scope_key] = int(last) - count + 1
        seqs: list[int] = []
        for scope_key, _ in batch.events:
            seqs.append(nxt[scope_key])
            nxt[scope_key] += 1
        db.executemany(
            "INSERT INTO events(scope_key, seq, blob) VALUES (?,?,?)",
            [(k, q, blob) for (k, blob), q in zip(batch.events, seqs, strict=True)],
        )
        keys = batch.event_keys or [None] * len(batch.events)
        db.executemany(
            "INSERT INTO fact_events(scope_key, mkey, seq) VALUES (?,?,?)",
            [(k, key, q) for (k, _), key, q in zip(batch.events, keys, seqs, strict=True) if key is not None],
        )
        return seqs

    def op_record(self, op: str) -> OpRecord | None:
        rows = self._query("SELECT result, seqs FROM ops WHERE op=?", (op,))
        return OpRecord(bytes(rows[0][0]), list(msgpack.unpackb(rows[0][1]))) if rows else None

    def resolve(self, op: str, attempt: str) -> OpRecord | None:
        # a commit runs in this process and has finished when its call returned or raised:
        # no attempt can still be on its way, so the record alone decides
        return self.op_record(op)

    @staticmethod
    def _raise_for(db: sqlite3.Connection, memory_id: str, expected: int | None) -> None:
        row = db.execute("SELECT version FROM nodes WHERE id=?", (memory_id,)).fetchone()
        if row is None:
            raise MemoryNotFound(memory_id)
        raise VersionConflict(memory_id, expected, row[0])

    def touch(self, stats: Mapping[str, tuple[int, float]], *, wait: bool = True) -> bool:
        if not stats:
            return True
        rows = [(count, when, mid) for mid, (count, when) in stats.items()]
        sql = "UPDATE nodes SET access_count=access_count+?, last_accessed=max(last_accessed, ?) WHERE id=?"
        return self._write_if_free(wait, lambda db: db.executemany(sql, rows))  # else kept for later

    # ------------------------------------------------------------------- reads
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return fetch_all(self._rlock, self._reader, sql, params)

    def get(self, memory_id: str) -> MemoryNode | None:
        rows = self._query(f"SELECT {_COLS} FROM nodes WHERE id=?", (memory_id,))
        return _row_to_node(rows[0]) if rows else None

    def get_many(self, ids: Sequence[str]) -> list[MemoryNode | None]:
        found: dict[str, MemoryNode] = {}
        ids = list(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._query(f"SELECT {_COLS}, id FROM nodes WHERE id IN ({marks})", chunk):
                found[row[4]] = _row_to_node(row)
        return [found.get(i) for i in ids]

    def slot(self, scope_key: str, key: str) -> tuple[str | None, int]:
        rows = self._query("SELECT head, seq FROM slots WHERE scope_key=? AND mkey=?", (scope_key, key))
        return (rows[0][0], int(rows[0][1])) if rows else (None, 0)

    def fact_slot(self, scope_key: str, key: str) -> tuple[str | None, int, bytes | None]:
        rows = self._query(
            "SELECT s.head, s.seq, e.blob FROM slots s LEFT JOIN slot_evidence e "
            "ON e.scope_key=s.scope_key AND e.mkey=s.mkey WHERE s.scope_key=? AND s.mkey=?", (scope_key, key))
        if not rows:
            return None, 0, None
        return rows[0][0], int(rows[0][1]), None if rows[0][2] is None else bytes(rows[0][2])

    def all_evidence(self) -> list[tuple[str, str, bytes]]:
        rows = self._query("SELECT scope_key, mkey, blob FROM slot_evidence ORDER BY scope_key, mkey")
        return [(str(r[0]), str(r[1]), bytes(r[2])) for r in rows]

    def read_events(self, scope_key: str, after: int = 0, limit: int = 1000) -> list[tuple[int, bytes]]:
        rows = self._query(
            "SELECT seq, blob FROM events WHERE scope_key=? AND seq>? ORDER BY seq LIMIT ?",
            (scope_key, after, limit),
        )
        return [(int(r[0]), bytes(r[1])) for r in rows]

    def last_seq(self, scope_key: str) -> int:
        rows = self._query("SELECT seq FROM seqs WHERE scope_key=?", (scope_key,))
        return int(rows[0][0]) if rows else 0

    def confirm_reads(self) -> None:
        """Nothing to wait for: a SQLite file has no replica that could take over."""

    def fact_events(self, scope_key: str, key: str) -> list[tuple[int, bytes]]:
        rows = self._query(
            "SELECT e.seq, e.blob FROM fact_events f JOIN events e ON e.scope_key=f.scope_key AND e.seq=f.seq "
            "WHERE f.scope_key=? AND f.mkey=? ORDER BY f.seq",
            (scope_key, key),
        )
        return [(int(r[0]), bytes(r[1])) for r in rows]

    def event_scopes(self) -> list[str]:
        return [str(r[0]) for r in self._query("SELECT scope_key FROM seqs ORDER BY scope_key")]

    def all_slots(self) -> list[tuple[str, str, str, int]]:
        rows = self._query("SELECT scope_key, mkey, head, seq FROM slots ORDER BY scope_key, mkey")
        return [(str(r[0]), str(r[1]), str(r[2]), int(r[3])) for r in rows]

    def iter_all(self, batch_size: int = 1000) -> Iterator[MemoryNode]:
        last = -1
        while True:
            rows = self._query(
                f"SELECT {_COLS}, rowid FROM nodes WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (last, batch_size),
            )
            if not rows:
                return
            for row in rows:
                yield _row_to_node(row)
            last = rows[-1][4]

    def count(self) -> int:
        return int(self._query("SELECT count(*) FROM nodes")[0][0])

    def meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._query("SELECT k, v FROM meta")}

    def set_meta(self, items: Mapping[str, str]) -> None:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(
                    "INSERT INTO meta(k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v=excluded.v",
                    list(items.items()),
                )
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise StoreUnavailable("sqlite", str(exc)) from None

    def clear(self) -> None:
        with self._lock:
            try:
                for table in ("nodes", "slots", "slot_evidence", "seqs", "events", "fact_events", "ops", "audit",
                              "audit_heads", "audit_checkpoints"):
                    self._db.execute(f"DELETE FROM {table}")
            except sqlite3.Error as exc:
                raise StoreUnavailable("sqlite", str(exc)) from None

    def close(self) -> None:
        """Checkpoint the WAL into the main file and close: afterwards the ``.sqlite``
        file alone holds every committed write (no ``-wal`` file is left)."""
        with self._rlock, contextlib.suppress(sqlite3.Error):
            self._reader.close()
        if self.read_only:
            return
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.close()
