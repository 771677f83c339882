"""A recall's request and hits as one byte string each, between a client and a shard.

Ray serialises every argument and result of an actor call on its own, at a fixed
cost per object, and a numpy vector costs more than bytes. A recall therefore
travels as one ``bytes`` argument (the request, with the query vector as
float32 bytes when the caller has it) and one ``bytes`` result (the hits):
measured on a 2-core machine, 0.6-0.9 ms less per recall than a tuple of
objects and an array each way. The format is the standard library's pickle, the
same trust Ray already places in its peers (its own serialiser is pickle): it is
never read from anything but a Ray call or a shard actor's direct channel, which
serves only processes of the actor's own user (see :mod:`memorybus.actors.direct`).

A blob that does not unpack as a request (truncated, another type, a vector of
the wrong size) is an :class:`~memorybus.errors.InvalidRequest`.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memorybus.errors import InvalidRequest
from memorybus.model import MemoryKind, MemoryStatus
from memorybus.retrieval.hits import RecallHit
from memorybus.retrieval.options import RecallOptions
from memorybus.scopes import Context


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """What a shard needs to answer a recall (see :meth:`memorybus.shard.Shard.search`)."""

    context: Context
    k: int
    kinds: Sequence[MemoryKind] | None
    statuses: Sequence[MemoryStatus] | None
    query: str | None
    options: RecallOptions | None
    #: the query's vector rows as float32 bytes (the rows of
    #: :func:`~memorybus.retrieval.query.query_texts`), or None when they travel beside the request
    vector: bytes | None = None


def pack_request(request: RecallRequest) -> bytes:
    return pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)


def unpack_request(blob: object) -> RecallRequest:
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise InvalidRequest("request", "must be a packed recall request")
    try:
        request = pickle.loads(blob)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError, TypeError, ValueError):
        raise InvalidRequest("request", "is not a packed recall request") from None
    if not isinstance(request, RecallRequest):
        raise InvalidRequest("request", "is not a packed recall request")
    return request


def vector_bytes(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).reshape(-1).tobytes()


def query_vector(request: RecallRequest, beside: Any = None) -> np.ndarray:
    """The query vector: the request's bytes, else the one passed beside it (an array)."""
    if request.vector is not None:
        if not isinstance(request.vector, bytes) or len(request.vector) % 4:
            raise InvalidRequest("vector", "must be float32 bytes")
        return np.frombuffer(request.vector, dtype=np.float32)
    if beside is None:
        raise InvalidRequest("vector", "is missing")
    return np.asarray(beside)


def pack_hits(hits: list[RecallHit]) -> bytes:
    return pickle.dumps(hits, protocol=pickle.HIGHEST_PROTOCOL)


def unpack_hits(blob: bytes) -> list[RecallHit]:
    hits: list[RecallHit] = pickle.loads(blob)
    return hits
