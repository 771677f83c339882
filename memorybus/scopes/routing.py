"""Routing of scopes to shards: scope key -> bucket -> shard.

A scope key hashes to one of 65,536 *buckets* (:func:`bucket_of`); each bucket is
owned by exactly one shard, chosen by rendezvous (highest-random-weight)
hashing: the shard whose hash with the bucket is highest. When the number of
shards changes from N to M, a bucket moves only if its winner among the new set
differs (for growth: only buckets whose new winner is an added shard), and all
scopes of a bucket move together.

Memory ids carry their scope's bucket (:mod:`memorybus.memory.ids`), so an id routes
to the same shard as its scope: the one shard that may hold it.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence

BUCKETS = 1 << 16
#: the UUID version field of a memory id that carries its bucket (see :mod:`memorybus.memory.ids`)
ID_VERSION = 8


def shard_name(index: int) -> str:
    return f"shard-{index}"


def bucket_of(scope_key: str) -> int:
    """The routing bucket of a scope key (16 bits of its hash)."""
    return int.from_bytes(hashlib.blake2b(scope_key.encode(), digest_size=2).digest(), "big")


def bucket_of_id(memory_id: str) -> int | None:
    """The routing bucket a memory id carries (its first 16 bits), or None for an id
    that carries none (not a version-8 UUID in canonical form)."""
    if not isinstance(memory_id, str) or len(memory_id) != 36:
        return None
    try:
        u = uuid.UUID(memory_id)
    except ValueError:
        return None
    if u.version != ID_VERSION or str(u) != memory_id.lower():
        return None
    return int.from_bytes(u.bytes[:2], "big")


def _weight(key: str, shard: str) -> int:
    digest = hashlib.blake2b(f"{shard}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(key: str, shards: Sequence[str]) -> str:
    """The shard owning ``key`` among ``shards`` (which must not be empty)."""
    if not shards:
        raise ValueError("no shards to route to")
    return max(shards, key=lambda s: (_weight(key, s), s))


class Router:
    """Routes scope keys (and memory ids) to ``num_shards`` shards named
    ``shard-0 .. shard-{n-1}``."""

    def __init__(self, num_shards: int) -> None:
        if num_shards < 1:
            raise ValueError("num_shards must be >= 1")
        self.num_shards = num_shards
        self.shards = [shard_name(i) for i in range(num_shards)]
        self._index = {name: i for i, name in enumerate(self.shards)}
        self._of_bucket: dict[int, int] = {}

    def shard_of_bucket(self, bucket: int) -> int:
        shard = self._of_bucket.get(bucket)
        if shard is None:
            shard = self._of_bucket[bucket] = self._index[owner(f"bucket:{bucket}", self.shards)]
        return shard

    def shard_for(self, scope_key: str) -> int:
        return self.shard_of_bucket(bucket_of(scope_key))

    def shard_for_id(self, memory_id: str) -> int | None:
        """The one shard that may hold ``memory_id``; None for an id that carries no
        bucket (written before ids did: any shard may hold it)."""
        bucket = bucket_of_id(memory_id)
        return None if bucket is None else self.shard_of_bucket(bucket)

    def group(self, scope_keys: Iterable[str]) -> dict[int, list[str]]:
        """Scope keys grouped by owning shard index."""
        out: dict[int, list[str]] = {}
        for key in scope_keys:
            out.setdefault(self.shard_for(key), []).append(key)
        return out
