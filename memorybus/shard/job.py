"""The base of the shard's jobs: a group of its calls over its core."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memorybus.shard.core import ShardCore


class Job:
    """A group of a shard's calls (writes, facts, decay, ...) over the
    :class:`~memorybus.shard.core.ShardCore` they share: its parts and checks."""

    def __init__(self, core: ShardCore) -> None:
        self.core = core
