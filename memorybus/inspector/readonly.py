"""A data directory opened for reading only: the shards' records and the hubs' state.

Every connection is opened with SQLite's ``mode=ro``: nothing here can write to the
directory (a write would fail with StoreUnavailable), so the inspector may look at a
data directory while a bus holds it. In WAL mode a reader sees the last commit and
never waits for a writer. A directory without ``shard-*/records.sqlite`` is refused
with InvalidRequest naming it.
"""

from __future__ import annotations

import glob
import os
import sqlite3
import threading
from typing import Any

from memorybus.errors import InvalidRequest, StoreUnavailable
from memorybus.storage.sqlite import SqliteStore, fetch_all


def connect_ro(path: str) -> sqlite3.Connection:
    """A read-only connection to the SQLite file ``path`` (StoreUnavailable if it cannot be opened)."""
    try:
        return sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True, isolation_level=None,
                               check_same_thread=False, timeout=5.0)
    except sqlite3.Error as exc:
        raise StoreUnavailable("sqlite", f"{path}: {exc}") from None


class ReadOnlyStore(SqliteStore):
    """A shard's :class:`SqliteStore` whose reads run on one read-only connection and
    whose writes fail (the writer connection is read-only too)."""

    def __init__(self, path: str) -> None:  # no super().__init__: it would create the schema
        self.path = path
        self.op_retention = 0.0
        self._timeout_ms = 5000
        self._pruned = 0.0
        self._lock = threading.RLock()
        self._rlock = threading.Lock()
        self._reader = connect_ro(path)
        self._db = self._reader

    def close(self) -> None:
        with self._rlock:
            self._reader.close()


class ReadOnlyKV:
    """A hub partition's key-value file (``bus-<n>/bus.sqlite``), read only."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = connect_ro(path)

    def scan(self, prefix: str) -> list[tuple[str, bytes]]:
        rows = fetch_all(self._lock, self._db, "SELECT k, v FROM kv WHERE substr(k, 1, ?) = ? ORDER BY k",
                         (len(prefix), prefix))
        return [(str(k), bytes(v)) for k, v in rows]

    def get(self, key: str) -> bytes | None:
        rows = fetch_all(self._lock, self._db, "SELECT v FROM kv WHERE k=?", (key,))
        return bytes(rows[0][0]) if rows else None

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_data_dir(data_dir: str) -> tuple[list[tuple[str, ReadOnlyStore]], list[tuple[str, ReadOnlyKV]]]:
    """``(shard name, store)`` for every shard and ``(hub name, kv)`` for every hub
    partition stored in ``data_dir``, all read-only."""
    if not os.path.isdir(data_dir):
        raise InvalidRequest("--data-dir", f"{data_dir} does not exist (no bus stored there)")
    paths = sorted(glob.glob(os.path.join(data_dir, "shard-*", "records.sqlite")))
    if not paths:
        raise InvalidRequest("--data-dir", f"no shard-*/records.sqlite in {data_dir}")
    stores: list[tuple[str, ReadOnlyStore]] = []
    hubs: list[tuple[str, ReadOnlyKV]] = []
    try:
        for path in paths:
            stores.append((os.path.basename(os.path.dirname(path)), ReadOnlyStore(path)))
        for path in sorted(glob.glob(os.path.join(data_dir, "bus-*", "bus.sqlite"))):
            hubs.append((os.path.basename(os.path.dirname(path)), ReadOnlyKV(path)))
    except BaseException:
        close_all([s for _, s in stores] + [h for _, h in hubs])
        raise
    return stores, hubs


def close_all(things: list[Any]) -> None:
    for thing in things:
        thing.close()
