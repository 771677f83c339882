"""Signed checkpoints: a chain's head (count and hash) signed with an HMAC key.

A checkpoint is kept apart from the log (its own table or key). Cutting entries off
the end of a chain leaves a shorter chain that is valid on its own; a checkpoint
that says the chain had reached seq N with hash H shows the cut. Without the key a
checkpoint cannot be forged, so an attacker who can rewrite the store can at most
delete checkpoints (keep copies elsewhere, e.g. the export of ``memorybus audit export``).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

import msgpack

from memorybus.errors import InvalidRequest

#: checkpoints a store keeps per org (the newest; only the newest is needed to catch a
#: cut tail or a chain re-hashed from some entry on)
KEEP_CHECKPOINTS = 100


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """``org``'s chain had ``seq`` entries, the last with hash ``hash``, at time ``at``."""

    org: str
    seq: int
    hash: str
    at: float
    sig: str

    def to_dict(self) -> dict[str, object]:
        return {"org": self.org, "seq": self.seq, "hash": self.hash, "at": self.at, "sig": self.sig}


def _message(org: str, seq: int, digest: str, at: float) -> bytes:
    return msgpack.packb(["memorybus-audit-checkpoint", 1, org, int(seq), digest, float(at)], use_bin_type=True)


def check_key(key: object) -> bytes:
    if not isinstance(key, bytes | bytearray) or len(key) < 16:
        raise InvalidRequest("audit key", "must be bytes, at least 16 of them")
    return bytes(key)


def sign(key: bytes, org: str, seq: int, digest: str, at: float) -> Checkpoint:
    """A checkpoint of ``org``'s head ``(seq, digest)`` signed with ``key``."""
    mac = hmac.new(check_key(key), _message(org, seq, digest, at), hashlib.sha256).hexdigest()
    return Checkpoint(org, int(seq), digest, float(at), mac)


def authentic(key: bytes, cp: Checkpoint) -> bool:
    """Whether ``cp`` was signed with ``key`` and not changed since."""
    mac = hmac.new(check_key(key), _message(cp.org, cp.seq, cp.hash, cp.at), hashlib.sha256).hexdigest()
    return hmac.compare_digest(mac, cp.sig)


def encode_checkpoint(cp: Checkpoint) -> bytes:
    return msgpack.packb([cp.org, cp.seq, cp.hash, cp.at, cp.sig], use_bin_type=True)


def decode_checkpoint(blob: bytes) -> Checkpoint | None:
    """The checkpoint, or None when its bytes do not decode (counted as forged)."""
    try:
        org, seq, digest, at, sig = msgpack.unpackb(blob, raw=False)
        return Checkpoint(str(org), int(seq), str(digest), float(at), str(sig))
    except (ValueError, TypeError):
        return None
