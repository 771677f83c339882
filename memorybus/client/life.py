"""Connecting and closing: the life of a :class:`~memorybus.client.MemoryBus` handle.

Functions of the handle (:class:`~memorybus.client.MemoryBus` calls them). What
they guarantee:

- **A bus's identity is its storage.** A namespace names one running bus; connecting
  to a namespace whose running bus keeps its data elsewhere (another ``data_dir``,
  ``redis_url``, vector store or shard count) raises :class:`ConfigError` before
  anything is created, instead of silently handing back the other bus.
- **Closing.** ``close()`` (or leaving ``with connect(...) as bus:``) writes pending
  access statistics and subscription cursors, then releases what ``connect``
  acquired: the actors it created (unless the config is ``detached``) and the local
  Ray it started. Handles that joined a running bus leave it running.
- **A closed handle fails fast.** Any call on a closed handle, on a handle whose
  actors were stopped, or in a process that left Ray (``ray.shutdown()``) raises
  :class:`BusClosed` before anything is sent, so it never starts Ray again.
- **Startup reports progress** on the ``memorybus`` logger (Ray, actors, model).
  ``connect`` returns once the actors answer: with ``query_encoder="auto"`` this
  process's query model then loads in the background (not competing with the actors'
  start for the CPU), and until it is loaded a recall's query is embedded by the
  embedder actor, so no call waits for it and the first synchronous recall after it
  loaded does not load it. ``query_encoder="local"`` loads it during ``connect``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import TYPE_CHECKING, Any, TypeVar

from memorybus.actors import runtime
from memorybus.client import loading
from memorybus.config import Config
from memorybus.errors import ActorUnavailable, BusClosed, ConfigError, DataDirInUse, MemoryBusError

if TYPE_CHECKING:
    from memorybus.client.handle import BusHandle

B = TypeVar("B", bound="BusHandle")  # the caller's own handle class comes back

log = logging.getLogger("memorybus")

#: names the shared embedder pool of a bus whose config names none (``Config.embedder_pool``)
POOL_ENV = "MEMORYBUS_EMBEDDER_POOL"


# ---------------------------------------------------------------- startup
def start(bus: BusHandle, loader: loading.Loader | None = None) -> None:
    """Check the namespace's running bus (if any) has this storage, create or join
    the actors, and (``query_encoder="local"``) wait for this process's query encoder,
    whose load ``loader`` started meanwhile (see :func:`open_bus`)."""
    from memorybus import actors
    from memorybus.client import identity

    cfg = bus.config
    loader = loader or loading.preload_encoder(bus)
    running = _running_identity(bus)
    if running is not None and running != cfg.storage_identity():
        raise ConfigError(
            "namespace",
            f"bus {cfg.namespace!r} is already running on {_describe(running)}; this config asks for "
            f"{_describe(cfg.storage_identity())}. Use another namespace for other storage, "
            "or the same storage to join the running bus",
        )
    bus._owns_actors = running is None
    if running is None:
        _check_not_served(cfg)  # another bus on these files: refused before anything starts
        runtime.check_capacity(cfg)  # an actor no node can hold fails now, not after a wait
    started = time.monotonic()
    log.info(
        "%s bus %r: %d shards, %d embedder(s), %d hub actor(s)",
        "creating" if running is None else "joining",
        cfg.namespace,
        cfg.num_shards,
        cfg.embedder_replicas,
        cfg.bus.partitions,
    )
    _prepare_stores(cfg)  # (a Redis that does not fsync every write is refused here, before any write)
    identity.bootstrap(bus)  # checks passed: the operator key exists before any actor needs it
    embedders = [actors.create_embedder(cfg, i) for i in range(cfg.embedder_replicas)]
    shards = [actors.create_shard(cfg, i) for i in range(cfg.num_shards)]
    hubs = [actors.create_hub(cfg, p) for p in range(cfg.bus.partitions)]
    # actors found dead (a failed constructor keeps its name) are replaced
    bus._embedders = actors.replace_dead(embedders, lambda i: actors.create_embedder(cfg, i), "pid")
    bus._shards = actors.replace_dead(shards, lambda i: actors.create_shard(cfg, i), "pid")
    bus._hubs = actors.replace_dead(hubs, lambda p: actors.create_hub(cfg, p), "pid")
    ready = [s.identity.remote(bus._credential or "") for s in bus._shards]
    ready += [e.dim.remote() for e in bus._embedders] + [h.ready.remote() for h in bus._hubs]
    names = [f"shard-{i}" for i in range(cfg.num_shards)] + [f"embedder-{i}" for i in range(cfg.embedder_replicas)]
    names += [f"hub-{p}" for p in range(cfg.bus.partitions)]
    if cfg.schedule_maintenance:
        for kind in ("decay", "consolidation"):
            bus._maintenance[kind] = actors.create_maintenance(cfg, kind)
            ready.append(bus._maintenance[kind].start.remote(bus._credential or ""))
            names.append(kind)
    wait_placed(ready, names, started)
    results = runtime.run_sync(runtime.iter_refs(ready), 300)
    for ident in results[: cfg.num_shards]:
        if ident != cfg.storage_identity():  # another process created it meanwhile
            raise ConfigError("namespace", f"bus {cfg.namespace!r} runs on {_describe(ident)}")
    log.info("actors ready in %.1fs", time.monotonic() - started)
    _report_parked(bus)
    if loader is not None:
        log.info("loading the query model in this process")
        loader.join()
        if loader.error is not None:
            raise loader.error


def wait_placed(refs: list[Any], names: list[str], started: float, limit: float = 300.0) -> None:
    """Wait for the actors to answer, saying which are still missing every 15 s; an
    actor Ray cannot place (no node has its resources) fails ``connect`` after
    ``limit`` seconds with its name, instead of a silent wait."""
    pending = list(refs)
    while pending:
        waited = time.monotonic() - started
        if waited >= limit:
            missing = [n for n, r in zip(names, refs, strict=True) if r in pending]
            raise ActorUnavailable(
                ", ".join(missing),
                f"actors not ready after {limit:.0f}s: {', '.join(missing)}; does the cluster have the CPUs "
                "and custom resources they ask for (Config.shard_num_cpus/shard_resources, "
                "embedder_num_cpus/embedder_resources)?",
            )
        pending = runtime.wait_some(pending, min(15.0, limit - waited))
        if pending:
            missing = [n for n, r in zip(names, refs, strict=True) if r in pending]
            log.info("still waiting for %s (%.0fs)", ", ".join(missing), time.monotonic() - started)


def _check_not_served(config: Config, wait: float = 3.0) -> None:
    """One bus per data directory (see :mod:`memorybus.storage.dirlock`), checked here
    first so that a second bus is refused in moments, not after its actors started:
    DataDirInUse if another bus's actors on this machine still hold a directory of
    ``config`` after ``wait`` seconds (a bus being closed lets go meanwhile). The
    actors take the locks themselves (this check cannot see other machines' disks)."""
    import os

    from memorybus.scopes import shard_name
    from memorybus.storage import dirlock

    if config.backend != "embedded":
        return
    root = os.path.abspath(config.data_dir)
    dirs = [os.path.join(root, shard_name(i)) for i in range(config.num_shards)]
    dirs += [os.path.join(root, f"bus-{p}") for p in range(config.bus.partitions)]
    deadline = time.monotonic() + wait
    for d in dirs:
        while dirlock.is_locked(d):
            if time.monotonic() >= deadline:
                raise DataDirInUse(d, dirlock.holder(d) or "another process")
            time.sleep(0.1)


def _report_parked(bus: BusHandle) -> None:
    """Say in one line which subscriptions wait for their target actor (connect goes on)."""
    refs = [h.parked.remote(bus._credential or "") for h in bus._hubs or []]
    try:
        found = runtime.run_sync(runtime.iter_refs(refs), 30)
    except MemoryBusError as exc:  # a report only: never a reason to fail connect
        log.warning("could not list parked subscriptions: %s", exc)
        return
    lines = [line for part in found for line in part]
    if lines:
        log.warning("%d subscription(s) parked until their target actor runs: %s", len(lines), "; ".join(lines))


def _running_identity(bus: BusHandle) -> dict[str, Any] | None:
    """The storage of the namespace's running bus, or None when none runs."""
    from memorybus import actors

    try:
        shard = actors.lookup(actors.shard_actor_name(bus.config, 0), bus.config.namespace)
    except ValueError:
        return None
    try:
        return dict(runtime.run_sync(runtime.iter_refs([shard.identity.remote(bus._credential or "")]), 120)[0])
    except (MemoryBusError, AttributeError):
        # dead, dying or restarting, or a leftover of an older shard class that
        # lacks the method: creation below finds it and replaces it when dead
        return None


# ---------------------------------------------------------------- closing
def _flush_all(bus: BusHandle) -> None:
    """Write pending access statistics and subscription cursors (best effort)."""
    auth = (bus._credential or "")
    refs = [h.flush.remote(auth) for h in (bus._hubs or [])] + [s.flush.remote(auth) for s in (bus._shards or [])]
    with contextlib.suppress(MemoryBusError):
        runtime.run_sync(runtime.iter_refs(refs), 30)


def _stop_actors(bus: BusHandle) -> None:
    """Close the stores cleanly (cursors written, SQLite WAL checkpointed into the main
    files, so the data directory alone is a full copy), then kill every actor."""
    closing = [h.close.remote(bus._credential or "") for h in (bus._shards or []) + (bus._hubs or [])]
    try:
        for ref in closing:
            with contextlib.suppress(MemoryBusError):  # the actor is gone or its store is down
                runtime.run_sync(runtime.iter_refs([ref]), 30)
    finally:  # killed whatever their close said
        for handle in all_handles(bus):
            runtime.kill(handle)


def all_handles(bus: BusHandle) -> list[Any]:
    """The actors the bus stops: all of its own (a shared embedder pool is not its own)."""
    embedders = [] if bus.config.embedder_pool else (bus._embedders or [])
    return (bus._shards or []) + embedders + (bus._hubs or []) + list(bus._maintenance.values())


def release(bus: BusHandle, reason: str) -> None:
    from memorybus.client.channels import close_all

    bus._closed = reason
    hook, bus._exit_hook = bus._exit_hook, None
    if hook is not None:
        hook.remove()
    close_all(bus)
    bus._shards = bus._embedders = bus._hubs = None
    bus._maintenance = {}


def close(bus: BusHandle) -> None:
    """Flush, then release what ``connect`` acquired; idempotent.

    Pending access statistics and subscription cursors are written first. A handle
    that created the bus's actors stops them (unless ``config.detached``: a
    detached bus outlives its creator; stop it with :meth:`shutdown`); a handle
    that joined a running bus leaves it running. If ``connect`` started a local
    Ray, it is shut down. Every later call raises :class:`BusClosed`.
    """
    if bus._closed is not None:
        return
    from memorybus.client.subscriptions import stop_listeners

    # this handle's listeners first; every listener of the process when Ray goes with it
    # (a listener's next call on a stale handle would start a new Ray)
    stop_listeners(lambda sub: bus._owns_ray or sub.bus is bus)
    try:
        if runtime.is_connected():
            if bus._owns_actors and not bus.config.detached:
                _stop_actors(bus)
            else:
                _flush_all(bus)
            if bus._owns_ray:
                runtime.shutdown()
    finally:
        release(bus, "closed")


def shutdown(bus: BusHandle) -> None:
    """Stop this bus's actors, whoever created them: the stores are closed cleanly
    first (access statistics and subscription cursors written, SQLite WAL
    checkpointed into the main files), then the actors are killed; the data stays.
    This handle is closed afterwards; Ray itself keeps running. Operator only."""
    from memorybus.client.identity import require_operator
    from memorybus.client.subscriptions import stop_listeners

    require_operator(bus, "shutdown")
    bus._check_open()
    # the listeners of every handle on this bus in this process: its hubs are going
    stop_listeners(lambda sub: sub.bus.config.namespace == bus.config.namespace)
    if bus._shards is None:  # a handle that never looked them up (e.g. unpickled)
        with contextlib.suppress(BusClosed):
            _find_all(bus)
    _stop_actors(bus)
    release(bus, "shut down")


def _find_all(bus: BusHandle) -> None:
    from memorybus import actors

    cfg = bus.config
    bus._shards = [bus._actor(actors.shard_actor_name(cfg, i)) for i in range(cfg.num_shards)]
    bus._embedders = [bus._actor(actors.embedder_actor_name(cfg, i), actors.embedder_namespace(cfg))
                      for i in range(cfg.embedder_replicas)]
    bus._hubs = [bus._actor(actors.hub_actor_name(cfg, p)) for p in range(cfg.bus.partitions)]
    for kind in ("decay", "consolidation"):
        with contextlib.suppress(BusClosed):
            bus._maintenance[kind] = bus._actor(actors.maintenance_name(cfg, kind))


def _describe(identity: dict[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in identity.items() if v not in (None, "")]
    return "{" + ", ".join(parts) + "}"


def _prepare_stores(config: Config) -> None:
    """Before any shard starts: refuse a changed shard count (or move the scopes, with
    ``Config(migrate=True)``) and, on this machine's disk, a store that existed and is
    gone. Each shard checks its own store again when it opens it."""
    from memorybus import actors
    from memorybus.errors import StoreMismatch
    from memorybus.scopes import shard_name
    from memorybus.storage import factory, identity, reshard

    recorded = reshard.recorded_num_shards(config)
    if recorded is not None and recorded != config.num_shards:
        if not config.migrate:
            raise StoreMismatch(
                "bus",
                f"its stores were written with num_shards={recorded}, not "
                f"{config.num_shards}: connect with Config(migrate=True) to move the scopes",
            )
        running = actors.alive_shards(config, max(recorded, config.num_shards))
        if running:
            raise StoreMismatch("bus", f"stop the running shards before migrating (bus.shutdown()): {running}")
        reshard.reshard(config, recorded)
    if config.backend == "embedded":
        for i in range(config.num_shards):
            identity.store_file_missing(config, shard_name(i), factory.sqlite_path(config, shard_name(i)))


def open_bus(cls: type[B], config: Config | None, ray_init_kwargs: dict[str, Any]) -> B:
    """:func:`memorybus.connect`: start or join Ray, then create or join the bus."""
    from memorybus.errors import InvalidRequest

    config = config or Config()
    if not isinstance(config, Config):
        raise InvalidRequest("config", "must be a memorybus.Config")
    # the model's dimension and fingerprint, read here once: every actor gets them as data
    config = config.with_model_resolved()
    if config.embedder_pool is None and os.environ.get(POOL_ENV):
        try:
            config = config.with_(embedder_pool=os.environ[POOL_ENV])
        except ConfigError as exc:
            raise ConfigError("embedder_pool", f"{POOL_ENV}={os.environ[POOL_ENV]!r}: {exc.reason}") from None
    started = time.monotonic()
    bus = cls(config)
    # query_encoder="local": the query model loads while Ray starts; a connect that
    # fails leaves it loaded, unused ("auto": it loads after the actors, see start)
    loader = loading.preload_encoder(bus)
    owns_ray = runtime.ensure_ray(config, **ray_init_kwargs)
    bus._owns_ray = owns_ray
    try:
        start(bus, loader)
    except BaseException:
        if bus._owns_actors and runtime.is_connected():
            for handle in all_handles(bus):
                runtime.kill(handle)
        if owns_ray:
            runtime.shutdown()
        release(bus, "connect failed")
        raise
    if owns_ray:  # a script's own Ray: SIGTERM and exit close the bus (see client.exit)
        from memorybus.client.exit import close_at_exit

        bus._exit_hook = close_at_exit(bus, close)
    loading.load_encoder_behind(bus)
    log.info("memorybus %r ready in %.1fs", config.namespace, time.monotonic() - started)
    return bus
