"""SqliteStore: the embedded default, one SQLite file per shard in WAL mode.

Durability: ``synchronous=FULL`` in WAL mode, so a committed transaction is on
disk when :meth:`SqliteStore.commit` returns. Compare-and-set is a conditional
``UPDATE ... WHERE version = ?`` inside one ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from memorybus.codec import decode_node, encode_node
from memorybus.errors import MemoryNotFound, StoreUnavailable, VersionConflict
from memorybus.model import MemoryNode
from memorybus.storage.base import WriteBatch

_SCHEMA = """
CREATE TABLE IF NOT EXISTS nodes (
    id TEXT PRIMARY KEY,
    scope_key TEXT NOT NULL,
    mkey TEXT,
    version INTEGER NOT NULL,
    access_count INTEGER NOT NULL,
    last_accessed REAL NOT NULL,
    blob BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS nodes_scope ON nodes(scope_key);
CREATE INDEX IF NOT EXISTS nodes_key ON nodes(scope_key, mkey) WHERE mkey IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
"""
_COLS = "blob, version, access_count, last_accessed"


def _row_to_node(row: tuple[Any, ...]) -> MemoryNode:
    node = decode_node(row[0])
    node.version, node.access_count, node.last_accessed = row[1], row[2], row[3]
    return node


class SqliteStore:
    """Records of one shard in one SQLite file."""

    backend = "sqlite"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.RLock()
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable("sqlite", f"{self.path}: {exc}") from None

    # ------------------------------------------------------------------ writes
    def commit(self, batch: WriteBatch) -> None:
        if not batch:
            return
        with self._lock:
            db = self._db
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreUnavailable("sqlite", str(exc)) from None
            try:
                self._apply(db, batch)
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

    def _apply(self, db: sqlite3.Connection, batch: WriteBatch) -> None:
        for node in batch.puts:
            blob = encode_node(node)
            row = db.execute("SELECT blob, version FROM nodes WHERE id=?", (node.id,)).fetchone()
            if row is not None:
                if bytes(row[0]) != blob:
                    raise VersionConflict(node.id, 0, row[1])
                continue
            db.execute(
                "INSERT INTO nodes(id, scope_key, mkey, version, access_count, last_accessed, blob)"
                " VALUES (?,?,?,?,?,?,?)",
                (
                    node.id,
                    node.scope.key,
                    node.key,
                    node.version,
                    node.access_count,
                    node.last_accessed,
                    blob,
                ),
            )
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

    @staticmethod
    def _raise_for(db: sqlite3.Connection, memory_id: str, expected: int | None) -> None:
        row = db.execute("SELECT version FROM nodes WHERE id=?", (memory_id,)).fetchone()
        if row is None:
            raise MemoryNotFound(memory_id)
        raise VersionConflict(memory_id, expected, row[0])

    def touch(self, stats: Mapping[str, tuple[int, float]]) -> None:
        if not stats:
            return
        rows = [(count, when, mid) for mid, (count, when) in stats.items()]
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(
                    "UPDATE nodes SET access_count=access_count+?, "
                    "last_accessed=max(last_accessed, ?) WHERE id=?",
                    rows,
                )
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
                raise StoreUnavailable("sqlite", str(exc)) from None

    # ------------------------------------------------------------------- reads
    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreUnavailable("sqlite", str(exc)) from None

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

    def list_by_scope(self, scope_key: str) -> list[MemoryNode]:
        rows = self._query(f"SELECT {_COLS} FROM nodes WHERE scope_key=?", (scope_key,))
        return [_row_to_node(r) for r in rows]

    def find_by_key(self, scope_key: str, key: str) -> list[MemoryNode]:
        rows = self._query(f"SELECT {_COLS} FROM nodes WHERE scope_key=? AND mkey=?", (scope_key, key))
        return [_row_to_node(r) for r in rows]

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

    def clear(self) -> None:
        with self._lock:
            try:
                self._db.execute("DELETE FROM nodes")
            except sqlite3.Error as exc:
                raise StoreUnavailable("sqlite", str(exc)) from None

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()
