"""memorybus: a distributed memory bus for teams of LLM agents on Ray.

Public API::

    import memorybus
    bus = memorybus.connect(memorybus.Config.embedded("./data"))
    ctx = memorybus.Context(org="acme", user="u1", agent="planner")
    bus.remember("The user prefers Rust for backends", ctx, scope="user")
    hits = bus.recall("which language for the backend?", ctx)
"""

from memorybus.bus.conflicts import Strategy
from memorybus.client import MemoryBus, connect
from memorybus.client_list import MemoryPage
from memorybus.client_subs import Inbox, Subscription
from memorybus.clock import Clock, ManualClock, SystemClock
from memorybus.config import BusPolicy, Config, RankingWeights
from memorybus.errors import (
    ConfigError,
    DeliveryFailed,
    EmbeddingError,
    IndexUnavailable,
    InvalidMemory,
    InvalidRequest,
    MemoryBusError,
    MemoryNotFound,
    OperationTimeout,
    OutcomeUnknown,
    PartialWrite,
    ScopeViolation,
    StoreMismatch,
    StoreUnavailable,
    VersionConflict,
)
from memorybus.events import Event, EventFilter, EventKind
from memorybus.ids import derived_id, new_id
from memorybus.model import MemoryKind, MemoryNode, MemoryStatus, salience
from memorybus.retrieval import RecallHit, RecallOptions
from memorybus.scopes import Context, Level, Scope
from memorybus.shard import FactResult

__version__ = "0.1.0"

__all__ = [
    "BusPolicy",
    "Clock",
    "Config",
    "ConfigError",
    "Context",
    "DeliveryFailed",
    "EmbeddingError",
    "Event",
    "EventFilter",
    "EventKind",
    "FactResult",
    "Inbox",
    "IndexUnavailable",
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
    "VersionConflict",
    "connect",
    "derived_id",
    "new_id",
    "salience",
]
