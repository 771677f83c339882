"""A small durable key-value store for the pub/sub hub's state (subscriptions, cursors).

SqliteKV (embedded) and RedisKV (shared) behave alike; values are bytes. Both
satisfy :class:`memorybus.pubsub.ports.KeyValue`, the protocol the hub defines.
Redis is imported only when a RedisKV is opened, so embedded use needs no redis.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from memorybus.errors import StoreUnavailable
from memorybus.storage.sqlite import fetch_all

if TYPE_CHECKING:
    from memorybus.storage.redis_client import RedisTLS


class SqliteKV:
    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        """``read_only``: open an existing file for reading only (nothing created or
        written, no checkpoint on close; a write raises StoreUnavailable)."""
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self.read_only = read_only
        if read_only:
            try:
                uri = f"file:{quote(os.path.abspath(self.path))}?mode=ro"
                self._db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
                self._db.execute("SELECT 1 FROM kv LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                raise StoreUnavailable("sqlite", f"{self.path}: {exc}") from None
            return
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB NOT NULL)")
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable("sqlite", f"{self.path}: {exc}") from None

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return fetch_all(self._lock, self._db, sql, params)

    def get(self, key: str) -> bytes | None:
        rows = self._run("SELECT v FROM kv WHERE k=?", (key,))
        return bytes(rows[0][0]) if rows else None

    def put_many(self, items: dict[str, bytes]) -> None:
        if not items:
            return
        with self._lock:
            try:
                self._db.execute("BEGIN")
                try:
                    self._db.executemany(
                        "INSERT INTO kv(k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v=excluded.v",
                        list(items.items()),
                    )
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StoreUnavailable("sqlite", str(exc)) from None

    def delete(self, key: str) -> None:
        self._run("DELETE FROM kv WHERE k=?", (key,))

    def scan(self, prefix: str) -> list[tuple[str, bytes]]:
        rows = self._run("SELECT k, v FROM kv WHERE substr(k, 1, ?) = ? ORDER BY k", (len(prefix), prefix))
        return [(str(k), bytes(v)) for k, v in rows]

    def close(self) -> None:
        """Checkpoint the WAL into the main file, then close."""
        with self._lock, contextlib.suppress(sqlite3.Error):
            if not self.read_only:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.close()


class RedisKV:
    """The state in one Redis hash named ``prefix`` (one HSET per write: atomic)."""

    def __init__(self, url: str, prefix: str, *, tls: RedisTLS | None = None) -> None:
        """ConfigError when the URL does not parse or a TLS file is missing;
        StoreUnavailable when the server cannot be reached, refuses the credentials or
        the TLS handshake (messages name the URL without its password)."""
        import redis  # here, not at import: embedded use needs no redis

        from memorybus.config.urls import redact_url
        from memorybus.storage.redis_client import describe, open_redis

        self.prefix = prefix
        self._errors: type[Exception] = redis.exceptions.RedisError
        self._r = open_redis(url, tls=tls, socket_timeout=5.0)
        try:
            self._r.ping()
        except self._errors as exc:
            self._r.close()
            raise StoreUnavailable("redis", describe(exc, redact_url(url))) from None

    def _do(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._errors as exc:
            raise StoreUnavailable("redis", str(exc)) from None

    def get(self, key: str) -> bytes | None:
        value = self._do(self._r.hget, self.prefix, key)
        return bytes(value) if value is not None else None

    def put_many(self, items: dict[str, bytes]) -> None:
        if items:
            self._do(self._r.hset, self.prefix, None, None, dict(items))  # one HSET: atomic

    def delete(self, key: str) -> None:
        self._do(self._r.hdel, self.prefix, key)

    def scan(self, prefix: str) -> list[tuple[str, bytes]]:
        items = self._do(self._r.hgetall, self.prefix)
        out = [(k.decode(), bytes(v)) for k, v in items.items() if k.decode().startswith(prefix)]
        return sorted(out)

    def close(self) -> None:
        self._r.close()
