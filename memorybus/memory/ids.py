"""Memory ids: UUIDs that carry the routing bucket of their memory's scope.

Scopes route to shards by *bucket*: a 16-bit hash of the scope key
(:func:`memorybus.scopes.routing.bucket_of`), and rendezvous hashing of buckets
over shards. A memory id is a UUID (RFC 9562 version 8) whose first 16 bits are
its scope's bucket; the other bits are random (:func:`new_id`) or derived from a
scope and a name (:func:`derived_id`, deterministic).

What this guarantees:

- An id names the one shard that may hold it (the shard owning its bucket), so
  ``get``/``update``/``forget``/``broadcast`` by id ask exactly one shard and touch
  at most one memory.
- Every shard refuses a new memory whose id does not carry its scope's bucket, or
  whose scope it does not own. So two memories with one id would have to live in
  the same shard, whose store refuses the second: ids are unique across shards,
  whoever chose them (the bus, or a caller keeping ids on import).
- A caller may choose an id (``remember(..., id=...)``, or a ``MemoryNode`` item):
  it must be one of its memory's scope (``new_id(scope)``, ``derived_id(scope,
  name)``, or an id exported from that scope). Re-importing a memory into the same
  scope keeps its id; moving it to another scope needs a new id.
- An id reveals its scope's bucket (one of 65,536), nothing else.

Ids of other UUID versions (stores written before ids carried buckets) are still
read: a call by such an id asks every shard and acts only if exactly one holds it.
"""

from __future__ import annotations

import hashlib
import os
import uuid

from memorybus.scopes import Scope
from memorybus.scopes.routing import ID_VERSION as VERSION
from memorybus.scopes.routing import bucket_of, bucket_of_id


def _with_bucket(raw: bytes, bucket: int) -> str:
    b = bytearray(raw[:16])
    b[0], b[1] = bucket >> 8, bucket & 0xFF
    b[6] = (b[6] & 0x0F) | (VERSION << 4)
    b[8] = (b[8] & 0x3F) | 0x80  # the RFC 4122/9562 variant
    return str(uuid.UUID(bytes=bytes(b)))


def new_id(scope: Scope | None = None) -> str:
    """A fresh random id for a memory of ``scope`` (106 random bits). Without a scope:
    a random UUID4, which no shard accepts for a new memory (kept for callers that need
    a unique string that is not a memory id)."""
    if scope is None:
        return str(uuid.uuid4())
    return _with_bucket(os.urandom(16), bucket_of(scope.key))


def derived_id(scope: Scope, name: str) -> str:
    """The id named ``name`` in ``scope``: the same scope and name always give the same
    id (for upserts keyed by a name, idempotent derived memories)."""
    digest = hashlib.blake2b(f"{scope.key}\x00{name}".encode(), digest_size=16).digest()
    return _with_bucket(digest, bucket_of(scope.key))


def fits(memory_id: str, scope: Scope) -> bool:
    """Whether ``memory_id`` may name a memory of ``scope``: it carries its bucket, in
    the canonical form (lower case, hyphens), so one UUID never gives two ids."""
    return bucket_of_id(memory_id) == bucket_of(scope.key) and memory_id == memory_id.lower()
