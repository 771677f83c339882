"""The audit chain on its own: every kind of tampering is named with its seq."""

import dataclasses
import hashlib
import itertools

import msgpack
import pytest

from memorybus import Context, InvalidRequest
from memorybus.audit import (
    GENESIS,
    Draft,
    chain,
    decode_checkpoint,
    decode_entry,
    encode_checkpoint,
    encode_entry,
    principal_of,
    sign,
    verify,
)

KEY = b"k" * 32


def drafts(n, org="acme"):
    return [Draft(org, 100.0 + i, "acme/u1/planner", "put_many", (f"id-{i}",), (f"h{i}",)) for i in range(n)]


def blobs(n=6):
    return [encode_entry(e) for e in chain(drafts(n), (0, GENESIS))]


def edit(blob, **changes):
    """Change an entry's fields in its stored bytes, keeping its old hash."""
    body, digest = msgpack.unpackb(blob, raw=False)
    fields = msgpack.unpackb(body, raw=False)
    names = ["v", "seq", "at", "org", "principal", "operation", "ids", "hashes", "prev"]
    for name, value in changes.items():
        fields[names.index(name)] = value
    return msgpack.packb([msgpack.packb(fields, use_bin_type=True), digest], use_bin_type=True)


def test_principal_names_org_user_agent_session():
    assert principal_of(Context("acme", "u1", "planner")) == "acme/u1/planner"
    assert principal_of(Context("acme", "u1", "planner", "s1")) == "acme/u1/planner/s1"
    assert principal_of(Context("acme")) == "acme"


def test_a_clean_chain_verifies_and_links():
    entries = chain(drafts(5), (0, GENESIS))
    assert [e.seq for e in entries] == [1, 2, 3, 4, 5]
    assert entries[0].prev == GENESIS and all(b.prev == a.hash for a, b in itertools.pairwise(entries))
    assert [decode_entry(encode_entry(e)) for e in entries] == entries
    cp = sign(KEY, "acme", 5, entries[-1].hash, 200.0)
    report = verify("acme", [encode_entry(e) for e in entries], [cp], KEY)
    assert report.ok and report.entries == 5 and report.signatures_checked, report
    # chaining on after a head continues the run
    more = chain(drafts(2), (5, entries[-1].hash))
    assert verify("acme", entries + more).ok


def test_an_empty_chain_is_ok_without_checkpoints():
    assert verify("acme", []).ok


def test_an_edited_entry_is_named():
    stored = blobs()
    stored[2] = edit(stored[2], ids=["someone-else"])
    report = verify("acme", stored)
    assert (report.ok, report.bad_seq, report.reason) == (False, 3, "edited")


def test_an_edited_and_rehashed_entry_is_caught_by_its_successor():
    entries = chain(drafts(6), (0, GENESIS))
    forged = dataclasses.replace(entries[2], ids=("other",))
    forged = dataclasses.replace(forged, hash=hashlib.sha256(forged.body()).hexdigest())
    stored = [*entries[:2], forged, *entries[3:]]
    report = verify("acme", stored)
    assert (report.bad_seq, report.reason) == (3, "edited")


def test_an_edited_and_rehashed_last_entry_is_caught_by_the_checkpoint():
    entries = chain(drafts(4), (0, GENESIS))
    cp = sign(KEY, "acme", 4, entries[-1].hash, 1.0)
    forged = dataclasses.replace(entries[3], principal="acme/u2/intruder")
    forged = dataclasses.replace(forged, hash=hashlib.sha256(forged.body()).hexdigest())
    assert verify("acme", [*entries[:3], forged]).ok  # undetectable without a checkpoint
    report = verify("acme", [*entries[:3], forged], [cp], KEY)
    assert (report.bad_seq, report.reason) == (4, "edited")


def test_a_removed_entry_is_named():
    stored = blobs()
    del stored[3]
    report = verify("acme", stored)
    assert (report.bad_seq, report.reason) == (4, "removed")


def test_reordered_entries_are_named():
    stored = blobs()
    stored[1], stored[4] = stored[4], stored[1]
    report = verify("acme", stored)
    assert (report.bad_seq, report.reason) == (2, "reordered")
    stored = blobs()
    stored.append(stored[2])  # a replayed entry
    assert verify("acme", stored).reason == "reordered"


def test_a_truncated_tail_is_caught_only_by_a_checkpoint():
    stored = blobs(6)
    head = decode_entry(stored[-1])
    cp = sign(KEY, "acme", 6, head.hash, 1.0)
    assert verify("acme", stored[:4]).ok  # a shorter chain is valid on its own
    report = verify("acme", stored[:4], [cp], KEY)
    assert (report.ok, report.bad_seq, report.reason) == (False, 5, "truncated")
    report = verify("acme", [], [cp], KEY)  # every entry gone
    assert (report.bad_seq, report.reason) == (1, "truncated")


def test_a_forged_or_moved_checkpoint_is_refused():
    stored = blobs(6)
    real = sign(KEY, "acme", 6, decode_entry(stored[-1]).hash, 1.0)
    forged = dataclasses.replace(real, seq=3, hash=decode_entry(stored[2]).hash)  # signature of another head
    report = verify("acme", stored, [forged], KEY)
    assert (report.bad_seq, report.reason) == (3, "checkpoint")
    wrong_key = sign(b"x" * 32, "acme", 6, real.hash, 1.0)
    assert verify("acme", stored, [wrong_key], KEY).reason == "checkpoint"
    assert verify("acme", stored, [None], KEY).reason == "checkpoint"
    assert decode_checkpoint(encode_checkpoint(real)) == real
    assert decode_checkpoint(b"\xc1garbage") is None
    other_org = sign(KEY, "beta", 6, real.hash, 1.0)
    assert verify("acme", stored, [other_org], KEY).reason == "checkpoint"


def test_an_entry_of_another_org_is_refused():
    stored = blobs(3)
    beta = chain(drafts(1, "beta"), (3, decode_entry(stored[-1]).hash))
    report = verify("acme", [*stored, encode_entry(beta[0])])
    assert (report.bad_seq, report.reason) == (4, "edited")


def test_unreadable_bytes_are_named():
    stored = blobs(4)
    stored[2] = b"\xc1not msgpack"
    report = verify("acme", stored)
    assert (report.bad_seq, report.reason) == (3, "unreadable")


def test_a_short_key_is_refused():
    with pytest.raises(InvalidRequest):
        sign(b"short", "acme", 1, GENESIS, 1.0)
