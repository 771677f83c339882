"""Open a shard's store and vector index from the config (the one place that chooses
the backends; :mod:`memorybus.shard.build` makes the shard over them)."""

from __future__ import annotations

import os
import shutil

from memorybus.config import Config
from memorybus.errors import ConfigError, IndexUnavailable
from memorybus.storage.base import Store
from memorybus.storage.identity import store_file_missing
from memorybus.storage.vectors import EdgeVectorIndex, QdrantClientIndex, VectorIndex


def sqlite_path(config: Config, shard: str) -> str:
    """Where an embedded shard keeps its records."""
    return os.path.join(config.shard_dir(shard), "records.sqlite")


def open_store(config: Config, shard: str) -> Store:
    """The shard's record store. Redis: ConfigError unless the server fsyncs every
    write (``Config.redis_require_fsync``); the driver opens shard 0's store this way
    before any actor starts (``connect``), so a non-durable server fails there."""
    if config.backend == "redis":
        from memorybus.storage.redis import RedisStore

        if config.redis_url is None:
            raise ConfigError("redis_url", "is required with backend 'redis'")
        from memorybus.storage.redis_client import RedisTLS

        return RedisStore(config.redis_url, config.namespace, shard, socket_timeout=config.store_timeout,
                          op_retention=config.op_retention_seconds, require_fsync=config.redis_require_fsync,
                          tls=RedisTLS.from_config(config), wait_replicas=config.redis_replicas_to_wait(),
                          wait_timeout=config.redis_wait_timeout)
    from memorybus.storage.sqlite import SqliteStore

    path = sqlite_path(config, shard)
    store_file_missing(config, shard, path)  # before opening: opening creates the file
    return SqliteStore(path, op_retention=config.op_retention_seconds, timeout=config.store_timeout)


def local_index_dir(config: Config, shard: str) -> str | None:
    """The directory of a shard's index on this node's disk (None: a Qdrant server)."""
    if config.vector_backend == "qdrant":
        return None if config.qdrant_url else os.path.join(config.shard_dir(shard), "qdrant-local")
    return os.path.join(config.shard_dir(shard), "vectors")


def _open_index_once(config: Config, shard: str) -> VectorIndex:
    if config.vector_backend == "qdrant":
        collection = f"{config.namespace}_{shard}".replace("-", "_")
        if config.qdrant_url:
            return QdrantClientIndex(collection, config.embedding_dim, url=config.qdrant_url)
        return QdrantClientIndex(collection, config.embedding_dim, path=local_index_dir(config, shard))
    return EdgeVectorIndex(os.path.join(config.shard_dir(shard), "vectors"), config.embedding_dim)


def open_index(config: Config, shard: str) -> VectorIndex:
    """Open the shard's vector index; a local index directory that cannot be opened
    (corrupt, truncated) is derived data: it is removed and created empty, and the
    shard rebuilds it from the store."""
    try:
        return _open_index_once(config, shard)
    except IndexUnavailable:
        path = local_index_dir(config, shard)
        if path is None:
            raise
        shutil.rmtree(path, ignore_errors=True)
        return _open_index_once(config, shard)
