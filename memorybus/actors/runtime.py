"""Driving client operations over Ray: one code path for sync and async.

A client operation is a generator that yields what it waits for — a list of
ObjectRefs (all must succeed), :class:`Within` (all must succeed within a
time of their own), :class:`Settled` (each result or its error) or
:class:`~memorybus.actors.direct.Direct` (calls over same-node channels, all
must succeed; through Ray when driven with ``await``) — and receives the
results. :func:`run_sync` drives it with ``ray.get``, :func:`run_async` with
``await``. Errors raised inside actors come back as the original
:class:`~memorybus.errors.MemoryBusError`, not Ray's wrapper.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import ray
import ray.exceptions as rex

from memorybus.actors.direct import Direct, get_direct
from memorybus.config import Config
from memorybus.errors import ActorFailed, ActorUnavailable, BusClosed, ConfigError, MemoryBusError, OperationTimeout

log = logging.getLogger("memorybus")

T = TypeVar("T")
Op = Generator[Any, Any, T]

_BLOCKING: contextvars.ContextVar[bool] = contextvars.ContextVar("memorybus_blocking", default=False)


def blocking() -> bool:
    """Whether the operation running now is driven by :func:`run_sync` (its caller's
    thread waits for it) rather than :func:`run_async`."""
    return _BLOCKING.get()


@dataclass(slots=True)
class Settled:
    """Wait for every ref; deliver each result or the exception it raised."""

    refs: list[Any]


@dataclass(slots=True)
class Within:
    """Wait for every ref (all must succeed), at most ``seconds`` for this wait (and
    never past the operation's own deadline); past it, OperationTimeout(seconds)."""

    refs: list[Any]
    seconds: float


def unwrap(exc: BaseException) -> BaseException:
    """Ray's wrappers turned back into memorybus errors: the actor's own error as it
    raised it (any other error an actor raised as :class:`ActorFailed` naming the actor's
    call and the error); a stopped bus as :class:`BusClosed`; a wait past its time as
    :class:`OperationTimeout`; an actor that died, restarts or cannot be reached (and
    any other failure of Ray itself) as :class:`ActorUnavailable` naming the actor."""
    if isinstance(exc, rex.RayTaskError):
        cause = exc.cause
        if isinstance(cause, MemoryBusError | rex.RayError):
            return unwrap(cause)
        if isinstance(cause, BaseException):  # not ours: a bug, or code the actor ran for a caller
            failed = ActorFailed(str(exc.function_name or _actor_name(exc)), f"{type(cause).__name__}: {cause}")
            failed.__cause__ = cause
            return failed
        return ActorUnavailable(_actor_name(exc), f"the call failed in Ray: {exc}")
    if isinstance(exc, rex.ActorDiedError) and "ray.kill" in str(exc):
        return BusClosed(_field(str(exc), "namespace"), "its actors were stopped (closed or shut down)")
    if isinstance(exc, rex.GetTimeoutError):
        return OperationTimeout(None)
    if isinstance(exc, rex.RayActorError | rex.ActorUnavailableError):
        return ActorUnavailable(_actor_name(exc), _first_line(exc))
    if isinstance(exc, rex.RayError) and not isinstance(exc, MemoryBusError):
        return ActorUnavailable(_actor_name(exc), f"{type(exc).__name__}: {_first_line(exc)}")
    return exc


def gone(exc: BaseException) -> ActorUnavailable:
    """A dead or unreachable actor as ActorUnavailable naming it (even when ``ray.kill``ed)."""
    return ActorUnavailable(_actor_name(exc), _first_line(exc))


def _actor_name(exc: BaseException) -> str:
    """The actor a Ray error is about: its name, else its class, else its id."""
    text = str(exc)
    return _field(text, "name") or _field(text, "class_name") or str(getattr(exc, "actor_id", None) or "")


def _first_line(exc: BaseException) -> str:
    """What Ray says happened, without its multi-line report of the actor."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    tail = [line for line in lines[1:] if ": " not in line or not line.split(": ", 1)[0].isidentifier()]
    return " ".join(lines[:1] + tail[:1])


def node_id() -> str:
    """The id of the Ray node this process runs on."""
    return str(ray.get_runtime_context().get_node_id())


def in_ray_worker() -> bool:
    """Whether this process is a Ray task or actor worker (not a driver). False
    before Ray is initialized here (a worker always is): asking Ray then would start it."""
    if not ray.is_initialized():
        return False
    try:  # what RuntimeContext checks itself (its getters warn when called in a driver)
        from ray._private.worker import WORKER_MODE

        return bool(ray.get_runtime_context().worker.mode == WORKER_MODE)
    except (ImportError, AttributeError):  # pragma: no cover - other Ray versions
        return ray.get_runtime_context().get_actor_id() is not None


class _Deadline:
    """One timeout for a whole operation, however many waits it takes."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.at = None if timeout is None else time.monotonic() + timeout

    def left(self) -> float | None:
        return None if self.at is None else max(0.0, self.at - time.monotonic())

    def error(self) -> OperationTimeout:
        return OperationTimeout(self.timeout)

    def narrowed(self, wanted: Any) -> _Deadline:
        """The deadline of one wait: the operation's, or a :class:`Within`'s when sooner."""
        if not isinstance(wanted, Within):
            return self
        left = self.left()
        return self if left is not None and left <= wanted.seconds else _Deadline(wanted.seconds)


def _get_settled(refs: list[Any], deadline: _Deadline) -> list[Any]:
    out: list[Any] = []
    for ref in refs:
        try:
            out.append(ray.get(ref, timeout=deadline.left()))
        except rex.GetTimeoutError:
            out.append(deadline.error())
        except rex.RayError as exc:
            out.append(unwrap(exc))
    return out


class _Drive:
    """One operation's progress, for both runners: what it waits for now (``wanted``),
    the deadline of that wait (``wait``) and of the whole operation (``deadline``)."""

    def __init__(self, op: Op[Any], timeout: float | None, blocking: bool) -> None:
        self.op = op
        self.deadline = self.wait = _Deadline(timeout)
        self.wanted: Any = None
        self.value: Any = None
        self._token = _BLOCKING.set(blocking)

    def advance(self, result: Any = None, error: BaseException | None = None) -> bool:
        """Hand the operation what it waited for, or throw in the wait's error (a memorybus
        error, so it may add what it knows, such as its operation id, or recover). False
        once it has returned (its value in ``value``); what it raises propagates."""
        try:
            self.wanted = self.op.send(result) if error is None else self.op.throw(error)
        except StopIteration as stop:
            self.value = stop.value
            return False
        self.wait = self.deadline.narrowed(self.wanted)
        return True

    def refs(self) -> list[Any]:
        wanted = self.wanted
        if isinstance(wanted, Direct):
            return wanted.refs()
        return list(wanted.refs if isinstance(wanted, Within | Settled) else wanted)

    def close(self) -> None:
        _BLOCKING.reset(self._token)


def run_sync(op: Op[T], timeout: float | None = None) -> T:
    """Drive ``op`` with ``ray.get``, all of it within ``timeout`` seconds (None: no
    limit; past it, OperationTimeout). A failed wait is thrown into the operation."""
    drive = _Drive(op, timeout, blocking=True)
    try:
        going = drive.advance()
        while going:
            try:
                if isinstance(drive.wanted, Settled):
                    result: Any = _get_settled(drive.refs(), drive.deadline)
                elif isinstance(drive.wanted, Direct):  # over same-node channels, else through Ray
                    result = get_direct(drive.wanted, drive.wait.left, _ray_get)
                else:
                    result = ray.get(drive.refs(), timeout=drive.wait.left())
            except (rex.GetTimeoutError, OperationTimeout):
                going = drive.advance(error=drive.wait.error())
            except rex.RayError as exc:  # the actor's own errors arrive wrapped in RayTaskError
                going = drive.advance(error=unwrap(exc))
            except MemoryBusError as exc:  # a shard's own error, raised back over a direct channel
                going = drive.advance(error=exc)
            else:
                going = drive.advance(result)
        return drive.value
    finally:
        drive.close()


def _ray_get(refs: list[Any], timeout: float | None) -> Any:
    return ray.get(refs, timeout=timeout)


async def _await_one(ref: Any) -> Any:
    return await ref


async def run_async(op: Op[T], timeout: float | None = None) -> T:
    """:func:`run_sync` with ``await``."""
    drive = _Drive(op, timeout, blocking=False)
    try:
        going = drive.advance()
        while going:
            settled = isinstance(drive.wanted, Settled)
            waiting = asyncio.gather(*map(_await_one, drive.refs()), return_exceptions=settled)
            try:
                raw = await asyncio.wait_for(waiting, (drive.deadline if settled else drive.wait).left())
            except TimeoutError:
                going = drive.advance(error=drive.wait.error())
            except rex.RayError as exc:  # the actor's own errors arrive wrapped in RayTaskError
                going = drive.advance(error=unwrap(exc))
            else:  # a settled wait hands each failure over as a memorybus error
                handed = [unwrap(r) if isinstance(r, BaseException) else r for r in raw] if settled else raw
                going = drive.advance(handed)
        return drive.value
    finally:
        drive.close()


def _field(text: str, name: str) -> str:
    for line in text.splitlines():
        key, sep, value = line.strip().partition(": ")
        if sep and key == name:
            return value
    return ""


def is_connected() -> bool:
    """Whether this process is connected to Ray (cheap: no call is made)."""
    return bool(ray.is_initialized())


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
    notices = logging.getLogger(_RAY_AUTH_LOGGER)
    quiet = _TokenNotice()
    notices.addFilter(quiet)
    try:
        ray.init(**kwargs)
    finally:
        notices.removeFilter(quiet)
    if quiet.dropped:
        log.info("Ray uses token authentication (its default for a local cluster; RAY_AUTH_MODE=disabled opts out)")
    return True


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
    embedders = [("embedder", config.embedder_num_cpus, dict(config.embedder_resources))] * config.embedder_replicas
    return embedders + [("shard", config.shard_num_cpus, dict(config.shard_resources))] * shard_like


def check_capacity(config: Config, wait: float = 5.0) -> None:
    """Fail fast when Ray cannot place the bus: an actor whose resources no node has
    would wait forever (Ray queues it as infeasible). Nodes that join within
    ``wait`` seconds count. Raises :class:`ConfigError` saying what to change."""
    from memorybus.errors import ConfigError

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
    if homeless:
        what, cpus, res = homeless[0]
        reason = f"no Ray node has {cpus} CPU" + (f" and resources {res}" if res else "") + f" for the {what} actor"
    else:
        reason = f"Ray offers {total:g} CPU(s), the bus reserves {need:g}"
    raise ConfigError(
        "num_cpus",
        f"{reason} (embedder_num_cpus={config.embedder_num_cpus} x {config.embedder_replicas} replicas, "
        f"shard_num_cpus={config.shard_num_cpus} x {len(demand) - config.embedder_replicas} shard and hub actors): "
        "start Ray with more CPUs (ray.init(num_cpus=2), or connect(config, num_cpus=2)) or lower "
        "Config.embedder_num_cpus (e.g. 0.5)",
    )


def pick_one(results: list[Any], memory_id: str) -> Any:
    """The one success among per-shard answers (exactly one shard holds a memory);
    else the most telling error: anything but MemoryNotFound, then MemoryNotFound."""
    from memorybus.errors import MemoryNotFound

    found = [r for r in results if not isinstance(r, BaseException)]
    if found:
        return found[0]
    for err in (unwrap(r) for r in results):
        if not isinstance(err, MemoryNotFound):
            raise err
    raise MemoryNotFound(memory_id)


def shutdown() -> None:
    """Disconnect this process from Ray (a local instance it started stops)."""
    ray.shutdown()


def kill(handle: Any) -> None:
    with contextlib.suppress(ValueError, rex.RayError):  # already gone
        ray.kill(handle, no_restart=True)


def wait_some(refs: list[Any], timeout: float) -> list[Any]:
    """The refs of ``refs`` not finished after ``timeout`` seconds (finished or failed)."""
    _, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    return list(pending)


def wait_ready(refs: list[Any], timeout: float) -> None:
    run_sync(iter_refs(refs), timeout)


def iter_refs(refs: list[Any]) -> Op[list[Any]]:
    result = yield refs
    return result


def iter_one(ref: Any) -> Op[Any]:
    (result,) = yield [ref]
    return result
