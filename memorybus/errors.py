"""The memorybus error hierarchy.

Every error raised by memorybus derives from :class:`MemoryBusError`. Errors
cross Ray actor boundaries by pickling, so each one passes its raw arguments to
``super().__init__`` (which is what ``pickle`` replays) and builds its message
in ``__str__``.
"""

from __future__ import annotations

from typing import Any


class MemoryBusError(Exception):
    """Root of every error memorybus raises."""

    def __init__(self, message: str = "", *args: Any) -> None:
        super().__init__(message, *args)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else self.__class__.__name__


class InvalidMemory(MemoryBusError, ValueError):  # noqa: N818 - public API name
    """A memory node or a request failed validation; nothing was written."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(field, reason)
        self.field = field
        self.reason = reason

    def __str__(self) -> str:
        return f"invalid memory: {self.field}: {self.reason}"


class InvalidRequest(MemoryBusError, ValueError):  # noqa: N818 - public API name
    """A call's arguments (other than a memory node) are invalid; nothing changed."""

    def __init__(self, argument: str, reason: str) -> None:
        super().__init__(argument, reason)
        self.argument = argument
        self.reason = reason

    def __str__(self) -> str:
        return f"invalid request: {self.argument}: {self.reason}"


class ConfigError(MemoryBusError, ValueError):
    """The configuration is invalid."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(field, reason)
        self.field = field
        self.reason = reason

    def __str__(self) -> str:
        return f"invalid config: {self.field}: {self.reason}"


class VersionConflict(MemoryBusError):  # noqa: N818 - public API name
    """A compare-and-set found a different version than the caller expected."""

    def __init__(self, key: str, expected: int | None, actual: int | None) -> None:
        super().__init__(key, expected, actual)
        self.key = key
        self.expected = expected
        self.actual = actual

    def __str__(self) -> str:
        return f"version conflict on {self.key!r}: expected version {self.expected}, found {self.actual}"


class MemoryNotFound(MemoryBusError, KeyError):  # noqa: N818 - public API name
    """No memory with this id exists in the shard that owns its scope."""

    def __init__(self, memory_id: str) -> None:
        super().__init__(memory_id)
        self.memory_id = memory_id

    def __str__(self) -> str:
        return f"memory not found: {self.memory_id!r}"


class ScopeViolation(MemoryBusError, PermissionError):  # noqa: N818 - public API name
    """A context tried to read or write outside what it may see or manage.

    The error names only the refused action: never the scope or owner of the memory,
    subscription or fact it concerns (anyone may hold an id; the error must not tell
    them whose it is).
    """

    def __init__(self, action: str) -> None:
        super().__init__(action)
        self.action = action

    def __str__(self) -> str:
        return f"scope violation: access refused ({self.action})"


class NotAuthenticated(MemoryBusError, PermissionError):  # noqa: N818 - public API name
    """A call carried no valid credential: none, malformed, forged (bad signature),
    expired, revoked, or signed with an unknown or retired key. Nothing changed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return f"not authenticated: {self.reason}"


class NotAuthorized(MemoryBusError, PermissionError):  # noqa: N818 - public API name
    """A valid credential does not allow this call: an operator call from an agent,
    a context or role outside the credential, a write with a read-only credential.
    Nothing changed."""

    def __init__(self, action: str, reason: str) -> None:
        super().__init__(action, reason)
        self.action = action
        self.reason = reason

    def __str__(self) -> str:
        return f"not authorized: {self.action}: {self.reason}"


