"""Loads LangGraph's own store tests from the fetch cache (never from this repository).

``load()`` makes sure ``_upstream/`` here holds ``test_store.py`` and
``embed_test_utils.py`` of the installed ``langgraph-checkpoint`` (running
``scripts/fetch_langgraph_tests.py``'s ``fetch`` when it does not), then imports them as
``tests.integration.langgraph_upstream._upstream.*`` (a namespace package: the cache has
no ``__init__.py``), so pytest rewrites their asserts. The upstream module imports its
helper as ``tests.embed_test_utils``; that name is pointed at the fetched helper.

When the tests cannot be had, ``load()`` raises :class:`UnavailableError` with a reason that
says how to fetch them; the test module turns it into a skip of the whole module.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
SCRIPT = HERE.parents[2] / "scripts" / "fetch_langgraph_tests.py"
PACKAGE = __name__.rpartition(".")[0] + "._upstream"
HOW = "run `python scripts/fetch_langgraph_tests.py` with access to the package registry"


class UnavailableError(Exception):
    """LangGraph's store tests are not in the cache and could not be fetched."""


def _fetcher() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_fetch_langgraph_tests", SCRIPT)
    if spec is None or spec.loader is None:
        raise UnavailableError(f"{SCRIPT} is missing")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load() -> ModuleType:
    """The fetched ``test_store`` module of the installed version; raises UnavailableError."""
    fetcher = _fetcher()
    try:
        version = fetcher.fetch()
    except fetcher.FetchError as exc:
        have = fetcher.cached_version()
        raise UnavailableError(
            f"LangGraph's store tests could not be fetched ({exc}); the cache holds "
            f"{'none' if have is None else 'those of ' + have}: {HOW}"
        ) from None
    if fetcher.cached_version() != version:  # pragma: no cover - fetch() guarantees it
        raise UnavailableError(f"the cache does not hold the tests of {version}: {HOW}")
    helper = importlib.import_module(PACKAGE + ".embed_test_utils")
    sys.modules["tests.embed_test_utils"] = helper
    return importlib.import_module(PACKAGE + ".test_store")
