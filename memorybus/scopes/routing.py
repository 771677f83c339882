"""Rendezvous (highest-random-weight) routing of scope keys to shards.

Each scope key is owned by exactly one shard: the one whose hash with the key
is highest. When the number of shards changes from N to M, a key moves only if
its winner among the new set differs — for growth, only keys whose new winner
is one of the added shards move.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence


def shard_name(index: int) -> str:
    return f"shard-{index}"


def _weight(key: str, shard: str) -> int:
    digest = hashlib.blake2b(f"{shard}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(key: str, shards: Sequence[str]) -> str:
    """The shard owning ``key`` among ``shards`` (which must not be empty)."""
    if not shards:
        raise ValueError("no shards to route to")
    return max(shards, key=lambda s: (_weight(key, s), s))


class Router:
    """Routes scope keys to ``num_shards`` shards named ``shard-0 .. shard-{n-1}``."""

    def __init__(self, num_shards: int) -> None:
        if num_shards < 1:
            raise ValueError("num_shards must be >= 1")
        self.num_shards = num_shards
        self.shards = [shard_name(i) for i in range(num_shards)]
        self._index = {name: i for i, name in enumerate(self.shards)}

    def shard_for(self, scope_key: str) -> int:
        return self._index[owner(scope_key, self.shards)]

    def group(self, scope_keys: Iterable[str]) -> dict[int, list[str]]:
        """Scope keys grouped by owning shard index."""
        out: dict[int, list[str]] = {}
        for key in scope_keys:
            out.setdefault(self.shard_for(key), []).append(key)
        return out
