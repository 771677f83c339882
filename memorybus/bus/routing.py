"""Which hub partition serves an org."""

from __future__ import annotations

import hashlib


def partition_of(org: str, partitions: int) -> int:
    digest = hashlib.blake2b(org.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % max(1, partitions)
