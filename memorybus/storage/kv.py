"""A small durable key-value store for the pub/sub hub's state (subscriptions, cursors).

SqliteKV (embedded) and RedisKV (shared) behave alike; values are bytes. Both
satisfy :class:`memorybus.bus.ports.KeyValue`, the protocol the hub defines.
Redis is imported only when a RedisKV is opened, so embedded use needs no redis.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from typing import TYPE_CHECKING, Any, cast
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
    """The state in one Redis hash named ``prefix`` (one HSET per write: atomic).

    With ``wait_replicas`` > 0 (:meth:`for_config`: ``Config.redis_wait_replicas``, the
    policy the shards' commits follow) a write is acknowledged only after ``WAIT`` says
    that many replicas have it, sent on the write's own connection (to the slot's
    primary on a Redis Cluster); fewer within ``wait_timeout`` seconds raise
    StoreUnavailable: the write is on the master and may be lost in a failover, so the
    caller must not count it as done (every write here is an idempotent HSET or HDEL: a
    retry is safe)."""

    def __init__(self, url: str, prefix: str, *, tls: RedisTLS | None = None, wait_replicas: int = 0,
                 wait_timeout: float = 1.0, socket_timeout: float = 5.0) -> None:
        """ConfigError when the URL does not parse or a TLS file is missing;
        StoreUnavailable when the server cannot be reached, refuses the credentials or
        the TLS handshake (messages name the URL without its password)."""
        import redis  # here, not at import: embedded use needs no redis

        from memorybus.config.urls import redact_url
        from memorybus.storage.redis_client import describe, open_redis

        self.prefix = prefix
        self.wait_replicas, self._wait_ms = wait_replicas, max(1, int(wait_timeout * 1000))
        self._errors: type[Exception] = redis.exceptions.RedisError
        self._r = open_redis(url, tls=tls, socket_timeout=socket_timeout)
        try:
            self._r.ping()
        except self._errors as exc:
            self._r.close()
            raise StoreUnavailable("redis", describe(exc, redact_url(url))) from None

    @classmethod
    def for_config(cls, config: Any, prefix: str) -> RedisKV:
        """The hash ``prefix`` on the bus's Redis, with its TLS files and WAIT policy."""
        from memorybus.storage.redis_client import RedisTLS

        return cls(config.redis_url, prefix, tls=RedisTLS.from_config(config),
                   wait_replicas=config.redis_replicas_to_wait(), wait_timeout=config.redis_wait_timeout,
                   socket_timeout=max(5.0, config.store_timeout))

    def _do(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._errors as exc:
            raise StoreUnavailable("redis", str(exc)) from None

    def _write(self, fill: Any) -> None:
        """Run the write ``fill`` sends to the client it is given; with ``wait_replicas``,
        in one pipeline with ``WAIT`` on the connection that wrote, and StoreUnavailable
        unless enough replicas confirm."""
        if not self.wait_replicas:
            self._do(fill, self._r)
            return
        from memorybus.storage.redis_cluster import is_cluster, on_owner
        from memorybus.storage.redis_durability import unconfirmed

        def replicated(pipe: Any) -> None:
            fill(pipe)
            pipe.execute_command("WAIT", self.wait_replicas, self._wait_ms)

        def run() -> list[Any]:
            if is_cluster(self._r):
                return on_owner(cast("Any", self._r), self.prefix, replicated)
            pipe = self._r.pipeline(transaction=False)
            replicated(pipe)
            return list(pipe.execute())

        acked = int(self._do(run)[-1])
        if acked < self.wait_replicas:
            raise unconfirmed(acked, self.wait_replicas, self._wait_ms)

    def get(self, key: str) -> bytes | None:
        value = self._do(self._r.hget, self.prefix, key)
        return bytes(value) if value is not None else None

    def put_many(self, items: dict[str, bytes]) -> None:
        if items:
            self._write(lambda pipe: pipe.hset(self.prefix, mapping=dict(items)))  # one HSET: atomic

    def delete(self, key: str) -> None:
        self._write(lambda pipe: pipe.hdel(self.prefix, key))

    def scan(self, prefix: str) -> list[tuple[str, bytes]]:
        items = self._do(self._r.hgetall, self.prefix)
        out = [(k.decode(), bytes(v)) for k, v in items.items() if k.decode().startswith(prefix)]
        return sorted(out)

    def close(self) -> None:
        self._r.close()
