"""Runs LangGraph's own store tests (``test_store.py``, vendored unmodified from
langchain-ai/langgraph, MIT: see LICENSE and NOTICE here) against ``MemoryBusStore``.

The upstream module builds its stores with ``InMemoryStore(...)`` and
``InMemoryStore(index={...})``; an autouse fixture swaps that name, in the test module
only, for a subclass of :class:`MemoryBusStore` on one real bus (Ray, the model), each
store bound to a fresh org so tests never see each other's items. Nothing of LangGraph is
patched. Two small helpers stand in for upstream's test plugins (pytest-asyncio in auto
mode, pytest-mock's ``mocker``): async tests run in ``asyncio.run``; ``mocker`` offers the
``stub`` and ``spy`` the module uses.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import sys
import types
import uuid
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

pytest.importorskip("langgraph")

import memorybus as mb
from memorybus.integrations.langgraph import MemoryBusStore
from tests.integration.langgraph_upstream import embed_test_utils

# upstream imports its helper as ``tests.embed_test_utils`` (its own tests package)
sys.modules.setdefault("tests.embed_test_utils", embed_test_utils)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name == "langgraph_upstream":
            item.add_marker(pytest.mark.ray)
            item.add_marker(pytest.mark.model)
            item.add_marker(pytest.mark.timeout(300))


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an ``async def`` test to completion on a fresh event loop."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True


@pytest.fixture(scope="module")
def upstream_bus(ray_local, tmp_path_factory) -> Iterator[mb.MemoryBus]:
    cfg = mb.Config.embedded(tmp_path_factory.mktemp("lgupstream"), num_shards=2, namespace="lgupstream_t")
    bus = mb.connect(cfg)
    yield bus
    bus.shutdown()


@pytest.fixture(autouse=True)
def _stores_on_the_bus(request: pytest.FixtureRequest, upstream_bus: mb.MemoryBus, monkeypatch) -> None:
    class BusStore(MemoryBusStore):
        """``InMemoryStore(index=...)`` as upstream calls it: a store of a fresh org."""

        def __init__(self, *, index: Any = None) -> None:
            context = mb.Context(f"org{uuid.uuid4().hex[:10]}", "alice", "assistant")
            super().__init__(upstream_bus, context, index=index)

    monkeypatch.setattr(request.module, "InMemoryStore", BusStore, raising=True)


class _Mocker:
    """The two pytest-mock calls upstream makes: ``stub()`` and ``spy(obj, name)``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch

    def stub(self) -> mock.MagicMock:
        return mock.MagicMock()

    def spy(self, owner: Any, name: str) -> mock.MagicMock:
        original = getattr(owner, name)
        recorder = mock.MagicMock(side_effect=original)

        def spied(*args: Any, **kwargs: Any) -> Any:  # a function, so it binds as a method
            return recorder(*args, **kwargs)

        self._monkeypatch.setattr(owner, name, spied)
        return recorder


if importlib.util.find_spec("pytest_mock") is None:  # upstream imports its type name only
    sys.modules["pytest_mock"] = types.ModuleType("pytest_mock")
    sys.modules["pytest_mock"].MockerFixture = _Mocker  # type: ignore[attr-defined]


@pytest.fixture
def mocker(monkeypatch: pytest.MonkeyPatch) -> _Mocker:
    return _Mocker(monkeypatch)
