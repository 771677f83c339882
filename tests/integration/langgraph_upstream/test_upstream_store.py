"""LangGraph's own store tests (``tests/test_store.py`` of the installed
``langgraph-checkpoint``), fetched from the package registry into a git-ignored cache and
run unmodified against ``MemoryBusStore``: ``conftest.py`` here puts a store on the bus
where they build an ``InMemoryStore``.

Every upstream test is collected here, under its own name; none is left out. Without
the cache and without access to the registry, the module is skipped with the reason and
the command that fetches the tests.
"""

from __future__ import annotations

import pytest

pytest.importorskip("langgraph")

from tests.integration.langgraph_upstream import upstream

try:
    _module = upstream.load()
except upstream.UnavailableError as exc:
    pytest.skip(str(exc), allow_module_level=True)

# the upstream module's tests and fixtures, collected as this module's (a star import)
globals().update({name: obj for name, obj in vars(_module).items() if not name.startswith("_") and name not in globals()})
