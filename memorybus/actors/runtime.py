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
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import ray
import ray.exceptions as rex

from memorybus.actors.direct import Direct, get_direct
from memorybus.actors.startup import bus_demand, check_capacity, choose_address, ensure_ray  # noqa: F401 - re-exported
from memorybus.errors import ActorFailed, ActorUnavailable, BusClosed, MemoryBusError, OperationTimeout

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
            if not ray.is_initialized():  # ray.get would start a new local Ray (Ray's auto-init)
                going = drive.advance(error=BusClosed("", "this process is not connected to Ray"))
                continue
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
