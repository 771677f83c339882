"""EmbedderActor: loads the model once and batches every caller's requests."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from memorybus.config import Config
from memorybus.embedding import BatchingEmbedder, Embedder


class EmbedderActor:
    """An async actor: concurrent ``encode`` calls are merged into model batches.

    Torch runs with one thread per CPU the actor reserves, so replicas on a
    2-core machine do not oversubscribe it.
    """

    def __init__(self, config: Config) -> None:
        threads = max(1, int(config.embedder_num_cpus))
        self._embedder = Embedder(
            config.resolved_model_path(),
            threads=threads,
            batch_size=config.embed_batch_size,
            cache_size=config.embed_cache_size,
        )
        self._batching = BatchingEmbedder(self._embedder, max_batch=config.embed_batch_size)

    async def encode(self, texts: Sequence[str]) -> np.ndarray:
        return await self._batching.encode(texts)

    async def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [self._embedder.tokenizer_count(t) for t in texts]

    async def dim(self) -> int:
        return self._embedder.dim

    async def stats(self) -> dict[str, int]:
        return {
            "encoded": self._embedder.encoded,
            "cache_hits": self._embedder.cache_hits,
            "batches": self._batching.batches,
        }

    async def pid(self) -> int:
        return os.getpid()
