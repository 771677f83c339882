"""The names of the bus's Ray actors, in one place (every lookup and creation uses these).

Each name lives in the bus's Ray namespace (``Config.namespace``) and carries it
too, so two buses never share an actor; the one exception is a shared embedder pool
(``Config.embedder_pool``), whose replicas live in :data:`POOL_NAMESPACE`.
"""

from __future__ import annotations

import hashlib

from memorybus.config import Config
from memorybus.scopes import shard_name


def shard_actor_name(config: Config, index: int) -> str:
    return f"{config.namespace}:{shard_name(index)}"


#: the Ray namespace of shared embedder pools (``Config.embedder_pool``)
POOL_NAMESPACE = "memorybus-embedders"


def embedder_namespace(config: Config) -> str:
    """Where ``config``'s embedder replicas live: the bus's namespace, or the pools'."""
    return POOL_NAMESPACE if config.embedder_pool else config.namespace


def embedder_actor_name(config: Config, index: int) -> str:
    """A replica of the bus's own embedder, or of its pool: a pool's names carry a
    digest of the model's fingerprint, so buses of two models never share vectors."""
    if config.embedder_pool:
        digest = hashlib.sha256(config.fingerprint().encode()).hexdigest()[:12]
        return f"pool:{config.embedder_pool}:{digest}:embedder-{index}"
    return f"{config.namespace}:embedder-{index}"


def hub_actor_name(config: Config, partition: int) -> str:
    """The pub/sub hub actor of ``partition`` (see :mod:`memorybus.bus`)."""
    return f"{config.namespace}:hub-{partition}"


def maintenance_name(config: Config, kind: str) -> str:
    """The scheduled ``"decay"`` or ``"consolidation"`` actor."""
    return f"{config.namespace}:{kind}"
