"""Verify one audit chain against its signed checkpoints (pure).

:func:`verify` reads a chain's stored entries in storage order and names the first
entry that is wrong, and why:

- ``unreadable``: the stored bytes do not decode;
- ``edited``: an entry's fields do not give its hash, or they do (the hash was
  recomputed) but the next entry's ``prev`` does not link to it;
- ``removed``: a seq is missing (the next one stored is higher);
- ``reordered``: a seq comes again or goes back;
- ``truncated``: a signed checkpoint names a seq past the chain's end;
- ``checkpoint``: a checkpoint's hash is not the hash of the entry at its seq, or
  (with the key) its signature does not verify.

A clean chain whose every checkpoint matches is ``ok``. Without the key, checkpoints
are compared but their signatures are not checked (``signatures_checked`` False).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memorybus.audit.chain import GENESIS, Entry, UnreadableEntryError, decode_entry, recompute
from memorybus.audit.checkpoint import Checkpoint, authentic


@dataclass(frozen=True, slots=True)
class Report:
    """The outcome of :func:`verify` for one chain."""

    org: str
    ok: bool
    entries: int
    bad_seq: int | None = None
    reason: str | None = None
    detail: str = ""
    checkpoints: int = 0
    signatures_checked: bool = False

    def to_dict(self) -> dict[str, object]:
        return {"org": self.org, "ok": self.ok, "entries": self.entries, "bad_seq": self.bad_seq,
                "reason": self.reason, "detail": self.detail, "checkpoints": self.checkpoints,
                "signatures_checked": self.signatures_checked}  # fmt: skip

    def __str__(self) -> str:
        if self.ok:
            signed = "signed" if self.signatures_checked else "signatures not checked"
            return f"{self.org}: ok, {self.entries} entries, {self.checkpoints} checkpoints ({signed})"
        return f"{self.org}: TAMPERED at seq {self.bad_seq}: {self.reason}: {self.detail}"


def verify(
    org: str,
    stored: Iterable[Entry | bytes],
    checkpoints: Sequence[Checkpoint | None] = (),
    key: bytes | None = None,
) -> Report:
    """Check the chain of ``org`` (its entries as stored, in storage order; bytes are
    decoded here) against ``checkpoints`` (None: one that did not decode); with ``key``
    also their signatures. Returns the first fault found, in seq order."""
    signed = key is not None
    n_cp = len(checkpoints)

    def bad(seq: int, reason: str, detail: str) -> Report:
        return Report(org, False, count, seq, reason, detail, n_cp, signed)

    hashes: dict[int, str] = {}
    count = 0
    entries: list[Entry] = []
    for item in stored:
        try:
            entries.append(item if isinstance(item, Entry) else decode_entry(item))
        except UnreadableEntryError as exc:
            at = entries[-1].seq + 1 if entries else 1
            return bad(at, "unreadable", f"the entry stored after seq {at - 1} does not decode ({exc})")
    count = len(entries)
    present = {e.seq for e in entries}
    expect, prev = 1, GENESIS
    last: Entry | None = None
    for entry in entries:
        if entry.seq > expect:
            if expect in present:
                return bad(expect, "reordered", f"seq {entry.seq} is stored before seq {expect}")
            return bad(expect, "removed", f"seq {expect} is missing (next stored: {entry.seq})")
        if entry.seq < expect:
            return bad(entry.seq, "reordered", f"seq {entry.seq} is stored after seq {expect - 1}")
        if recompute(entry) != entry.hash:
            return bad(entry.seq, "edited", "its fields do not give its hash")
        if entry.org != org:
            return bad(entry.seq, "edited", f"it names org {entry.org!r}, not {org!r}")
        if entry.prev != prev:
            # this entry's fields are intact: the one before it was changed and re-hashed
            return bad(entry.seq - 1, "edited", f"seq {entry.seq} does not link to it")
        hashes[entry.seq] = entry.hash
        prev, expect, last = entry.hash, expect + 1, entry
    end = last.seq if last is not None else 0
    for cp in sorted(checkpoints, key=lambda c: -1 if c is None else c.seq):
        if cp is None:
            return bad(end, "checkpoint", "a checkpoint does not decode")
        if cp.org != org or (key is not None and not authentic(key, cp)):
            return bad(cp.seq, "checkpoint", f"the checkpoint of seq {cp.seq} has a bad signature")
        if cp.seq > end:
            return bad(end + 1, "truncated", f"a checkpoint says seq {cp.seq} existed; the chain ends at {end}")
        if cp.seq > 0 and hashes.get(cp.seq) != cp.hash:
            return bad(cp.seq, "edited", f"seq {cp.seq} differs from its signed checkpoint")
    return Report(org, True, count, checkpoints=n_cp, signatures_checked=signed)
