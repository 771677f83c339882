"""memorybus: a distributed memory bus for teams of LLM agents on Ray.

Public API::

    import memorybus
    bus = memorybus.connect(memorybus.Config.embedded("./data"))
    ctx = memorybus.Context(org="acme", user="u1", agent="planner")
    bus.remember("The user prefers Rust for backends", ctx, scope="user")
    hits = bus.recall("which language for the backend?", ctx)
"""

from memorybus.client import MemoryBus, connect
from memorybus.clock import Clock, ManualClock, SystemClock
from memorybus.config import Config, RankingWeights
from memorybus.errors import (
    ConfigError,
    EmbeddingError,
    IndexUnavailable,
    InvalidMemory,
    InvalidRequest,
    MemoryBusError,
    MemoryNotFound,
    ScopeViolation,
    StoreUnavailable,
    VersionConflict,
)
from memorybus.model import MemoryKind, MemoryNode, MemoryStatus, salience
from memorybus.retrieval import RecallHit
from memorybus.scopes import Context, Level, Scope

__version__ = "0.1.0"

__all__ = [
    "Clock",
    "Config",
    "ConfigError",
    "Context",
    "EmbeddingError",
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
    "MemoryStatus",
    "RankingWeights",
    "RecallHit",
    "Scope",
    "ScopeViolation",
    "StoreUnavailable",
    "SystemClock",
    "VersionConflict",
    "connect",
    "salience",
]
