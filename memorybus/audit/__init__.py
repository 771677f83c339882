"""The audit trail: per (org, shard), an append-only, hash-chained log of who read and
wrote which memories, with signed checkpoints of its head (pure Python: no store, no Ray).

- :mod:`.chain`: entries (ids and content hashes, never content), their canonical
  encoding and chaining, and :func:`principal_of` (who a caller is).
- :mod:`.checkpoint`: HMAC-signed chain heads, kept apart from the log.
- :mod:`.verify`: :func:`verify` names the first bad seq and why.

Where the chains live: each shard's store (``Store.read_audit`` and friends); the
shard writes them (:mod:`memorybus.shard.auditing`).
"""

from memorybus.audit.chain import (
    GENESIS,
    Draft,
    Entry,
    UnreadableEntryError,
    chain,
    content_digest,
    decode_entry,
    encode_entry,
    principal_of,
)
from memorybus.audit.checkpoint import Checkpoint, authentic, decode_checkpoint, encode_checkpoint, sign
from memorybus.audit.verify import Report, verify

__all__ = [
    "GENESIS",
    "Checkpoint",
    "Draft",
    "Entry",
    "Report",
    "UnreadableEntryError",
    "authentic",
    "chain",
    "content_digest",
    "decode_checkpoint",
    "decode_entry",
    "encode_checkpoint",
    "encode_entry",
    "principal_of",
    "sign",
    "verify",
]
