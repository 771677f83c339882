"""The memorybus error hierarchy.

Every error raised by memorybus derives from :class:`MemoryBusError`. Errors
cross Ray actor boundaries by pickling, so each one passes its raw arguments to
``super().__init__`` (which is what ``pickle`` replays) and builds its message
in ``__str__``. An error declares its arguments as fields and its message under
:func:`error`, which writes that ``__init__`` and ``__str__``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, dataclass_transform

T = TypeVar("T", bound="MemoryBusError")


class MemoryBusError(Exception):
    """Root of every error memorybus raises."""

    #: the message of an error declared with :func:`error`, formatted with its fields
    _message: ClassVar[str] = ""

    def __init__(self, message: str = "", *args: Any) -> None:
        super().__init__(message, *args)

    def __post_init__(self) -> None:  # after the __init__ that error() writes
        MemoryBusError.__init__(self, *(getattr(self, f.name) for f in dataclasses.fields(self)))  # type: ignore[arg-type]

    def __str__(self) -> str:
        if self._message:
            return self._message.format_map(vars(self))
        return str(self.args[0]) if self.args else self.__class__.__name__


@dataclass_transform(eq_default=False)
def error(message: str = "") -> Callable[[type[T]], type[T]]:
    """Declare an error class: its fields (annotated in its body, after its parent's)
    are its raw arguments: its ``__init__`` takes them in order, keeps each as an
    attribute and passes them all to ``super().__init__``. ``message`` is its
    ``str()``, formatted with the fields (a class with more to say defines
    ``__str__``). Equality stays identity, ``repr`` Exception's."""

    def declare(cls: type[T]) -> type[T]:
        cls._message = message
        return dataclasses.dataclass(eq=False, repr=False)(cls)

    return declare


@error("invalid memory: {field}: {reason}")
class InvalidMemory(MemoryBusError, ValueError):  # noqa: N818 - public API name
    """A memory node or a request failed validation; nothing was written."""

    field: str
    reason: str


@error("invalid request: {argument}: {reason}")
class InvalidRequest(MemoryBusError, ValueError):  # noqa: N818 - public API name
    """A call's arguments (other than a memory node) are invalid; nothing changed."""

    argument: str
    reason: str


@error("invalid config: {field}: {reason}")
class ConfigError(MemoryBusError, ValueError):
    """The configuration is invalid."""

    field: str
    reason: str


@error("version conflict on {key!r}: expected version {expected}, found {actual}")
class VersionConflict(MemoryBusError):  # noqa: N818 - public API name
    """A compare-and-set found a different version than the caller expected."""

    key: str
    expected: int | None
    actual: int | None


@error("memory not found: {memory_id!r}")
class MemoryNotFound(MemoryBusError, KeyError):  # noqa: N818 - public API name
    """No memory with this id exists in the shard that owns its scope."""

    memory_id: str


@error("scope violation: access refused ({action})")
class ScopeViolation(MemoryBusError, PermissionError):  # noqa: N818 - public API name
    """A context tried to read or write outside what it may see or manage.

    The error names only the refused action: never the scope or owner of the memory,
    subscription or fact it concerns (anyone may hold an id; the error must not tell
    them whose it is).
    """

    action: str


@error("not authenticated: {reason}")
class NotAuthenticated(MemoryBusError, PermissionError):  # noqa: N818 - public API name
    """A call carried no valid credential: none, malformed, forged (bad signature),
    expired, revoked, or signed with an unknown or retired key. Nothing changed."""

    reason: str


@error("not authorized: {action}: {reason}")
class NotAuthorized(MemoryBusError, PermissionError):  # noqa: N818 - public API name
    """A valid credential does not allow this call: an operator call from an agent,
    a context or role outside the credential, a write with a read-only credential.
    Nothing changed."""

    action: str
    reason: str


@error("subscription {name!r} stopped: its callback failed: {detail}")
class DeliveryFailed(MemoryBusError):  # noqa: N818 - public API name
    """A subscription's callback kept failing past its retries; the listener stopped
    (nothing of the failed batch was acknowledged: subscribing again resumes there)."""

    name: str
    detail: str


class Unavailable(MemoryBusError):  # noqa: N818 - public API name
    """A part of the bus cannot serve now: its durable store
    (:class:`StoreUnavailable`) or one of its actors (:class:`ActorUnavailable`).
    Nothing is known to have changed; a later retry may succeed."""


@error("store unavailable ({backend}): {detail}")
class StoreUnavailable(Unavailable):
    """The durable store (SQLite file, Redis server) could not be reached or failed."""

    backend: str
    detail: str


@error()
class OutcomeUnknown(StoreUnavailable):
    """A write's commit failed midway (e.g. a Redis timeout): it may or may not have
    been applied. The shard settles it before its next call (adopting the write if it
    was applied); retry with ``op_id=err.op_id`` to get the write's outcome, never a
    second copy of it."""

    op_id: str

    def __str__(self) -> str:
        return (f"store unavailable ({self.backend}): {self.detail}; the write may have been applied: "
                f"retry with op_id={self.op_id!r} to learn its outcome")


@error()
class ActorUnavailable(Unavailable):
    """A bus actor (a shard, an embedder, a bus or maintenance actor) died, is
    restarting, or cannot be reached; ``actor`` names it (its Ray name, else its
    class or id). Ray restarts the bus's actors: a retry with the same ``op_id``
    answers a write's outcome, never a second copy."""

    actor: str
    detail: str

    def __str__(self) -> str:
        return f"actor unavailable ({self.actor or 'unknown actor'}): {self.detail}"


@error()
class ActorFailed(MemoryBusError):  # noqa: N818 - public API name
    """A bus actor's call failed with an error that is not a memorybus error (a bug, or
    the caller's own code it ran, such as a subscriber's method): ``actor`` names the
    actor and its call, ``cause`` the error's type and message. Nothing of Ray's own
    error types reaches the caller."""

    actor: str
    cause: str

    def __str__(self) -> str:
        return f"{self.actor or 'a bus actor'} failed: {self.cause}"


class OperationTimeout(MemoryBusError, TimeoutError):  # noqa: N818 - public API name
    """A call did not finish within its timeout (``Config.read_timeout`` /
    ``Config.write_timeout``, or ``bus.with_timeout(seconds)``). A write that timed
    out may still be applied: retry with ``op_id=err.op_id`` to learn its outcome."""

    def __init__(self, seconds: float | None, op_id: str = "") -> None:
        Exception.__init__(self, seconds, op_id)  # the raw arguments, for pickling
        self.seconds = seconds
        self.op_id = op_id

    def __str__(self) -> str:
        msg = f"the call did not finish within {self.seconds} s"
        if self.op_id:
            msg += f"; the write may still be applied: retry with op_id={self.op_id!r} to learn its outcome"
        return msg


@error()
class PartialWrite(MemoryBusError):  # noqa: N818 - public API name
    """A write spread over several shards was applied in part: after every part had
    passed its checks, some shard failed. ``stored[i]`` is item ``i`` as stored, or None
    where its part failed; ``errors`` maps those items' indexes to their part's error.
    Calling again with ``op_id=err.op_id`` answers the stored part from its records
    and writes only what failed (no copies)."""

    op_id: str
    stored: list[Any]
    errors: dict[int, BaseException]

    def __str__(self) -> str:
        done = sum(x is not None for x in self.stored)
        first = self.errors[min(self.errors)] if self.errors else None
        return (f"partial write: {done} of {len(self.stored)} items stored, {len(self.errors)} failed "
                f"(first: {first}); retry with op_id={self.op_id!r} to finish")


@error("{shard} refuses to start: {reason}")
class StoreMismatch(MemoryBusError):  # noqa: N818 - public API name
    """A shard refuses to start: its store is missing, empty, another store, or was
    written with another shard count (see :mod:`memorybus.storage.identity`)."""

    shard: str
    reason: str


class DataDirInUse(ConfigError):  # noqa: N818 - public API name
    """A data directory is served by another running bus (one bus per data directory,
    see :mod:`memorybus.storage.dirlock`): ``directory`` and what its lock file says
    of the ``holder`` (pid, host, namespace). Nothing was opened."""

    def __init__(self, directory: str, holder: str) -> None:
        MemoryBusError.__init__(self, directory, holder)
        self.directory = directory
        self.holder = holder
        self.field = "data_dir"
        self.reason = f"{directory} is in use by another bus ({holder})"

    def __str__(self) -> str:
        return (f"data directory {self.directory} is in use by another running bus ({self.holder}); "
                "one bus per data directory: join that bus with its namespace, or use another data_dir")


@error("index unavailable ({backend}): {detail}")
class IndexUnavailable(MemoryBusError):  # noqa: N818 - public API name
    """A derived index (vector index) failed; it can be rebuilt from the store."""

    backend: str
    detail: str


@error("embedding failed: {detail}")
class EmbeddingError(MemoryBusError):
    """The embedding model failed or returned vectors of the wrong shape."""

    detail: str


@error("hook {hook} failed: {detail}; nothing was written")
class HookFailed(MemoryBusError):  # noqa: N818 - public API name
    """A pluggable hook of the configuration (``bus.judge``,
    ``consolidation.summarizer``) raised, or returned something it may not; the call
    that ran it changed nothing. ``hook`` names the hook, ``detail`` what went wrong
    (the exception's type and message, or the bad value's type)."""

    hook: str
    detail: str


@error("bus {namespace!r} is closed: {reason}")
class BusClosed(MemoryBusError):  # noqa: N818 - public API name
    """The bus handle was closed, its actors are gone, or this process left Ray.

    Raised before anything is sent: a closed handle never starts Ray again.
    Connect again (``memorybus.connect``) to get a working handle.
    """

    namespace: str
    reason: str
