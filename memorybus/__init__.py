"""memorybus: a distributed memory bus for teams of LLM agents on Ray.

Public API::

    import memorybus
    with memorybus.connect(memorybus.Config.embedded("./data")) as bus:
        ctx = memorybus.Context(org="acme", user="u1", agent="planner")
        bus.remember("The user prefers Rust for backends", ctx, scope="user")
        hits = bus.recall("which language for the backend?", ctx)

Everything the README uses is importable from here; the submodules are the
implementation. Names are imported on first use (PEP 562), so ``import memorybus`` and the
command line's ``--help`` do not load Ray, torch or numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> module that defines it
_EXPORTS = {
    "Strategy": "memorybus.bus.conflicts",
    "MemoryBus": "memorybus.client",
    "connect": "memorybus.client",
    "Inbox": "memorybus.client.subscriptions",
    "Subscription": "memorybus.client.subscriptions",
    "MemoryPage": "memorybus.views",
    "Clock": "memorybus.clock",
    "ManualClock": "memorybus.clock",
    "SystemClock": "memorybus.clock",
    "BusPolicy": "memorybus.config",
    "Config": "memorybus.config",
    "ConsolidationPolicy": "memorybus.config",
    "DecayPolicy": "memorybus.config",
    "GraphPolicy": "memorybus.config",
    "RankingWeights": "memorybus.config",
    "Inspection": "memorybus.views",
    "ContextBlock": "memorybus.prompt",
    "ActorUnavailable": "memorybus.errors",
    "ActorFailed": "memorybus.errors",
    "BusClosed": "memorybus.errors",
    "ConfigError": "memorybus.errors",
    "DeliveryFailed": "memorybus.errors",
    "EmbeddingError": "memorybus.errors",
    "HookFailed": "memorybus.errors",
    "IndexUnavailable": "memorybus.errors",
    "InvalidMemory": "memorybus.errors",
    "InvalidRequest": "memorybus.errors",
    "MemoryBusError": "memorybus.errors",
    "MemoryNotFound": "memorybus.errors",
    "OperationTimeout": "memorybus.errors",
    "OutcomeUnknown": "memorybus.errors",
    "PartialWrite": "memorybus.errors",
    "ScopeViolation": "memorybus.errors",
    "NotAuthenticated": "memorybus.errors",
    "NotAuthorized": "memorybus.errors",
    "Grant": "memorybus.auth",
    "StoreMismatch": "memorybus.errors",
    "DataDirInUse": "memorybus.errors",
    "StoreUnavailable": "memorybus.errors",
    "Unavailable": "memorybus.errors",
    "VersionConflict": "memorybus.errors",
    "Event": "memorybus.memory.events",
    "EventFilter": "memorybus.memory.events",
    "EventKind": "memorybus.memory.events",
    "derived_id": "memorybus.memory.ids",
    "new_id": "memorybus.memory.ids",
    "MemoryKind": "memorybus.memory.model",
    "MemoryNode": "memorybus.memory.model",
    "MemoryStatus": "memorybus.memory.model",
    "salience": "memorybus.salience",
    "RecallHit": "memorybus.retrieval",
    "RecallOptions": "memorybus.retrieval",
    "Context": "memorybus.scopes",
    "Level": "memorybus.scopes",
    "Scope": "memorybus.scopes",
    "FactResult": "memorybus.shard",
}

__all__ = [
    "ActorFailed",
    "ActorUnavailable",
    "BusClosed",
    "BusPolicy",
    "Clock",
    "Config",
    "ConfigError",
    "ConsolidationPolicy",
    "Context",
    "ContextBlock",
    "DataDirInUse",
    "DecayPolicy",
    "DeliveryFailed",
    "EmbeddingError",
    "Event",
    "EventFilter",
    "EventKind",
    "FactResult",
    "Grant",
    "GraphPolicy",
    "HookFailed",
    "Inbox",
    "IndexUnavailable",
    "Inspection",
    "InvalidMemory",
    "InvalidRequest",
    "Level",
    "ManualClock",
    "MemoryBus",
    "MemoryBusError",
    "MemoryKind",
    "MemoryNode",
    "MemoryNotFound",
    "MemoryPage",
    "MemoryStatus",
    "NotAuthenticated",
    "NotAuthorized",
    "OperationTimeout",
    "OutcomeUnknown",
    "PartialWrite",
    "RankingWeights",
    "RecallHit",
    "RecallOptions",
    "Scope",
    "ScopeViolation",
    "StoreMismatch",
    "StoreUnavailable",
    "Strategy",
    "Subscription",
    "SystemClock",
    "Unavailable",
    "VersionConflict",
    "connect",
    "derived_id",
    "new_id",
    "salience",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memorybus' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:
    from memorybus.auth import Grant
    from memorybus.bus.conflicts import Strategy
    from memorybus.client import MemoryBus, connect
    from memorybus.client.subscriptions import Inbox, Subscription
    from memorybus.clock import Clock, ManualClock, SystemClock
    from memorybus.config import BusPolicy, Config, ConsolidationPolicy, DecayPolicy, GraphPolicy, RankingWeights
    from memorybus.errors import (
        ActorFailed,
        ActorUnavailable,
        BusClosed,
        ConfigError,
        DataDirInUse,
        DeliveryFailed,
        EmbeddingError,
        HookFailed,
        IndexUnavailable,
        InvalidMemory,
        InvalidRequest,
        MemoryBusError,
        MemoryNotFound,
        NotAuthenticated,
        NotAuthorized,
        OperationTimeout,
        OutcomeUnknown,
        PartialWrite,
        ScopeViolation,
        StoreMismatch,
        StoreUnavailable,
        Unavailable,
        VersionConflict,
    )
    from memorybus.memory.events import Event, EventFilter, EventKind
    from memorybus.memory.ids import derived_id, new_id
    from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus
    from memorybus.prompt import ContextBlock
    from memorybus.retrieval import RecallHit, RecallOptions
    from memorybus.salience import salience
    from memorybus.scopes import Context, Level, Scope
    from memorybus.shard import FactResult
    from memorybus.views import Inspection, MemoryPage
