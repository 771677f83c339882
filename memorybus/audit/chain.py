"""The audit log's entries and their hash chain (pure: no store, no Ray).

One chain per (org, shard). An :class:`Entry` says who (``principal``) did what
(``operation``) to which memories (``ids``, with the ``hashes`` of the content
written; empty for reads) and when (``at``). Entries never hold content: only ids
and content hashes, so erasing a person's memories leaves every chain verifiable.

Each entry's ``hash`` is SHA-256 over the canonical msgpack encoding of its fields
and ``prev``, the hash of the entry before it (:data:`GENESIS` for seq 1). Editing
an entry changes its hash; removing one breaks the seq run and the next link;
reordering breaks both. Removing the *tail* leaves a shorter, valid chain: that is
what signed checkpoints (:mod:`memorybus.audit.checkpoint`) catch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import msgpack

from memorybus.scopes import Context

#: ``prev`` of the first entry of a chain
GENESIS = "0" * 64
#: the schema of an encoded entry (the first element of its msgpack array)
ENTRY_VERSION = 1


def principal_of(context: Context) -> str:
    """Who a caller is, as the audit log names it: ``org/user/agent[/session]``.

    The one place that decides it. With credentials, the shard only ever sees a context
    its actor admitted (signature, expiry and scope checked), so the name comes from
    that credential: its scope and its id (``acme/u1/planner#<id>``, ``operator#<id>``).
    In trusted mode, from the context as given."""
    if context.principal:  # set by the actor that verified the credential
        return context.principal
    return "/".join((context.org, context.user, context.agent, context.session)).rstrip("/")


def content_digest(content: str) -> str:
    """The hash the log keeps of a memory's content (never the content itself)."""
    return hashlib.blake2b(content.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


@dataclass(frozen=True, slots=True)
class Draft:
    """An entry before it is chained: the store gives it its seq and links."""

    org: str
    at: float
    principal: str
    operation: str
    ids: tuple[str, ...] = ()
    hashes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry(Draft):
    """One chained audit entry (see the module docstring): a draft with its place in
    the chain."""

    seq: int
    prev: str
    hash: str

    def body(self) -> bytes:
        return _body(self.seq, self, self.prev)

    def to_dict(self) -> dict[str, object]:
        """As JSON: what ``memorybus audit export`` writes, one per line."""
        return {"seq": self.seq, "at": self.at, "org": self.org, "principal": self.principal,
                "operation": self.operation, "ids": list(self.ids), "hashes": list(self.hashes),
                "prev": self.prev, "hash": self.hash}  # fmt: skip


def _body(seq: int, d: Draft, prev: str) -> bytes:
    """The canonical bytes an entry's hash covers (a msgpack array: one encoding only)."""
    return msgpack.packb(
        [ENTRY_VERSION, int(seq), float(d.at), d.org, d.principal, d.operation, list(d.ids), list(d.hashes), prev],
        use_bin_type=True,
    )


def entry_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def chain(drafts: Sequence[Draft], head: tuple[int, str]) -> list[Entry]:
    """Chain ``drafts`` (all of one org) after ``head`` = (seq, hash) of the last entry
    ((0, GENESIS) for an empty chain)."""
    seq, prev = head
    out: list[Entry] = []
    for d in drafts:
        seq += 1
        digest = entry_hash(_body(seq, d, prev))
        out.append(Entry(d.org, d.at, d.principal, d.operation, tuple(d.ids), tuple(d.hashes), seq=seq, prev=prev,
                         hash=digest))
        prev = digest
    return out


def encode_entry(entry: Entry) -> bytes:
    """The stored form: the hashed body plus the hash."""
    return msgpack.packb([entry.body(), entry.hash], use_bin_type=True)


class UnreadableEntryError(ValueError):
    """A stored entry that does not decode (its bytes were damaged or replaced)."""


def decode_entry(blob: bytes) -> Entry:
    try:
        body, digest = msgpack.unpackb(blob, raw=False)
        version, seq, at, org, principal, operation, ids, hashes, prev = msgpack.unpackb(body, raw=False)
        if version != ENTRY_VERSION:
            raise ValueError(f"entry schema {version!r}")
        return Entry(str(org), float(at), str(principal), str(operation), tuple(map(str, ids)),
                     tuple(map(str, hashes)), seq=int(seq), prev=str(prev), hash=str(digest))  # fmt: skip
    except (ValueError, TypeError) as exc:  # msgpack's errors are ValueErrors
        raise UnreadableEntryError(str(exc)) from None


def recompute(entry: Entry) -> str:
    """The hash ``entry``'s fields call for (differs from ``entry.hash`` when edited)."""
    return entry_hash(entry.body())
