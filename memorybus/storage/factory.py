"""Build a shard's store and vector index from the config (the one place that chooses)."""

from __future__ import annotations

import os
from collections.abc import Callable

from memorybus.clock import Clock
from memorybus.config import Config, resolve_hook
from memorybus.events import Event
from memorybus.scopes import Router
from memorybus.shard import Shard
from memorybus.storage.base import Store
from memorybus.storage.vectors import EdgeVectorIndex, QdrantClientIndex, VectorIndex


def open_store(config: Config, shard: str) -> Store:
    if config.backend == "redis":
        from memorybus.storage.redis import RedisStore

        assert config.redis_url is not None
        return RedisStore(config.redis_url, config.namespace, shard, socket_timeout=config.store_timeout,
                          op_retention=config.op_retention_seconds)
    from memorybus.storage.sqlite import SqliteStore

    path = os.path.join(config.shard_dir(shard), "records.sqlite")
    return SqliteStore(path, op_retention=config.op_retention_seconds)


def open_index(config: Config, shard: str) -> VectorIndex:
    if config.vector_backend == "qdrant":
        collection = f"{config.namespace}_{shard}".replace("-", "_")
        if config.qdrant_url:
            return QdrantClientIndex(collection, config.embedding_dim, url=config.qdrant_url)
        path = os.path.join(config.shard_dir(shard), "qdrant-local")
        return QdrantClientIndex(collection, config.embedding_dim, path=path)
    return EdgeVectorIndex(os.path.join(config.shard_dir(shard), "vectors"), config.embedding_dim)


def open_shard(
    config: Config,
    shard: str,
    *,
    clock: Clock | None = None,
    on_events: Callable[[list[Event]], None] | None = None,
) -> Shard:
    """Open the store, open the index, and rebuild the index from the store."""
    store = open_store(config, shard)
    index = open_index(config, shard)
    router, me = Router(config.num_shards), int(shard.rsplit("-", 1)[1])
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