class DeliveryFailed(MemoryBusError):  # noqa: N818 - public API name
    """A subscription's callback kept failing past its retries; the listener stopped
    (nothing of the failed batch was acknowledged: subscribing again resumes there)."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(name, detail)
        self.name = name
        self.detail = detail

    def __str__(self) -> str:
        return f"subscription {self.name!r} stopped: its callback failed: {self.detail}"


class Unavailable(MemoryBusError):  # noqa: N818 - public API name
    """A part of the bus cannot serve now: its durable store
    (:class:`StoreUnavailable`) or one of its actors (:class:`ActorUnavailable`).
    Nothing is known to have changed; a later retry may succeed."""


class StoreUnavailable(Unavailable):
    """The durable store (SQLite file, Redis server) could not be reached or failed."""

    def __init__(self, backend: str, detail: str) -> None:
        super().__init__(backend, detail)
        self.backend = backend
        self.detail = detail

    def __str__(self) -> str:
        return f"store unavailable ({self.backend}): {self.detail}"


class OutcomeUnknown(StoreUnavailable):
    """A write's commit failed midway (e.g. a Redis timeout): it may or may not have
    been applied. The shard settles it before its next call (adopting the write if it
    was applied); retry with ``op_id=err.op_id`` to get the write's outcome, never a
    second copy of it."""

    def __init__(self, backend: str, detail: str, op_id: str) -> None:
        MemoryBusError.__init__(self, backend, detail, op_id)
        self.backend = backend
        self.detail = detail
        self.op_id = op_id

    def __str__(self) -> str:
        return (f"store unavailable ({self.backend}): {self.detail}; the write may have been applied: "
                f"retry with op_id={self.op_id!r} to learn its outcome")


class ActorUnavailable(Unavailable):
    """A bus actor (a shard, an embedder, a bus or maintenance actor) died, is
    restarting, or cannot be reached; ``actor`` names it (its Ray name, else its
    class or id). Ray restarts the bus's actors: a retry with the same ``op_id``
    answers a write's outcome, never a second copy."""

    def __init__(self, actor: str, detail: str) -> None:
        super().__init__(actor, detail)
        self.actor = actor
        self.detail = detail

    def __str__(self) -> str:
        return f"actor unavailable ({self.actor or 'unknown actor'}): {self.detail}"


class ActorFailed(MemoryBusError):  # noqa: N818 - public API name
    """A bus actor's call failed with an error that is not a memorybus error (a bug, or
    the caller's own code it ran, such as a subscriber's method): ``actor`` names the
    actor and its call, ``cause`` the error's type and message. Nothing of Ray's own
    error types reaches the caller."""

    def __init__(self, actor: str, cause: str) -> None:
        super().__init__(actor, cause)
        self.actor = actor
        self.cause = cause

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


class PartialWrite(MemoryBusError):  # noqa: N818 - public API name
    """A write spread over several shards was applied in part: after every part had
    passed its checks, some shard failed. ``stored[i]`` is item ``i`` as stored, or None
    where its part failed; ``errors`` maps those items' indexes to their part's error.
    Calling again with ``op_id=err.op_id`` answers the stored part from its records
    and writes only what failed (no copies)."""

    def __init__(self, op_id: str, stored: list[Any], errors: dict[int, BaseException]) -> None:
        super().__init__(op_id, stored, errors)
        self.op_id = op_id
        self.stored = stored
        self.errors = errors

    def __str__(self) -> str:
        done = sum(x is not None for x in self.stored)
        first = self.errors[min(self.errors)] if self.errors else None
        return (f"partial write: {done} of {len(self.stored)} items stored, {len(self.errors)} failed "
                f"(first: {first}); retry with op_id={self.op_id!r} to finish")


class StoreMismatch(MemoryBusError):  # noqa: N818 - public API name
    """A shard refuses to start: its store is missing, empty, another store, or was
    written with another shard count (see :mod:`memorybus.storage.identity`)."""

    def __init__(self, shard: str, reason: str) -> None:
        super().__init__(shard, reason)
        self.shard = shard
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.shard} refuses to start: {self.reason}"


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


class IndexUnavailable(MemoryBusError):  # noqa: N818 - public API name
    """A derived index (vector index) failed; it can be rebuilt from the store."""

    def __init__(self, backend: str, detail: str) -> None:
        super().__init__(backend, detail)
        self.backend = backend
        self.detail = detail

    def __str__(self) -> str:
        return f"index unavailable ({self.backend}): {self.detail}"


class EmbeddingError(MemoryBusError):
    """The embedding model failed or returned vectors of the wrong shape."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        return f"embedding failed: {self.detail}"


class HookFailed(MemoryBusError):  # noqa: N818 - public API name
    """A pluggable hook of the configuration (``bus.judge``,
    ``consolidation.summarizer``) raised, or returned something it may not; the call
    that ran it changed nothing. ``hook`` names the hook, ``detail`` what went wrong
    (the exception's type and message, or the bad value's type)."""

    def __init__(self, hook: str, detail: str) -> None:
        super().__init__(hook, detail)
        self.hook = hook
        self.detail = detail

    def __str__(self) -> str:
        return f"hook {self.hook} failed: {self.detail}; nothing was written"


class BusClosed(MemoryBusError):  # noqa: N818 - public API name
    """The bus handle was closed, its actors are gone, or this process left Ray.

    Raised before anything is sent: a closed handle never starts Ray again.
    Connect again (``memorybus.connect``) to get a working handle.
    """

    def __init__(self, namespace: str, reason: str) -> None:
        super().__init__(namespace, reason)
        self.namespace = namespace
        self.reason = reason

    def __str__(self) -> str:
        return f"bus {self.namespace!r} is closed: {self.reason}"
