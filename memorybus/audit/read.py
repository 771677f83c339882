"""Read, query and verify the audit chains a store holds (no Ray: the CLI reads a
shard's store directly, and the shard serves :meth:`Shard.audit_log` with it)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memorybus.audit.chain import Entry, UnreadableEntryError, decode_entry
from memorybus.audit.checkpoint import decode_checkpoint
from memorybus.audit.verify import Report, verify
from memorybus.errors import InvalidRequest
from memorybus.validation import is_int

if TYPE_CHECKING:
    from memorybus.storage.base import Store

_PAGE = 5000


def blobs(store: Store, org: str) -> Iterator[bytes]:
    """``org``'s stored entries, in storage order, page by page."""
    after = 0
    while True:
        page = store.read_audit(org, after, _PAGE)
        yield from (blob for _, blob in page)
        if len(page) < _PAGE:
            return
        after = page[-1][0]


def verify_store(store: Store, key: bytes | None = None, orgs: list[str] | None = None) -> list[Report]:
    """One :class:`Report` per org chain in ``store`` (of ``orgs``; default every org
    with entries)."""
    names = orgs if orgs is not None else store.audit_orgs()
    return [verify(org, blobs(store, org), [decode_checkpoint(b) for b in store.checkpoints(org)], key)
            for org in names]  # fmt: skip


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Which of an org's entries to read: those with ``since <= at < until`` by
    ``principal`` (None: anyone), at most ``limit`` of them. Checked when built
    (InvalidRequest naming the bad argument); the bus client, the shard and the CLI
    share it."""

    since: float | None = None
    until: float | None = None
    principal: str | None = None
    limit: int = 1000

    def __post_init__(self) -> None:
        for name, value in (("since", self.since), ("until", self.until)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise InvalidRequest(name, "must be epoch seconds or None")
        if self.principal is not None and (not isinstance(self.principal, str) or not self.principal):
            raise InvalidRequest("principal", "must be a non-empty string or None")
        if not is_int(self.limit, 1, 1_000_000):
            raise InvalidRequest("limit", "must be an int between 1 and 1000000")

    def admits(self, entry: Entry) -> bool:
        """Whether ``entry`` is one this query asks for (the limit aside)."""
        return ((self.since is None or entry.at >= self.since) and (self.until is None or entry.at < self.until)
                and (self.principal is None or entry.principal == self.principal))  # fmt: skip


def select(store: Store, org: str, q: AuditQuery) -> Iterator[Entry]:
    """``org``'s entries ``q`` admits (its limit aside), in chain order (one pass over
    the org's chain on this store). Entries that do not decode are skipped (``verify``
    reports them)."""
    for blob in blobs(store, org):
        try:
            e = decode_entry(blob)
        except UnreadableEntryError:
            continue
        if q.admits(e):
            yield e


def query(store: Store, org: str, q: AuditQuery) -> list[Entry]:
    """The first ``q.limit`` entries :func:`select` finds."""
    return list(itertools.islice(select(store, org, q), q.limit))
