"""A recall's request and hits as one byte string each, between a client and a shard.

Ray serialises every argument and result of an actor call on its own, at a fixed
cost per object, and a numpy vector costs more than bytes. A recall therefore
travels as one ``bytes`` argument (the request, with the query vector as
float32 bytes when the caller has it) and one ``bytes`` result (the hits):
measured on a 2-core machine, 0.6-0.9 ms less per recall than a tuple of
objects and an array each way.

**The request is data, never code.** It is a versioned msgpack map with a fixed
schema (:data:`VERSION`): ``v``, ``ctx`` (``org``, ``user``, ``agent``,
``session``, ``roles``, ``credential``), ``k``, ``kinds``, ``statuses``, ``q``,
``opt`` (every field of :class:`~memorybus.retrieval.RecallOptions` as a plain
value, or nil) and ``vec`` (float32 bytes, or nil). :func:`unpack_request` reads
nothing but that schema: every key must be there and no other, every value of
its type and within its size, else :class:`~memorybus.errors.InvalidRequest`.
Nothing on the request path unpickles: a shard reads the same bytes from a Ray
call and from its direct channel (see :mod:`memorybus.actors.direct`), whoever
sent them. The credential inside is checked by the shard (``Gatekeeper.admit``),
as for every other call.

**The hits are pickled** (:func:`pack_hits`): only the client unpickles them, and
only from the shard actor it called (through Ray, or over the channel whose
address that actor gave it): the trusted side writes them, a shard never reads
them.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import msgpack
import numpy as np

from memorybus.auth.credential import MAX_CREDENTIAL
from memorybus.errors import InvalidRequest
from memorybus.memory.model import MemoryKind, MemoryStatus
from memorybus.retrieval.hits import RecallHit
from memorybus.retrieval.options import RecallOptions
from memorybus.scopes import Context
from memorybus.validation import is_text

#: the request format's version (the ``v`` key); another version is refused
VERSION = 1
#: the largest packed request a shard reads (a recall is a few KB; a query is at most
#: ``Config.max_content_chars`` characters, checked by the shard)
MAX_PACKED = 8 << 20
#: the largest query vector (float32 bytes: 16,384 dimensions)
MAX_VECTOR = 64 << 10
_MAX_LIST = 64
_MAX_PREFIX = 4096
_TOP = frozenset({"v", "ctx", "k", "kinds", "statuses", "q", "opt", "vec"})
_CTX = frozenset({"org", "user", "agent", "session", "roles", "credential"})
_OPT_FIELDS = tuple(f.name for f in fields(RecallOptions))
_TIMES = ("start", "end", "as_of", "reference_time", "min_relevance")
_INTS = ("neighbors", "neighbor_budget", "relations", "relation_budget")


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
    """``request`` as a versioned msgpack map (see the module docstring)."""
    c = request.context
    opt = None if request.options is None else {n: getattr(request.options, n) for n in _OPT_FIELDS}
    return msgpack.packb({
        "v": VERSION,
        "ctx": {"org": c.org, "user": c.user, "agent": c.agent, "session": c.session,
                "roles": sorted(c.roles), "credential": c.credential},
        "k": request.k,
        "kinds": None if request.kinds is None else [MemoryKind(x).value for x in request.kinds],
        "statuses": None if request.statuses is None else [MemoryStatus(x).value for x in request.statuses],
        "q": request.query,
        "opt": opt,
        "vec": None if request.vector is None else bytes(request.vector),
    }, use_bin_type=True)  # fmt: skip


def _bad(field: str, reason: str) -> InvalidRequest:
    return InvalidRequest(f"request.{field}", reason)


def _map(value: object, keys: frozenset[str], field: str) -> dict[str, Any]:
    if not isinstance(value, dict) or set(value) != keys:
        raise _bad(field, f"must be a map of exactly {sorted(keys)}")
    return value


def _names(value: object, enum: type[MemoryKind] | type[MemoryStatus], field: str) -> list[Any] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > _MAX_LIST or not all(isinstance(v, str) for v in value):
        raise _bad(field, f"must be a list of at most {_MAX_LIST} names or nil")
    try:
        return [enum(v) for v in value]
    except ValueError:
        raise _bad(field, f"names an unknown {enum.__name__}") from None


def _context(value: object) -> Context:
    ctx = _map(value, _CTX, "ctx")
    roles, credential = ctx["roles"], ctx["credential"]
    if not isinstance(roles, list) or len(roles) > _MAX_LIST or not all(isinstance(r, str) for r in roles):
        raise _bad("ctx.roles", f"must be a list of at most {_MAX_LIST} strings")
    if not isinstance(credential, str) or len(credential) > MAX_CREDENTIAL:
        raise _bad("ctx.credential", "must be a credential string")
    # Context checks each scope field's type, length and text, and the roles
    return Context(ctx["org"], ctx["user"], ctx["agent"], ctx["session"], frozenset(roles), credential)


def _options(value: object) -> RecallOptions | None:
    if value is None:
        return None
    opt = _map(value, frozenset(_OPT_FIELDS), "opt")
    for name in _TIMES:
        v = opt[name]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)):
            raise _bad(f"opt.{name}", "must be a finite number or nil")
    for name in _INTS:
        if isinstance(opt[name], bool) or not isinstance(opt[name], int):
            raise _bad(f"opt.{name}", "must be an int")
    if not isinstance(opt["touch"], bool):
        raise _bad("opt.touch", "must be a bool")
    prefix = opt["key_prefix"]
    if prefix is not None and (not is_text(prefix) or len(prefix) > _MAX_PREFIX):
        raise _bad("opt.key_prefix", f"must be text of at most {_MAX_PREFIX} characters or nil")
    return RecallOptions(**opt).validate()


def unpack_request(blob: object) -> RecallRequest:
    """The request packed in ``blob``; InvalidRequest when it is anything else (not
    msgpack, another version, a missing or extra key, a value of the wrong type or
    size). Runs no code of the sender's: msgpack yields plain values only."""
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise InvalidRequest("request", "must be a packed recall request")
    if len(blob) > MAX_PACKED:
        raise InvalidRequest("request", f"is larger than {MAX_PACKED} bytes")
    try:
        top = msgpack.unpackb(blob, raw=False, strict_map_key=True, use_list=True, max_ext_len=0,
                              max_array_len=_MAX_LIST, max_map_len=32)  # fmt: skip
    except (ValueError, TypeError, msgpack.UnpackException):
        raise InvalidRequest("request", "is not a packed recall request") from None
    if not isinstance(top, dict) or top.get("v") != VERSION:
        raise InvalidRequest("request", f"is not a packed recall request (version {VERSION})")
    top = _map(top, _TOP, "request")
    k, query, vec = top["k"], top["q"], top["vec"]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise _bad("k", "must be an int between 1 and 1000")
    if query is not None and not is_text(query):
        raise _bad("q", "must be text or nil")
    if vec is not None and (not isinstance(vec, bytes) or not vec or len(vec) % 4 or len(vec) > MAX_VECTOR):
        raise _bad("vec", f"must be float32 bytes (at most {MAX_VECTOR}) or nil")
    kinds, statuses = _names(top["kinds"], MemoryKind, "kinds"), _names(top["statuses"], MemoryStatus, "statuses")
    return RecallRequest(_context(top["ctx"]), k, kinds, statuses, query, _options(top["opt"]), vec)


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
    """The hits for the client (pickled: the shard writes them, only the client reads them)."""
    return pickle.dumps(hits, protocol=pickle.HIGHEST_PROTOCOL)


def unpack_hits(blob: bytes) -> list[RecallHit]:
    """The hits a shard actor answered (the client's side only: see the module docstring)."""
    hits: list[RecallHit] = pickle.loads(blob)
    return hits
