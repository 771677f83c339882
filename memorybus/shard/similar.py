"""What a new memory repeats or contradicts among those its shard holds.

Read-only checks over a shard's parts (:class:`~memorybus.shard.core.ShardCore`):
the content-hash map of its records and its vector index, within the new memory's
scope (the shard owns the scope, so no other writer races with the check).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memorybus.bus.conflicts import is_contradiction
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus

if TYPE_CHECKING:
    from memorybus.config import BusPolicy
    from memorybus.shard.core import ShardCore

#: kinds that state facts (episodic memories record events: two events never contradict)
FACT_KINDS = (MemoryKind.SEMANTIC, MemoryKind.PROCEDURAL)


def same_event(policy: BusPolicy, node: MemoryNode, other: MemoryNode) -> bool:
    """Whether two episodic memories with the same words in the same scope record one
    event. Both must be in the same thread: the scope (it carries the session) and,
    when declared, the same conversation thread, position and speaker (turns at two
    positions of a thread are two turns). Then: the same event time, or both undated
    (event time = write time) and written within ``BusPolicy.repeat_window_seconds``
    of each other (an accidental repeat, such as a job run twice).
    """
    if (node.thread, node.position, node.speaker) != (other.thread, other.position, other.speaker):
        return False
    if other.valid_from == node.valid_from:
        return True
    undated = node.valid_from == node.created_at and other.valid_from == other.created_at
    return undated and abs(node.created_at - other.created_at) <= policy.repeat_window_seconds


def duplicate_of(core: ShardCore, node: MemoryNode) -> MemoryNode | None:
    """An existing memory this new one duplicates, in the same scope."""
    for other in core.records.twins(node):
        if other.kind is not node.kind:
            continue
        if node.kind is MemoryKind.EPISODIC and not same_event(core.policy, node, other):
            continue  # the same words said at another time or turn are another event
        if other.status in (MemoryStatus.ACTIVE, MemoryStatus.CONSOLIDATED):
            return other
    if node.kind in FACT_KINDS and node.embedding is not None:
        for other_id, cosine in core.index.search(
            node.embedding, 1, scope_keys=[node.scope.key], kinds=[node.kind], statuses=[MemoryStatus.ACTIVE]
        ):
            near = core.nodes.get(other_id)
            if cosine >= core.policy.near_duplicate and near is not None:
                if core.detect_contradictions and is_contradiction(node, near, core.judge):
                    return None  # nearly the same words, a different claim: keep both
                return near
    return None


def contradicted(core: ShardCore, node: MemoryNode) -> list[str]:
    """Similar facts in the same scope that this one contradicts (none when the shard
    does not detect contradictions)."""
    if not core.detect_contradictions or node.embedding is None or node.kind not in FACT_KINDS:
        return []
    found = []
    for other_id, cosine in core.index.search(
        node.embedding, 5, scope_keys=[node.scope.key], statuses=[MemoryStatus.ACTIVE]
    ):
        other = core.nodes.get(other_id)
        if other is None or cosine < core.policy.contradiction or other.id == node.id:
            continue
        if other.kind not in FACT_KINDS:
            continue
        if other.key and node.key and other.key == node.key:
            continue  # keyed facts are resolved by assert_fact, not flagged
        if is_contradiction(node, other, core.judge):
            found.append(other_id)
    return found
