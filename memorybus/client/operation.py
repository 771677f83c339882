"""One definition per client operation: the sync method and its ``*_async`` twin.

An operation is written once, as a generator function of the bus and the call's
arguments that yields what it waits for (see :mod:`memorybus.actors.runtime`).
:class:`operation` makes the public method of it, driven by ``run_sync``; its
``twin`` is the ``*_async`` method, driven by ``run_async``. Both have the
generator function's signature and docstring, and the same time limit
(``"read"``: ``config.read_timeout``, ``"write"``: ``config.write_timeout``, a
number of seconds, or None: no limit), read from the handle's config at each call
(so :meth:`~memorybus.client.MemoryBus.with_timeout` applies). In a class body::

    recall, recall_async = operations(queries.recall, "read")

The checks every operation shares (a context, a memory id, enum lists) live here too.
"""

from __future__ import annotations

import functools
import inspect
import types
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

from memorybus.actors import runtime
from memorybus.actors.runtime import Op
from memorybus.client import identity
from memorybus.errors import InvalidRequest, MemoryNotFound
from memorybus.scopes import Context
from memorybus.validation import check_text
from memorybus.views import as_enums

P = ParamSpec("P")
T = TypeVar("T")
#: an operation's time limit: the config's read or write timeout, seconds, or None
Limit = Literal["read", "write"] | float | None


def _seconds(bus: Any, limit: Limit) -> float | None:
    if limit == "read":
        return bus.config.read_timeout
    if limit == "write":
        return bus.config.write_timeout
    return limit


class operation(Generic[P, T]):  # noqa: N801 - used like a decorator
    """The sync method of the operation generator ``fn`` (see the module docstring)."""

    def __init__(self, fn: Callable[Concatenate[Any, P], Op[T]], limit: Limit) -> None:
        self.fn = fn
        self.limit = limit

        signature = inspect.signature(fn)
        takes_context = "context" in signature.parameters

        def bound(bus: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Op[T]:
            if takes_context and bus._grant is not None:  # the handle's credential rides on the context
                call = signature.bind_partial(bus, *args, **kwargs)
                call.arguments["context"] = identity.bind(bus, call.arguments.get("context"))
                return fn(*call.args, **call.kwargs)
            return fn(bus, *args, **kwargs)

        @functools.wraps(fn)
        def sync(bus: Any, *args: Any, **kwargs: Any) -> T:
            return runtime.run_sync(bound(bus, args, kwargs), _seconds(bus, limit))

        @functools.wraps(fn)
        async def asynchronous(bus: Any, *args: Any, **kwargs: Any) -> T:
            return await runtime.run_async(bound(bus, args, kwargs), _seconds(bus, limit))

        # what the caller sees: the generator's parameters, returning what the operation returns
        returns = signature.return_annotation
        if isinstance(returns, str) and returns.startswith("Op[") and returns.endswith("]"):
            signature = signature.replace(return_annotation=returns[3:-1])
        sync.__signature__ = asynchronous.__signature__ = signature  # type: ignore[attr-defined]
        self._sync = sync
        self.twin: _Twin[P, T] = _Twin(asynchronous)

    def __set_name__(self, owner: type, name: str) -> None:
        self._sync.__name__, self._sync.__qualname__ = name, f"{owner.__name__}.{name}"

    @overload
    def __get__(self, bus: None, owner: type | None = None) -> Callable[Concatenate[Any, P], T]: ...

    @overload
    def __get__(self, bus: object, owner: type | None = None) -> Callable[P, T]: ...

    def __get__(self, bus: object | None, owner: type | None = None) -> Any:
        # on the class, the plain function (as for any method): help() and inspect see it
        return self._sync if bus is None else types.MethodType(self._sync, bus)


class _Twin(Generic[P, T]):
    """The ``*_async`` method of an :class:`operation`."""

    def __init__(self, fn: Callable[..., Coroutine[Any, Any, T]]) -> None:
        self._fn = fn

    def __set_name__(self, owner: type, name: str) -> None:
        self._fn.__name__, self._fn.__qualname__ = name, f"{owner.__name__}.{name}"

    @overload
    def __get__(
        self, bus: None, owner: type | None = None
    ) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]: ...

    @overload
    def __get__(self, bus: object, owner: type | None = None) -> Callable[P, Coroutine[Any, Any, T]]: ...

    def __get__(self, bus: object | None, owner: type | None = None) -> Any:
        return self._fn if bus is None else types.MethodType(self._fn, bus)


def operations(fn: Callable[Concatenate[Any, P], Op[T]], limit: Limit) -> tuple[operation[P, T], _Twin[P, T]]:
    """The sync method of ``fn`` and its async twin, for one line of a class body::

        recall, recall_async = operations(queries.recall, "read")
    """
    sync = operation(fn, limit)
    return sync, sync.twin


# ------------------------------------------------------------ shared checks
def check_context(context: object) -> Context:
    if not isinstance(context, Context):
        raise InvalidRequest("context", f"must be a Context, got {type(context).__name__}")
    return context


def check_memory_id(memory_id: object) -> str:
    """A memory id: a non-empty string; one that is no UUID names no memory."""
    if not isinstance(memory_id, str) or not memory_id:
        raise InvalidRequest("memory_id", "must be a non-empty string")
    check_text("memory_id", memory_id, InvalidRequest)
    try:
        uuid.UUID(memory_id)
    except ValueError:
        raise MemoryNotFound(memory_id) from None
    return memory_id


enums = as_enums  # the one conversion, shared with the direct reads (memorybus.views)
