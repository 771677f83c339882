"""Build a shard's store and vector index from the config (the one place that chooses)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

from memorybus.clock import Clock
from memorybus.config import Config, resolve_hook
from memorybus.errors import ConfigError, IndexUnavailable
from memorybus.events import Event
from memorybus.scopes import Router
from memorybus.shard import Shard
from memorybus.storage.base import Store
from memorybus.storage.identity import check_identity, store_file_missing
from memorybus.storage.vectors import EdgeVectorIndex, QdrantClientIndex, VectorIndex


def sqlite_path(config: Config, shard: str) -> str:
    """Where an embedded shard keeps its records."""
    return os.path.join(config.shard_dir(shard), "records.sqlite")


def open_store(config: Config, shard: str) -> Store:
    if config.backend == "redis":
        from memorybus.storage.redis import RedisStore

        if config.redis_url is None:
            raise ConfigError("redis_url", "is required with backend 'redis'")
        return RedisStore(config.redis_url, config.namespace, shard, socket_timeout=config.store_timeout,
                          op_retention=config.op_retention_seconds)
    from memorybus.storage.sqlite import SqliteStore

    path = sqlite_path(config, shard)
    store_file_missing(config, shard, path)  # before opening: opening creates the file
    return SqliteStore(path, op_retention=config.op_retention_seconds, timeout=config.store_timeout)


def _local_index_dir(config: Config, shard: str) -> str | None:
    """The directory of a shard's index on this node's disk (None: a Qdrant server)."""
    if config.vector_backend == "qdrant":
        return None if config.qdrant_url else os.path.join(config.shard_dir(shard), "qdrant-local")
    return os.path.join(config.shard_dir(shard), "vectors")


def _open_index_once(config: Config, shard: str) -> VectorIndex:
    if config.vector_backend == "qdrant":
        collection = f"{config.namespace}_{shard}".replace("-", "_")
        if config.qdrant_url:
            return QdrantClientIndex(collection, config.embedding_dim, url=config.qdrant_url)
        return QdrantClientIndex(collection, config.embedding_dim, path=_local_index_dir(config, shard))
    return EdgeVectorIndex(os.path.join(config.shard_dir(shard), "vectors"), config.embedding_dim)


def open_index(config: Config, shard: str) -> VectorIndex:
    """Open the shard's vector index; a local index directory that cannot be opened
    (corrupt, truncated) is derived data: it is removed and created empty, and the
    shard rebuilds it from the store."""
    try:
        return _open_index_once(config, shard)
    except IndexUnavailable:
        path = _local_index_dir(config, shard)
        if path is None:
            raise
        shutil.rmtree(path, ignore_errors=True)
        return _open_index_once(config, shard)


def open_shard(
    config: Config,
    shard: str,
    *,
    clock: Clock | None = None,
    on_events: Callable[[list[Event]], None] | None = None,
) -> Shard:
    """Open the store, check it is this shard's (see :mod:`.identity`), open the
    index, and rebuild the index from the store.

    An index that fails while it is rebuilt is removed and rebuilt once more from
    scratch; a store that fails raises StoreUnavailable (the caller retries later)."""
    store = open_store(config, shard)
    try:
        check_identity(config, shard, store)
        try:
            return _build(config, shard, store, open_index(config, shard), clock, on_events)
        except IndexUnavailable:
            path = _local_index_dir(config, shard)
            if path is None:
                raise
            shutil.rmtree(path, ignore_errors=True)
            return _build(config, shard, store, open_index(config, shard), clock, on_events)
    except BaseException:
        store.close()
        raise


def _build(
    config: Config,
    shard: str,
    store: Store,
    index: VectorIndex,
    clock: Clock | None,
    on_events: Callable[[list[Event]], None] | None,
) -> Shard:
    router, me = Router(config.num_shards), int(shard.rsplit("-", 1)[1])
    try:
        return Shard(
            shard,
            store,
            index,
            dim=config.embedding_dim,
            clock=clock,
            ranking=config.ranking,
            max_content_chars=config.max_content_chars,
            max_tags=config.max_tags,
            max_structured_bytes=config.max_structured_bytes,
            touch_flush_seconds=config.touch_flush_seconds,
            policy=config.bus,
            judge=resolve_hook(config.bus.judge, "bus.judge"),
            graph=config.graph,
            on_events=on_events,
            owns=lambda scope_key: router.shard_for(scope_key) == me,
        )
    except BaseException:
        index.close()
        raise
