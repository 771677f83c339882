"""The driver of the LangGraph store's batches: a batch is a generator of calls (a bus
method, or one of the store's embedder), so that ``batch`` and ``abatch`` share one logic
and differ only in how a call is made. No LangGraph import.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

import memorybus as mb

#: a call the driver makes: (method name, args, kwargs); sync and async share the logic
Call = tuple[str, tuple[Any, ...], dict[str, Any]]
Steps = Generator[Call, Any, Any]


def call(name: str, *args: Any, **kwargs: Any) -> Call:
    return (name, args, kwargs)


class Driver:
    """Runs one batch's steps: iterating gives each bus call to make in turn; ``settle``
    (or ``settle_async``) makes it and hands its result, or its MemoryBusError, back to
    the steps. Once the steps return, their results are in ``results``."""

    def __init__(self, steps: Steps) -> None:
        self._steps = steps
        self._value: Any = None
        self._error: mb.MemoryBusError | None = None
        self.results: list[Any] = []

    def __iter__(self) -> Iterator[Call]:
        while True:
            try:
                call = self._steps.throw(self._error) if self._error is not None else self._steps.send(self._value)
            except StopIteration as done:
                self.results = list(done.value)
                return
            self._value, self._error = None, None
            yield call

    def settle(self, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            self._value = method(*args, **kwargs)
        except mb.MemoryBusError as exc:
            self._error = exc

    async def settle_async(self, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            self._value = await method(*args, **kwargs)
        except mb.MemoryBusError as exc:
            self._error = exc
