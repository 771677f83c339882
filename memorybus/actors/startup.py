"""Starting or joining Ray for a bus: which Ray (``choose_address``), ``ray.init`` without
Ray's per-start notices that are not ours, and whether the Ray reached can hold the
bus's actors (``check_capacity``). Functions of :mod:`memorybus.actors.runtime`
(re-exported there), kept apart so each file holds one job.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Any

import ray

from memorybus.config import Config
from memorybus.env import MODEL_ENV
from memorybus.errors import ConfigError

log = logging.getLogger("memorybus")


def choose_address(address: str | None, env_address: str | None, running: list[str]) -> str:
    """The address ``ray.init`` gets for ``Config.ray_address`` (pure; see :func:`ensure_ray`).

    - ``None``: ``RAY_ADDRESS`` when the environment sets it (a Ray Job's driver),
      else ``"local"``: a new private local Ray, never one found on the machine.
    - ``"auto"``: ``RAY_ADDRESS`` when set, else the one Ray running on this machine;
      no Ray, or several (a shared host: another job's), is a :class:`ConfigError`.
    - anything else: as given.
    """
    if address is not None and address != "auto":
        return address
    if env_address:
        return env_address
    if address is None:
        return "local"
    found = sorted(set(running))
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigError("ray_address", "'auto' found no running Ray here and RAY_ADDRESS is not set")
    raise ConfigError(
        "ray_address",
        f"'auto' is ambiguous: {len(found)} Ray instances run on this machine ({', '.join(found)}); "
        "set RAY_ADDRESS or pass the head's address",
    )


def _running_rays() -> list[str]:
    try:
        from ray._private.services import find_gcs_addresses

        return list(find_gcs_addresses())
    except (ImportError, AttributeError, OSError):  # pragma: no cover - private Ray API moved
        return []


def ensure_ray(config: Config, **init_kwargs: Any) -> bool:
    """Start or join Ray (see :func:`choose_address`); True when this call started it."""
    if ray.is_initialized():
        return False
    explicit = init_kwargs.pop("address", None)
    wanted = explicit if explicit is not None else config.ray_address
    running = _running_rays() if wanted == "auto" and not os.environ.get("RAY_ADDRESS") else []
    address = choose_address(wanted, os.environ.get("RAY_ADDRESS"), running)
    if address == "local":
        log.info("starting a local Ray")
    else:
        log.info("joining Ray at %s", address)
    kwargs: dict[str, Any] = {"address": address, "include_dashboard": False, "configure_logging": False}
    kwargs.update(init_kwargs)
    if address != "local":
        for name in ("num_cpus", "num_gpus", "resources"):  # the running cluster's own
            kwargs.pop(name, None)
    if address == "local":  # its processes inherit this environment (see model_env_options)
        for name, value in MODEL_ENV.items():
            os.environ.setdefault(name, value)
    notices = logging.getLogger(_RAY_AUTH_LOGGER)
    quiet = _TokenNotice()
    notices.addFilter(quiet)
    try:
        ray.init(**kwargs)
    finally:
        notices.removeFilter(quiet)
    global _inheriting_ray
    inherits = address == "local" and all(os.environ.get(k) == v for k, v in MODEL_ENV.items())
    _inheriting_ray = ray.get_runtime_context().gcs_address if inherits else None
    if quiet.dropped:
        log.info("Ray uses token authentication (its default for a local cluster; RAY_AUTH_MODE=disabled opts out)")
    return True


#: the GCS address of the local Ray this process started with :data:`MODEL_ENV` in its
#: environment (its workers inherit it), else None
_inheriting_ray: str | None = None


def model_env_options() -> dict[str, Any]:
    """The actor option that gives a model-running actor :data:`MODEL_ENV`: a Ray runtime
    environment, unless this process started the local Ray it is connected to with that
    environment already (then every worker inherits it, and an actor can start in one of
    Ray's prestarted workers instead of a new one set up for its runtime environment:
    about 2 s less of ``connect`` on a 2-core machine, measured 2026-12-05)."""
    if _inheriting_ray is not None and ray.is_initialized() \
            and ray.get_runtime_context().gcs_address == _inheriting_ray:
        return {}
    return {"runtime_env": {"env_vars": dict(MODEL_ENV)}}


#: where Ray logs its notice that a local cluster turned token authentication on
_RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


class _TokenNotice(logging.Filter):
    """Drops one record: Ray's warning, at every ``ray.init`` of a local cluster whose
    authentication mode is unset, that it turned token authentication on (its default
    since 2.59). ``ensure_ray`` says the same once on the ``memorybus`` logger (info)
    instead of on every script's stderr. Every other record of that logger passes."""

    dropped = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("Token authentication is enabled for this Ray cluster"):
            self.dropped = True
            return False
        return True


def bus_demand(config: Config) -> list[tuple[str, float, dict[str, float]]]:
    """The Ray resources each of the bus's actors reserves: (what, CPUs, custom resources)."""
    shard_like = config.num_shards + config.bus.partitions + (2 if config.schedule_maintenance else 0)
    gpus = {"GPU": float(config.embedder_num_gpus)} if config.embedder_num_gpus > 0 else {}
    embedders = [("embedder", config.embedder_num_cpus, {**dict(config.embedder_resources), **gpus})]
    embedders *= config.embedder_replicas
    return embedders + [("shard", config.shard_num_cpus, dict(config.shard_resources))] * shard_like


def check_capacity(config: Config, wait: float = 5.0) -> None:
    """Fail fast when Ray cannot place the bus: an actor whose resources no node has
    would wait forever (Ray queues it as infeasible). Nodes that join within
    ``wait`` seconds count. Raises :class:`ConfigError` saying what to change."""
    demand = bus_demand(config)
    need = sum(cpus for _, cpus, _ in demand)
    deadline = time.monotonic() + wait
    while True:
        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        total = sum(float(n.get("CPU", 0.0)) for n in nodes)
        homeless = [
            (what, cpus, res) for what, cpus, res in demand
            if not any(float(n.get("CPU", 0.0)) >= cpus and all(n.get(k, 0.0) >= v for k, v in res.items())
                       for n in nodes)
        ]
        if total + 1e-9 >= need and not homeless:
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    wanted = max(2, math.ceil(need - 1e-9))  # the CPUs a one-node Ray needs for this bus
    if homeless:
        what, cpus, res = homeless[0]
        reason = f"no Ray node has {cpus} CPU" + (f" and resources {res}" if res else "") + f" for the {what} actor"
    else:
        reason = f"Ray offers {total:g} CPU(s), the bus reserves {need:g}"
    raise ConfigError(
        "num_cpus",
        f"{reason} (embedder_num_cpus={config.embedder_num_cpus} x {config.embedder_replicas} replicas, "
        f"shard_num_cpus={config.shard_num_cpus} x {len(demand) - config.embedder_replicas} shard and hub actors): "
        f"start Ray with more CPUs (ray.init(num_cpus={wanted}), or connect(config, num_cpus={wanted})) or lower "
        "Config.embedder_num_cpus (e.g. 0.5)",
    )
