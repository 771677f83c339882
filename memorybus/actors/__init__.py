"""The Ray layer: the only package that imports ray.

Plain classes hold the logic; this package turns them into actors with
``ray.remote(**options)(Class)`` and finds or creates them by name.

The actor classes are imported when first asked for (module ``__getattr__``): a Ray
worker that runs a hub, an embedder or a maintenance actor imports its class's module,
and with it this package; importing every actor class here made each of them load the
shard's whole stack (indexes, graph, SQLite and Qdrant Edge code: about 0.3 s of CPU
a process on a 2-core machine) for nothing.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ray

from memorybus.actors.names import (
    POOL_NAMESPACE,
    embedder_actor_name,
    embedder_namespace,
    hub_actor_name,
    maintenance_name,
    shard_actor_name,
)
from memorybus.actors.startup import model_env_options
from memorybus.config import Config
from memorybus.errors import ConfigError
from memorybus.scopes import shard_name

if TYPE_CHECKING:
    from memorybus.actors.embedder import EmbedderActor
    from memorybus.actors.hub import HubActor
    from memorybus.actors.maintenance import ConsolidationActor, DecayActor
    from memorybus.actors.shard import ShardActor

#: the actor classes, by name: the module each is imported from when first asked for
_CLASSES = {
    "EmbedderActor": "memorybus.actors.embedder",
    "HubActor": "memorybus.actors.hub",
    "ConsolidationActor": "memorybus.actors.maintenance",
    "DecayActor": "memorybus.actors.maintenance",
    "ShardActor": "memorybus.actors.shard",
}


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        return getattr(importlib.import_module(_CLASSES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _options(
    config: Config, name: str, num_cpus: float, resources: tuple[tuple[str, float], ...], **extra: Any
) -> dict[str, Any]:
    """Options every memoryhub actor shares: named in the bus's namespace, found
    again if it exists, restarted when it dies, detached if the config says so."""
    return {
        "name": name,
        "namespace": config.namespace,
        "get_if_exists": True,
        "num_cpus": num_cpus,
        "resources": dict(resources),
        "max_restarts": -1,
        "max_task_retries": -1,
        **({"lifetime": "detached"} if config.detached else {}),
        **extra,
    }


def _placement(config: Config) -> dict[str, Any]:
    """Config.placement as Ray's scheduling strategy ("spread": SPREAD; "ray": Ray's default)."""
    return {"scheduling_strategy": "SPREAD"} if config.placement == "spread" else {}


def shard_options(config: Config, index: int) -> dict[str, Any]:
    return _options(config, shard_actor_name(config, index), config.shard_num_cpus, config.shard_resources,
                    **model_env_options(), **_placement(config))


def embedder_options(config: Config, index: int) -> dict[str, Any]:
    gpus = {"num_gpus": config.embedder_num_gpus} if config.embedder_num_gpus > 0 else {}
    opts = _options(config, embedder_actor_name(config, index), config.embedder_num_cpus, config.embedder_resources,
                    max_concurrency=1000, **gpus, **model_env_options(), **_placement(config))
    if config.embedder_pool:  # shared: in the pools' namespace, outliving the bus that started it
        opts.update(namespace=POOL_NAMESPACE, lifetime="detached")
    return opts


def hub_options(config: Config, partition: int) -> dict[str, Any]:
    return _options(config, hub_actor_name(config, partition), config.shard_num_cpus, config.shard_resources,
                    max_concurrency=1000, **_placement(config))


def create_hub(config: Config, partition: int) -> Any:
    from memorybus.actors.hub import HubActor

    return ray.remote(HubActor).options(**hub_options(config, partition)).remote(config, partition)


def create_maintenance(config: Config, kind: str, *args: Any) -> Any:
    from memorybus.actors.maintenance import ConsolidationActor, DecayActor

    cls = DecayActor if kind == "decay" else ConsolidationActor
    # a maintenance run is not retried blindly: it is idempotent, the caller reruns it
    opts = _options(config, maintenance_name(config, kind), config.shard_num_cpus, config.shard_resources,
                    max_task_retries=0, max_concurrency=16)
    return ray.remote(cls).options(**opts).remote(config, *args)


#: threads of a shard's writes that embed: enough for a few callers' windows of
#: in-flight ingest calls (see memorybus.client.memories) to embed while one commits
INGEST_THREADS = 32


def create_shard(config: Config, index: int) -> Any:
    # reads get a thread of their own: they never queue behind a write; writes that
    # embed wait for the embedder on threads of theirs, a caller's next ones beside them
    # (see ShardActor); a vector index build waits minutes for its process on its own
    from memorybus.actors.shard import ShardActor

    groups: dict[str, Any] = {"concurrency_groups": {"reads": 1, "ingest": INGEST_THREADS, "builds": 1}}
    actor = ray.remote(**groups)(ShardActor)
    return actor.options(**shard_options(config, index)).remote(config, shard_name(index))


def create_embedder(config: Config, index: int) -> Any:
    from memorybus.actors.embedder import EmbedderActor

    return ray.remote(EmbedderActor).options(**embedder_options(config, index)).remote(config)


def replace_dead(handles: list[Any], create: Callable[[int], Any], probe: str, timeout: float = 300) -> list[Any]:
    """The actors ``handles`` (found or created by name), with every dead one replaced:
    one whose constructor failed, or that Ray gave up restarting, keeps its name until
    it is killed, so a plain get-if-exists would hand it back forever. Each is probed
    with its method ``probe``; a dead one is killed and created again."""
    refs = [getattr(h, probe).remote() for h in handles]
    out = list(handles)
    for i, ref in enumerate(refs):
        try:
            ray.get(ref, timeout=timeout)
        except ray.exceptions.ActorDiedError:
            with contextlib.suppress(ValueError, ray.exceptions.RayError):
                ray.kill(out[i], no_restart=True)
            out[i] = create(i)
        except ray.exceptions.RayError:  # alive but failing: the readiness check reports it
            pass
    return out


def alive_shards(config: Config, count: int) -> list[str]:
    """Names of this namespace's shard actors (of the first ``count``) that are running."""
    alive: list[str] = []
    for i in range(count):
        name = shard_actor_name(config, i)
        try:
            handle = ray.get_actor(name, namespace=config.namespace)
            ray.get(handle.pid.remote(), timeout=10)
        except (ValueError, ray.exceptions.RayError):  # absent (ValueError) or dead
            continue
        alive.append(name)
    return alive


