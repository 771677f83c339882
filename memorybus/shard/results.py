"""What a shard's fact calls answer; a leaf module (imports only the memory model), so
the op log (:mod:`memorybus.shard.ops`) can encode answers without importing the calls."""

from __future__ import annotations

from dataclasses import dataclass

from memorybus.memory.model import MemoryNode


@dataclass(slots=True)
class FactResult:
    """What :meth:`Shard.assert_fact` did: the node written (or reinforced), whether
    it is now the current value, the previous current id, and the outcome
    (``created``, ``superseded``, ``rejected``, ``reinforced``)."""

    node: MemoryNode
    current: bool
    previous: str | None
    outcome: str
    fact_seq: int
    write_id: str = ""
