"""The names of the bus's Ray actors, in one place (every lookup and creation uses these).

Each name lives in the bus's Ray namespace (``Config.namespace``) and carries it
too, so two buses never share an actor.
"""

from __future__ import annotations

from memorybus.config import Config
from memorybus.scopes import shard_name


def shard_actor_name(config: Config, index: int) -> str:
    return f"{config.namespace}:{shard_name(index)}"


def embedder_actor_name(config: Config, index: int) -> str:
    return f"{config.namespace}:embedder-{index}"


def hub_actor_name(config: Config, partition: int) -> str:
    """The pub/sub hub actor of ``partition`` (see :mod:`memorybus.bus`)."""
    return f"{config.namespace}:hub-{partition}"


def maintenance_name(config: Config, kind: str) -> str:
    """The scheduled ``"decay"`` or ``"consolidation"`` actor."""
    return f"{config.namespace}:{kind}"
