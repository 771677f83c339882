"""Runs LangGraph's own store tests (fetched, see ``upstream.py``) against ``MemoryBusStore``.

The upstream module builds its stores with ``InMemoryStore(...)`` and
``InMemoryStore(index={...})``, and spies on ``InMemoryStore.batch``/``abatch``; an autouse
fixture points that name, in the upstream module's globals only, at a subclass of
:class:`MemoryBusStore` on one real bus (Ray, the model) for the whole module, each
store bound to a fresh org so tests never see each other's items. Nothing of LangGraph is
patched. Two small stand-ins for upstream's test plugins, used only where those plugins
are not installed: async tests run in ``asyncio.run`` (pytest-asyncio's auto mode), and
``mocker`` offers the ``stub`` and ``spy`` the module uses (pytest-mock).
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

collect_ignore = ["_upstream"]  # the fetched files are collected through test_upstream_store.py
pytest.register_assert_rewrite("tests.integration.langgraph_upstream._upstream")

_HAS_PYTEST_MOCK = importlib.util.find_spec("pytest_mock") is not None
_HAS_PYTEST_ASYNCIO = importlib.util.find_spec("pytest_asyncio") is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name == "langgraph_upstream":
            item.add_marker(pytest.mark.ray)
            item.add_marker(pytest.mark.model)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an ``async def`` test of this directory to completion on a fresh event loop."""
    if _HAS_PYTEST_ASYNCIO or not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    if pyfuncitem.path.parent.name != "langgraph_upstream":
        return None
    names = pyfuncitem._fixtureinfo.argnames
    asyncio.run(pyfuncitem.obj(**{name: pyfuncitem.funcargs[name] for name in names}))
    return True


@pytest.fixture(scope="module")
def upstream_bus(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[mb.MemoryBus]:
    cfg = mb.Config.embedded(tmp_path_factory.mktemp("lgupstream"), num_shards=2, namespace="lgupstream_t",
                             embedder_num_cpus=0.5)  # fmt: skip
    bus = mb.connect(cfg)
    yield bus
    bus.shutdown()


@pytest.fixture(autouse=True)
def _stores_on_the_bus(request: pytest.FixtureRequest, upstream_bus: mb.MemoryBus,
                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    class BusStore(MemoryBusStore):
        """``InMemoryStore(index=...)`` as upstream calls it: a store of a fresh org."""

        def __init__(self, *, index: Any = None) -> None:
            context = mb.Context(f"org{uuid.uuid4().hex[:10]}", "alice", "assistant")
            super().__init__(upstream_bus, context, index=index)

    upstream_globals = request.function.__globals__
    assert "InMemoryStore" in upstream_globals, "the upstream module no longer names InMemoryStore"
    monkeypatch.setitem(upstream_globals, "InMemoryStore", BusStore)


class _Mocker:
    """The two pytest-mock calls upstream makes: ``stub()`` and ``spy(obj, name)`` (the
    spy records calls, ``self`` included for a method spied on its class)."""

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


if not _HAS_PYTEST_MOCK:
    # upstream imports ``MockerFixture`` from pytest_mock for its annotations only
    _shim = types.ModuleType("pytest_mock")
    _shim.MockerFixture = _Mocker  # type: ignore[attr-defined]
    sys.modules["pytest_mock"] = _shim

    @pytest.fixture
    def mocker(monkeypatch: pytest.MonkeyPatch) -> _Mocker:
        return _Mocker(monkeypatch)
