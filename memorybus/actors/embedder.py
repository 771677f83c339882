"""EmbedderActor: loads the model once and batches every caller's requests; the pool
of replicas the actors that store memories (shards, consolidation) encode on."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import ray

from memorybus.actors.names import embedder_actor_name, embedder_namespace
from memorybus.actors.runtime import unwrap
from memorybus.config import Config
from memorybus.encoder.embedding import BatchingEmbedder, Embedder
from memorybus.errors import ActorUnavailable, ConfigError


class EmbedderActor:
    """An async actor: concurrent ``encode`` calls are merged into model batches.

    Torch runs with one thread per CPU the actor reserves, so replicas on a
    2-core machine do not oversubscribe it. With ``Config.embedder_num_gpus`` the
    model runs on the GPU Ray assigned (Ray sets ``CUDA_VISIBLE_DEVICES``, so it is
    ``cuda``), in batches of ``embed_gpu_batch_size``.
    """

    def __init__(self, config: Config) -> None:
        threads = max(1, int(config.embedder_num_cpus))
        gpu = config.embedder_num_gpus > 0
        batch = config.embed_gpu_batch_size if gpu else config.embed_batch_size
        self._embedder = Embedder(
            config.resolved_model_path(),
            threads=threads,
            batch_size=batch,
            cache_size=config.embed_cache_size,
            device="cuda" if gpu else "cpu",
        )
        if self._embedder.dim != config.vector_dim():
            raise ConfigError("embedding_dim", f"model {config.model_label()!r} makes vectors of dimension "
                                               f"{self._embedder.dim}, not {config.vector_dim()}")
        self._batching = BatchingEmbedder(self._embedder, max_batch=batch)

    async def encode(self, texts: Sequence[str]) -> np.ndarray:
        return await self._batching.encode(texts)

    async def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [self._embedder.tokenizer_count(t) for t in texts]

    async def device(self) -> str:
        """Where the model runs: ``"cpu"`` or the torch device of a GPU (``"cuda:0"``)."""
        return self._embedder.device

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


def spread(items: list[str], replicas: int) -> list[list[str]]:
    """``items`` in at most ``replicas`` contiguous, non-empty shares of near-equal size."""
    per = -(-len(items) // max(1, replicas))
    return [items[i : i + per] for i in range(0, len(items), per)] if items else []


class EmbedderPool:
    """The bus's embedder replicas, as an actor that stores memories uses them: a
    call's texts go out in one contiguous share per replica (:func:`spread`), in
    parallel, the first share to the next replica in turn. Handles are found by
    name on first use, and again after a call failed (a replaced replica).

    Errors: the embedder's own error as it raised it, ActorUnavailable naming a
    replica that is not running, OperationTimeout past ``timeout``."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._handles: list[Any] | None = None
        self._turn = 0

    def _pool(self) -> list[Any]:
        if self._handles is None:
            names = [embedder_actor_name(self.config, i) for i in range(self.config.embedder_replicas)]
            try:
                self._handles = [ray.get_actor(n, namespace=embedder_namespace(self.config)) for n in names]
            except ValueError as exc:
                raise ActorUnavailable(names[0], f"an embedder is not running: {exc}") from None
        return self._handles

    def _calls(self, texts: Sequence[str]) -> list[Any]:
        pool = self._pool()
        self._turn = (self._turn + 1) % len(pool)
        shares = spread(list(texts), len(pool))
        return [pool[(self._turn + i) % len(pool)].encode.remote(s) for i, s in enumerate(shares)]

    def encode(self, texts: Sequence[str], timeout: float | None) -> np.ndarray:
        """The vectors of ``texts`` (at least one; one row each), waiting in this thread."""
        return self.wait(self.submit(texts), timeout)

    def submit(self, texts: Sequence[str]) -> list[Any]:
        """Ask for the vectors of ``texts`` (at least one) without waiting (:meth:`wait` for
        them). A replica's batching queue serves the oldest request it holds first; Ray
        starts an async actor's calls in about the order they were submitted but does not
        promise it, so submitting in order makes in-order answers likely, not certain.
        Either way each request's rows are its own texts' vectors."""
        try:
            return self._calls(texts)
        except ray.exceptions.RayError as exc:
            self._handles = None
            raise unwrap(exc) from None

    def wait(self, calls: list[Any], timeout: float | None) -> np.ndarray:
        """The vectors :meth:`submit` asked for, one row per text, in the texts' order."""
        try:
            parts = ray.get(calls, timeout=timeout)
        except ray.exceptions.RayError as exc:
            self._handles = None
            raise unwrap(exc) from None
        return np.concatenate([np.asarray(p, dtype=np.float32) for p in parts])
