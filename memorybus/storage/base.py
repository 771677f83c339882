"""The durable store contract.

A :class:`Store` holds the records of one memory shard. It is the source of
truth: every index is derived from it. All writes go through :meth:`Store.commit`,
which applies a :class:`WriteBatch` atomically (all operations or none) and is
durable when it returns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from memorybus.model import MemoryNode


@dataclass(slots=True)
class WriteBatch:
    """Operations applied together by :meth:`Store.commit`.

    - ``puts``: new nodes, stored with the version they carry (normally 1). A put
      whose id already exists with an identical record is a no-op (so a retried
      write is idempotent); with a different record it is a conflict.
    - ``updates``: ``(node, expected_version)``; stored only if the current
      version equals ``expected_version``; ``node.version`` must be
      ``expected_version + 1``. Scope and key of a node never change.
    - ``deletes``: ``(id, expected_version)``; ``None`` deletes any version.
    """

    puts: list[MemoryNode] = field(default_factory=list)
    updates: list[tuple[MemoryNode, int]] = field(default_factory=list)
    deletes: list[tuple[str, int | None]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.puts or self.updates or self.deletes)

    def ids(self) -> list[str]:
        return [n.id for n in self.puts] + [n.id for n, _ in self.updates] + [i for i, _ in self.deletes]


@runtime_checkable
class Store(Protocol):
    """Durable records of one shard. Implementations: SqliteStore, RedisStore."""

    backend: str

    def commit(self, batch: WriteBatch) -> None:
        """Apply ``batch`` atomically and durably.

        Raises VersionConflict (nothing applied) when an update or delete finds
        another version, or a put finds a different record under its id;
        MemoryNotFound when an update or delete names a missing id;
        StoreUnavailable when the backend fails.
        """
        ...

    def get(self, memory_id: str) -> MemoryNode | None: ...

    def get_many(self, ids: Sequence[str]) -> list[MemoryNode | None]: ...

    def list_by_scope(self, scope_key: str) -> list[MemoryNode]: ...

    def find_by_key(self, scope_key: str, key: str) -> list[MemoryNode]:
        """Every version-slot holder of a keyed fact in a scope (any status)."""
        ...

    def iter_all(self, batch_size: int = 1000) -> Iterator[MemoryNode]:
        """Every record, for rebuilding indexes. Order unspecified."""
        ...

    def touch(self, stats: Mapping[str, tuple[int, float]]) -> None:
        """Add access counts and raise last_accessed: ``{id: (count, when)}``.

        Access statistics are not versioned; ids that no longer exist are ignored.
        """
        ...

    def count(self) -> int: ...

    def clear(self) -> None:
        """Delete every record of this shard (tests and tooling)."""
        ...

    def close(self) -> None: ...