def lookup(name: str, namespace: str) -> Any:
    return ray.get_actor(name, namespace=namespace)


_NAMES: dict[str, Callable[[Config, int], str]] = {
    "shard": shard_actor_name,
    "embedder": embedder_actor_name,
    "hub": hub_actor_name,
}


def handle(config: Config, kind: str, index: int = 0) -> Any:
    """The running actor of ``config``'s bus: a ``"shard"``, ``"embedder"`` or ``"hub"``
    (``index``: shard, replica or partition), or the ``"decay"`` or ``"consolidation"``
    actor. For tools, tests and benchmarks that talk to one actor directly; raises
    ValueError when it is not running."""
    if kind in ("decay", "consolidation"):
        return lookup(maintenance_name(config, kind), config.namespace)
    namespace = embedder_namespace(config) if kind == "embedder" else config.namespace
    return lookup(_NAMES[kind](config, index), namespace)


def stop_embedder_pool(config: Config) -> int:
    """Kill the running replicas of ``config``'s shared embedder pool (of the first
    ``config.embedder_replicas``); the buses using it find it gone (ActorUnavailable)
    until one connects again and starts it. The number killed."""
    if not config.embedder_pool:
        raise ConfigError("embedder_pool", "names no pool: this bus's embedders stop with the bus")
    killed = 0
    for i in range(config.embedder_replicas):
        try:
            ray.kill(lookup(embedder_actor_name(config, i), POOL_NAMESPACE), no_restart=True)
        except (ValueError, ray.exceptions.RayError):  # not running
            continue
        killed += 1
    return killed


def shard_handles(config: Config) -> list[Any]:
    """Every shard actor of ``config``'s bus, in shard order (see :func:`handle`)."""
    return [handle(config, "shard", i) for i in range(config.num_shards)]


__all__ = [
    "ConsolidationActor",
    "DecayActor",
    "EmbedderActor",
    "HubActor",
    "ShardActor",
    "alive_shards",
    "create_embedder",
    "create_hub",
    "create_maintenance",
    "create_shard",
    "embedder_actor_name",
    "embedder_namespace",
    "hub_actor_name",
    "lookup",
    "maintenance_name",
    "replace_dead",
    "shard_actor_name",
    "shard_handles",
    "stop_embedder_pool",
]
