"""The memory node, its kinds and statuses, and its validation.

A :class:`MemoryNode` is plain data. It never talks to a backend. Salience (the
forgetting curve) lives in :mod:`memorybus.salience`; its names are re-exported here.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

import msgpack
import numpy as np

from memorybus.errors import InvalidMemory
from memorybus.memory import ids
from memorybus.scopes import Scope
from memorybus.validation import check_time, is_text

DEFAULT_MAX_CONTENT_CHARS = 16_000
#: limits on what a caller may attach to one memory (``Config`` sets the bus's own)
DEFAULT_MAX_TAGS = 64
DEFAULT_MAX_STRUCTURED_BYTES = 65_536
MAX_TAG_CHARS = 256


class MemoryKind(StrEnum):
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    WORKING = "working"


class MemoryStatus(StrEnum):
    ACTIVE = "active"
    CONSOLIDATED = "consolidated"
    DEPRECATED = "deprecated"
    ARCHIVED = "archived"


def new_id(scope: Scope | None = None) -> str:
    """A fresh memory id for ``scope`` (see :mod:`memorybus.memory.ids`; a UUID string, also a
    valid vector-index point id)."""
    return ids.new_id(scope)


def broadcast_copy_id(original_id: str, target: Scope) -> str:
    """The id of the broadcast copy of ``original_id`` in the wider scope ``target``:
    derived (an id of ``target``, see :func:`memorybus.memory.ids.derived_id`), so
    broadcasting twice yields one copy and a copy is recognisable."""
    from memorybus.memory.ids import derived_id

    return derived_id(target, f"broadcast:{original_id}")


def broadcast_origin(node: MemoryNode) -> str | None:
    """The id of the memory ``node`` is a broadcast copy of, or None for an original."""
    if not node.parents:
        return None
    try:
        return node.parents[0] if broadcast_copy_id(node.parents[0], node.scope) == node.id else None
    except ValueError:
        return None


RELATION_FIELDS = ("parents", "children", "related", "contradicts", "source_ids")


@dataclass(slots=True, eq=False)
class MemoryNode:
    """One memory.

    ``version`` is bumped by every write of the node's content or metadata and is
    the basis of compare-and-set.

    Conversation structure is optional and declared: ``thread`` (the conversation,
    or one session of it, the memory belongs to), ``position`` (its turn index in
    the thread; needs ``thread``) and ``speaker`` (a person's name or an agent id
    such as ``agent:planner``). Recall orders a thread by ``(valid_from,
    position, created_at, id)``, lets a turn inherit part of its neighbours'
    relevance and matches speakers named in a query; a memory without them is
    ranked on its content, time and epistemic fields alone. Nothing is ever
    inferred from ``structured``. ``access_count`` and ``last_accessed`` are
    access statistics: they are stored beside the node but are not versioned
    (recall does not conflict with writers).
    """

    content: str
    scope: Scope
    id: str = ""  # set from the scope when not given: a fresh id carrying its bucket
    kind: MemoryKind = MemoryKind.EPISODIC
    status: MemoryStatus = MemoryStatus.ACTIVE
    version: int = 0
    structured: dict[str, Any] = field(default_factory=dict)
    embedding: np.ndarray | None = None
    key: str | None = None
    created_at: float = 0.0
    last_accessed: float = 0.0
    access_count: int = 0
    decay_rate: float = 0.05
    valid_from: float = 0.0
    valid_to: float | None = None
    expires_at: float | None = None
    parents: tuple[str, ...] = ()
    children: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    contradicts: tuple[str, ...] = ()
    confidence: float = 1.0
    importance: float = 5.0
    source: str = ""
    source_ids: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    #: position of this node in the history of its keyed fact (0: not written as a fact)
    fact_seq: int = 0
    # conversation structure (optional, declared by the writer, never inferred):
    #: the conversation thread (or session of a conversation) the memory belongs to
    thread: str | None = None
    #: its position in the thread (turn index); orders turns that share an event time
    position: int | None = None
    #: who said or wrote it: a person's name or an agent id such as ``agent:planner``
    speaker: str | None = None

    def __post_init__(self) -> None:
        if not self.id and isinstance(self.scope, Scope):
            self.id = ids.new_id(self.scope)

    # ------------------------------------------------------------------ helpers
    def stamped(self, now: float | None = None) -> MemoryNode:
        """A copy whose unset times (0.0) are filled with ``now``."""
        now = time.time() if now is None else now
        return evolve(
            self,
            created_at=self.created_at or now,
            last_accessed=self.last_accessed or self.created_at or now,
            valid_from=self.valid_from or self.created_at or now,
        )

    def copy(self, **changes: Any) -> MemoryNode:
        return evolve(self, **changes)

    def without_embedding(self) -> MemoryNode:
        return evolve(self, embedding=None)

    @property
    def scope_key(self) -> str:
        return self.scope.key

    def same_as(self, other: MemoryNode) -> bool:
        """Field-by-field equality (embeddings compared exactly)."""
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if f.name == "embedding":
                if (a is None) != (b is None):
                    return False
                if a is not None and (a.shape != b.shape or not np.array_equal(a, b)):
                    return False
            elif a != b:
                return False
        return True

    def content_equal(self, other: MemoryNode) -> bool:
        """Equal in everything a writer sets (ignores version and access statistics)."""
        skip = {"version", "access_count", "last_accessed", "embedding"}
        return all(
            getattr(self, f.name) == getattr(other, f.name) for f in fields(self) if f.name not in skip
        )

    # --------------------------------------------------------------- validation
    def validate(
        self,
        *,
        dim: int | None = None,
        max_content_chars: int = DEFAULT_MAX_CONTENT_CHARS,
        max_tags: int = DEFAULT_MAX_TAGS,
        max_structured_bytes: int = DEFAULT_MAX_STRUCTURED_BYTES,
    ) -> MemoryNode:
        """Check every field; raise :class:`InvalidMemory` naming the first bad one.

        Every string must have a UTF-8 form (no lone surrogates); every time must be
        epoch seconds in ``[0, MAX_TIME]`` (:mod:`memorybus.validation`); at most
        ``max_tags`` tags of at most 256 characters; ``structured`` at most
        ``max_structured_bytes`` once encoded. Also normalises enum fields given as
        strings and lists given for tuples, returning the (possibly normalised) node.
        """
        node = self
        if not isinstance(node.id, str) or not node.id:
            raise InvalidMemory("id", "must be a non-empty string")
        try:
            uuid.UUID(node.id)
        except ValueError:
            raise InvalidMemory("id", f"must be a UUID string, got {node.id!r}") from None
        if not isinstance(node.content, str):
            raise InvalidMemory("content", f"must be a string, got {type(node.content).__name__}")
        if not is_text(node.content):
            raise InvalidMemory("content", "contains a lone surrogate (not valid Unicode text)")
        if not node.content.strip():
            raise InvalidMemory("content", "is empty")
        if len(node.content) > max_content_chars:
            raise InvalidMemory(
                "content", f"{len(node.content)} characters exceeds the limit {max_content_chars}"
            )
        if "\x00" in node.content:
            raise InvalidMemory("content", "contains a NUL character")
        if not isinstance(node.scope, Scope):
            raise InvalidMemory("scope", "must be a Scope")
        if not node.scope.org:
            raise InvalidMemory("scope", "org is required")
        try:
            kind = MemoryKind(node.kind)
        except ValueError:
            raise InvalidMemory("kind", f"unknown kind {node.kind!r}") from None
        try:
            status = MemoryStatus(node.status)
        except ValueError:
            raise InvalidMemory("status", f"unknown status {node.status!r}") from None
        if isinstance(node.version, bool) or not isinstance(node.version, int) or node.version < 0:
            raise InvalidMemory("version", "must be an int >= 0")
        _check_number("confidence", node.confidence, 0.0, 1.0)
        _check_number("importance", node.importance, 1.0, 10.0)
        _check_number("decay_rate", node.decay_rate, 0.0, 100.0)
        for name in ("created_at", "last_accessed", "valid_from"):
            check_time(name, getattr(node, name), InvalidMemory)
        for name in ("valid_to", "expires_at"):
            check_time(name, getattr(node, name), InvalidMemory, optional=True)
        if node.valid_to is not None and node.valid_to < node.valid_from:
            raise InvalidMemory("valid_to", "is before valid_from")
        if isinstance(node.access_count, bool) or not isinstance(node.access_count, int):
            raise InvalidMemory("access_count", "must be an int")
        if node.access_count < 0:
            raise InvalidMemory("access_count", "must be >= 0")
        if isinstance(node.fact_seq, bool) or not isinstance(node.fact_seq, int) or node.fact_seq < 0:
            raise InvalidMemory("fact_seq", "must be an int >= 0")
        if node.key is not None and (not isinstance(node.key, str) or not node.key.strip()):
            raise InvalidMemory("key", "must be a non-empty string or None")
        if node.key is not None and len(node.key) > 512:
            raise InvalidMemory("key", "longer than 512 characters")
        if node.key is not None and not is_text(node.key):
            raise InvalidMemory("key", "contains a lone surrogate (not valid Unicode text)")
        if not isinstance(node.source, str) or not is_text(node.source):
            raise InvalidMemory("source", "must be a string of valid Unicode text")
        _check_conversation(node)
        if not isinstance(node.structured, dict):
            raise InvalidMemory("structured", "must be a dict")
        _check_structured(node.structured)
        if node.structured and len(_packb(node.structured)) > max_structured_bytes:
            raise InvalidMemory("structured", f"larger than {max_structured_bytes} bytes encoded")
        changes: dict[str, Any] = {}
        for name in (*RELATION_FIELDS, "tags"):
            value = getattr(node, name)
            if isinstance(value, str) or not isinstance(value, list | tuple):
                raise InvalidMemory(name, "must be a list or tuple of strings")
            if not all(isinstance(v, str) and v for v in value):
                raise InvalidMemory(name, "must contain only non-empty strings")
            if not all(is_text(v) for v in value):
                raise InvalidMemory(name, "contains a lone surrogate (not valid Unicode text)")
            if isinstance(value, list):
                changes[name] = tuple(value)
        if len(node.tags) > max_tags:
            raise InvalidMemory("tags", f"{len(node.tags)} tags exceed the limit {max_tags}")
        if any(len(t) > MAX_TAG_CHARS for t in node.tags):
            raise InvalidMemory("tags", f"a tag is longer than {MAX_TAG_CHARS} characters")
        emb = node.embedding
        if emb is not None:
            arr = np.asarray(emb)
            if arr.ndim != 1 or arr.size == 0:
                raise InvalidMemory("embedding", f"must be a 1-d vector, got shape {arr.shape}")
            if not np.issubdtype(arr.dtype, np.number):
                raise InvalidMemory("embedding", "must be numeric")
            if dim is not None and arr.shape[0] != dim:
                raise InvalidMemory("embedding", f"dimension {arr.shape[0]} != {dim}")
            arr = arr.astype(np.float32, copy=False)
            if not np.all(np.isfinite(arr)):
                raise InvalidMemory("embedding", "contains NaN or infinity")
            if arr is not emb:
                changes["embedding"] = arr
        if kind is not node.kind:
            changes["kind"] = kind
        if status is not node.status:
            changes["status"] = status
        return replace(node, **changes) if changes else node


_NODE_FIELDS = frozenset(f.name for f in fields(MemoryNode))


def _node_cloner() -> Any:
    """A shallow copy of a MemoryNode, field by field, generated once (as dataclasses
    generates ``__init__``): ten times faster than ``dataclasses.replace``, which
    matters on the write path (several copies per memory)."""
    body = "\n".join(f"    n.{name} = o.{name}" for name in sorted(_NODE_FIELDS))
    namespace: dict[str, Any] = {"new": object.__new__, "cls": MemoryNode}
    exec(f"def clone(o):\n    n = new(cls)\n{body}\n    return n\n", namespace)  # the field names are fixed
    return namespace["clone"]


_clone_node = _node_cloner()


def evolve(obj: Any, **changes: Any) -> Any:
    """``dataclasses.replace``, fast for :class:`MemoryNode` (no ``__init__`` call)."""
    if type(obj) is not MemoryNode:
        return replace(obj, **changes)
    unknown = changes.keys() - _NODE_FIELDS
    if unknown:
        raise TypeError(f"MemoryNode has no field(s) {sorted(unknown)}")
    node = _clone_node(obj)
    for name, value in changes.items():
        setattr(node, name, value)
    return node


#: longest thread id and speaker accepted
MAX_THREAD_CHARS = 512
MAX_SPEAKER_CHARS = 256


def _check_conversation(node: MemoryNode) -> None:
    for name, limit in (("thread", MAX_THREAD_CHARS), ("speaker", MAX_SPEAKER_CHARS)):
        value = getattr(node, name)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or not is_text(value):
            raise InvalidMemory(name, "must be a non-empty string of valid Unicode text, or None")
        if len(value) > limit or "\x00" in value:
            raise InvalidMemory(name, f"longer than {limit} characters or contains NUL")
    pos = node.position
    if pos is not None:
        if isinstance(pos, bool) or not isinstance(pos, int) or not 0 <= pos < 2**53:
            raise InvalidMemory("position", "must be an int >= 0 or None")
        if node.thread is None:
            raise InvalidMemory("position", "needs a thread")


def _check_number(name: str, value: object, lo: float, hi: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidMemory(name, f"must be a number, got {type(value).__name__}")
    if math.isnan(value) or not lo <= value <= hi:
        raise InvalidMemory(name, f"{value!r} is outside {lo}..{hi}")


def _packb(value: Any) -> bytes:
    return bytes(msgpack.packb(value, use_bin_type=True))


def _check_structured(value: object, depth: int = 0) -> None:
    """structured must be msgpack-able plain data with string keys."""
    if depth > 16:
        raise InvalidMemory("structured", "nested too deeply")
    if value is None or isinstance(value, bool | int | str | bytes):
        if isinstance(value, int) and not -(2**63) <= value < 2**64:
            raise InvalidMemory("structured", "integer out of range")
        if isinstance(value, str) and not is_text(value):
            raise InvalidMemory("structured", "contains a lone surrogate (not valid Unicode text)")
        return
    if isinstance(value, float):
        if math.isnan(value):
            raise InvalidMemory("structured", "contains NaN")
        return
    if isinstance(value, list | tuple):
        for v in value:
            _check_structured(v, depth + 1)
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidMemory("structured", "keys must be strings")
            if not is_text(k):
                raise InvalidMemory("structured", "a key contains a lone surrogate (not valid Unicode text)")
            _check_structured(v, depth + 1)
        return
    raise InvalidMemory("structured", f"unsupported value of type {type(value).__name__}")
