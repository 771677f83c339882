"""ShardActor: a thin Ray wrapper over :class:`memorybus.shard.Shard`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from memorybus.config import Config
from memorybus.model import MemoryKind, MemoryNode, MemoryStatus
from memorybus.retrieval import RecallHit
from memorybus.scopes import Context
from memorybus.storage.factory import open_shard


class ShardActor:
    """Owns the scopes routed to shard ``name``. Calls run one at a time."""

    def __init__(self, config: Config, name: str) -> None:
        self.name = name
        self._shard = open_shard(config, name)

    def put_many(
        self,
        context: Context,
        nodes: Sequence[MemoryNode],
        vectors: np.ndarray | None = None,
        rows: Sequence[int] | None = None,
    ) -> list[MemoryNode]:
        return self._shard.put_many(context, nodes, vectors, rows)

    def update(
        self,
        context: Context,
        memory_id: str,
        expected_version: int,
        changes: dict[str, Any],
        vector: np.ndarray | None = None,
    ) -> MemoryNode:
        if vector is not None:
            vector = np.asarray(vector)
            vector = vector[0] if vector.ndim == 2 else vector
        return self._shard.update(context, memory_id, expected_version, changes, vector)

    def delete(self, context: Context, memory_id: str, expected_version: int | None = None) -> bool:
        return self._shard.delete(context, memory_id, expected_version)

    def get(self, context: Context, memory_id: str, with_embedding: bool = False) -> MemoryNode:
        return self._shard.get(context, memory_id, with_embedding=with_embedding)

    def search(
        self,
        context: Context,
        vector: np.ndarray,
        k: int,
        kinds: Sequence[MemoryKind] | None = None,
        statuses: Sequence[MemoryStatus] | None = None,
    ) -> list[RecallHit]:
        return self._shard.search(context, vector, k, kinds=kinds, statuses=statuses)

    def flush(self) -> int:
        return self._shard.flush()

    def count(self) -> int:
        return self._shard.count()

    def pid(self) -> int:
        return os.getpid()

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())
