"""The client's public surface: every operation has its ``*_async`` twin, same signature.

Operations are defined once (:mod:`memorybus.client.operation`); these tests
enumerate the public methods of :class:`MemoryBus` instead of naming them, so an
operation added later without a twin, or a twin whose parameters drift, fails here.
No Ray is started: building a handle contacts nothing.
"""

from __future__ import annotations

import inspect

import pytest

from memorybus import Config, MemoryBus
from memorybus.client.operation import operation

#: public methods that are not operations on the bus's data: the handle's own life and
#: identity (credentials are minted and checked in this process, from the key ring)
LIFECYCLE = {"close", "shutdown", "with_timeout", "issue_credential", "as_agent", "agent_handle", "rotate_org_secret",
             "revoke_credential", "whoami", "warm_up"}


def _public_methods() -> dict[str, object]:
    bus = MemoryBus(Config())
    names = [n for n in dir(MemoryBus) if not n.startswith("_")]
    props = {n for n in names if isinstance(inspect.getattr_static(MemoryBus, n), property)}
    return {n: getattr(bus, n) for n in names if n not in props and callable(getattr(bus, n))}


def _twin_name(name: str) -> str:
    return name.rstrip("_") + "_async"


def test_every_public_operation_has_an_async_twin_with_the_same_signature():
    methods = _public_methods()
    syncs = [n for n in methods if not n.endswith("_async") and n not in LIFECYCLE]
    assert len(syncs) >= 30 and "recall" in syncs and "import_" in syncs
    for name in syncs:
        twin = methods.get(_twin_name(name))
        assert twin is not None, f"{name} has no {_twin_name(name)}"
        assert inspect.iscoroutinefunction(twin), name
        assert not inspect.iscoroutinefunction(methods[name]), name
        assert inspect.signature(twin) == inspect.signature(methods[name]), name
        assert twin.__doc__ == methods[name].__doc__ and methods[name].__doc__, name


def test_every_async_method_is_the_twin_of_a_sync_one():
    methods = _public_methods()
    orphans = [n for n in methods if n.endswith("_async") and
               not any(_twin_name(s) == n for s in methods if not s.endswith("_async"))]  # fmt: skip
    assert orphans == []


def test_each_operation_is_one_definition_with_a_time_limit():
    """Every public operation of the class body is an :class:`operation`, whose limit is
    the config's read or write timeout, or fixed seconds: every write has the write timeout."""
    ops = {n: v for n, v in vars(MemoryBus).items() if isinstance(v, operation)}
    methods = _public_methods()
    assert set(ops) == {n for n in methods if not n.endswith("_async")} - LIFECYCLE
    assert {ops[n].limit for n in ("recall", "get", "list_memories", "current_fact", "context_for")} == {"read"}
    writes = ("remember", "remember_many", "remember_turns", "update", "forget", "assert_fact", "assert_facts",
              "broadcast")
    assert {ops[n].limit for n in writes} == {"write"}


def test_signatures_read_as_the_caller_sees_them():
    bus = MemoryBus(Config())
    sig = inspect.signature(bus.remember)
    assert list(sig.parameters) == ["content", "context", "op_id", "fields"]
    assert sig.return_annotation == "MemoryNode"
    assert inspect.signature(bus.recall_async).parameters["k"].default is None
    assert bus.recall.__name__ == "recall" and bus.recall_async.__qualname__ == "MemoryBus.recall_async"


@pytest.mark.parametrize("name", ["remember", "recall_async", "export"])
def test_a_handle_pickles_to_its_config(name):
    import pickle

    bus = MemoryBus(Config(namespace="pickled"))
    copy = pickle.loads(pickle.dumps(bus))
    assert copy.config == bus.config and callable(getattr(copy, name))
