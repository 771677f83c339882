"""msgpack envelopes with a schema version: the one place that encodes records.

An envelope is ``{"v": SCHEMA_VERSION, "t": <type>, "d": <payload>}``. Decoding
rejects unknown schema versions and types rather than guessing.

Schema versions: 1, the original node record; 2 adds the optional conversation
fields ``thread``, ``position`` and ``speaker`` (a version-1 record reads with
them unset). Records are written at the newest version and read at any
version in :data:`READABLE_VERSIONS`.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from memorybus.errors import InvalidMemory
from memorybus.memory.model import MemoryKind, MemoryNode, MemoryStatus
from memorybus.scopes import Scope

SCHEMA_VERSION = 2
#: the envelope versions this code reads
READABLE_VERSIONS = (1, 2)
NODE = "node"


def _pack(kind: str, payload: dict[str, Any]) -> bytes:
    return msgpack.packb({"v": SCHEMA_VERSION, "t": kind, "d": payload}, use_bin_type=True)


def _unpack(blob: bytes, kind: str) -> dict[str, Any]:
    try:
        env = msgpack.unpackb(blob, raw=False, strict_map_key=True)
    except (ValueError, TypeError) as exc:  # msgpack's errors (ExtraData, FormatError, ...) are ValueErrors
        raise InvalidMemory("envelope", f"not a msgpack envelope: {exc}") from None
    if not isinstance(env, dict) or env.get("v") not in READABLE_VERSIONS or env.get("t") != kind:
        raise InvalidMemory("envelope", f"expected {kind!r} schema {READABLE_VERSIONS}, got {env!r:.80}")
    payload = env["d"]
    if not isinstance(payload, dict):
        raise InvalidMemory("envelope", "payload is not a map")
    return payload


def node_to_dict(node: MemoryNode, *, with_embedding: bool = True) -> dict[str, Any]:
    emb = node.embedding
    return {
        "id": node.id,
        "kind": MemoryKind(node.kind).value,
        "status": MemoryStatus(node.status).value,
        "version": node.version,
        "content": node.content,
        "structured": node.structured,
        "embedding": (np.asarray(emb, dtype="<f4").tobytes() if emb is not None and with_embedding else None),
        "key": node.key,
        "created_at": node.created_at,
        "last_accessed": node.last_accessed,
        "access_count": node.access_count,
        "decay_rate": node.decay_rate,
        "valid_from": node.valid_from,
        "valid_to": node.valid_to,
        "expires_at": node.expires_at,
        "scope": list(node.scope.as_tuple()),
        "parents": list(node.parents),
        "children": list(node.children),
        "related": list(node.related),
        "contradicts": list(node.contradicts),
        "confidence": node.confidence,
        "importance": node.importance,
        "source": node.source,
        "source_ids": list(node.source_ids),
        "tags": list(node.tags),
        "fact_seq": node.fact_seq,
        "thread": node.thread,
        "position": node.position,
        "speaker": node.speaker,
    }


def node_from_dict(d: dict[str, Any]) -> MemoryNode:
    """A stored node from its record. A record must carry its id: an empty one is
    refused (InvalidMemory), never given a fresh id (a record decoded twice would be
    two memories)."""
    if not isinstance(d, dict) or not isinstance(d.get("id"), str) or not d["id"]:
        raise InvalidMemory("id", "a stored record must carry a non-empty id")
    try:
        emb = d["embedding"]
        return MemoryNode(
            id=d["id"],
            kind=MemoryKind(d["kind"]),
            status=MemoryStatus(d["status"]),
            version=d["version"],
            content=d["content"],
            structured=d["structured"],
            embedding=None if emb is None else np.frombuffer(emb, dtype="<f4").astype(np.float32),
            key=d["key"],
            created_at=d["created_at"],
            last_accessed=d["last_accessed"],
            access_count=d["access_count"],
            decay_rate=d["decay_rate"],
            valid_from=d["valid_from"],
            valid_to=d["valid_to"],
            expires_at=d["expires_at"],
            scope=Scope(*d["scope"]),
            parents=tuple(d["parents"]),
            children=tuple(d["children"]),
            related=tuple(d["related"]),
            contradicts=tuple(d["contradicts"]),
            confidence=d["confidence"],
            importance=d["importance"],
            source=d["source"],
            source_ids=tuple(d["source_ids"]),
            tags=tuple(d["tags"]),
            fact_seq=d.get("fact_seq", 0),
            thread=d.get("thread"),  # schema 2; unset in version-1 records
            position=d.get("position"),
            speaker=d.get("speaker"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidMemory("envelope", f"malformed node record: {exc!r}") from None


def encode_node(node: MemoryNode, *, with_embedding: bool = True) -> bytes:
    """Encode a node (embedding as little-endian float32 bytes)."""
    return _pack(NODE, node_to_dict(node, with_embedding=with_embedding))


def decode_node(blob: bytes) -> MemoryNode:
    return node_from_dict(_unpack(blob, NODE))


def encode(kind: str, payload: dict[str, Any]) -> bytes:
    """Encode any other record type (events, checkpoints) in a versioned envelope."""
    return _pack(kind, payload)


def decode(blob: bytes, kind: str) -> dict[str, Any]:
    return _unpack(blob, kind)
