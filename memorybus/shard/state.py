"""What the shard's mixins share: the state :class:`~memorybus.shard.Shard` holds,
declared for the type checker, and the content hash used for duplicate detection."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

T = TypeVar("T")

if TYPE_CHECKING:
    import numpy as np

    from memorybus.clock import Clock
    from memorybus.config import BusPolicy, GraphPolicy, RankingWeights
    from memorybus.conflicts import Judge
    from memorybus.events import Event, EventKind
    from memorybus.graph import TemporalGraph
    from memorybus.model import MemoryNode
    from memorybus.retrieval.reader import RecallReader
    from memorybus.scopes import Context
    from memorybus.shard.gate import Gate
    from memorybus.shard.index import SearchIndex
    from memorybus.shard.ops import OpCall
    from memorybus.storage.base import Store, WriteBatch


def _content_hash(node: MemoryNode) -> str:
    return hashlib.blake2b(node.content.strip().encode(), digest_size=12).hexdigest()


class _ShardState:
    """The attributes :meth:`Shard.__init__ <memorybus.shard.Shard>` sets and the helpers
    the mixins call on each other, declared (annotations only, nothing at run time)
    so that each mixin type-checks on its own."""

    name: str
    gate: Gate
    owns: Callable[[str], bool] | None
    store: Store
    index: SearchIndex
    dim: int
    clock: Clock
    ranking: RankingWeights
    max_content_chars: int
    max_tags: int
    max_structured_bytes: int
    touch_flush_seconds: float
    policy: BusPolicy
    on_events: Callable[[list[Event]], None] | None
    judge: Judge | None
    dedupe: bool
    detect_contradictions: bool
    _nodes: dict[str, MemoryNode]
    _hashes: dict[tuple[str, str], set[str]]
    _importance_since: dict[str, float]
    graph_policy: GraphPolicy
    graph: TemporalGraph
    _touches: dict[str, tuple[int, float]]
    _last_flush: float
    _first_touch: float
    _recall: RecallReader

    if TYPE_CHECKING:
        # core.Shard
        def _check_context(self, context: object) -> Context: ...

        def _visible(self, node: MemoryNode, context: Context, action: str) -> None: ...

        def _validate(self, node: MemoryNode) -> MemoryNode: ...

        def _check_id(self, node: MemoryNode) -> None: ...

        def _prepare_new(
            self, node: MemoryNode, vector: np.ndarray | None, context: Context, now: float
        ) -> MemoryNode: ...

        # ops.OpsMixin
        def _op_call(self, method: str, owner: Context | str, op: str | None) -> OpCall: ...

        def _commit_op(
            self, call: OpCall, batch: WriteBatch, events: Sequence[Event], result: T, apply: Callable[[], None]
        ) -> T: ...

        def _settle(self, *, strict: bool = True) -> None: ...

        def _recorded(self, call: OpCall) -> tuple[bool, Any]: ...

        # core.Shard
        def _reading(self) -> None: ...

        def _touch(self, ids: Sequence[str], now: float) -> None: ...

        def flush(self) -> int: ...

        # writes.WritesMixin

        def _event(self, kind: EventKind, node: MemoryNode, context: Context, now: float, **data: Any) -> Event: ...

        def _contradicted(self, node: MemoryNode) -> list[str]: ...

        def _remember_local(self, node: MemoryNode) -> None: ...

        def _forget_local(self, memory_id: str) -> None: ...

        # facts.FactsMixin
        def _is_authority(self, context: Context) -> bool: ...
