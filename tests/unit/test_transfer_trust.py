"""Imports trust nothing in the file (issue 27): a file sealed with a key is refused
when edited (even re-digested), unsealed or sealed under another key; an unkeyed file
needs ``trusted=True``; an empty, aliased or foreign id and a fact head of another
scope are refused with nothing written, in the file check and in the plain shard
whoever calls it; a rerun writes nothing twice. Real SQLite and Qdrant Edge, fixed
4-dimensional vectors (no model, no Ray)."""

from __future__ import annotations

import dataclasses
import uuid

import msgpack
import numpy as np
import pytest

from memorybus import Context, InvalidRequest, MemoryNode, Scope, new_id
from memorybus.memory import ids
from memorybus.memory.codec import NODE, encode, encode_node, node_to_dict
from memorybus.memory.events import EVENT, Event, EventKind
from memorybus.scopes.routing import bucket_of
from memorybus.shard import Shard
from memorybus.storage.base import SlotWrite, WriteBatch
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex
from memorybus.transfer import ExportWriter, read_export

KEY = b"operator-key-0123456789abcdef"
ALICE, BOB = Scope("acme", "alice"), Scope("acme", "bob")
VEC = (np.ones(4) / 2).astype(np.float32)
FACT = "user:profile/city"


def node(scope, content, **kw):
    return MemoryNode(content=content, scope=scope, id=kw.pop("id", None) or new_id(scope), embedding=VEC,
                      version=1, **kw)  # fmt: skip


def write(path, nodes=(), events=(), slots=(), key=KEY):
    w = ExportWriter(path, {"namespace": "t", "embedding_dim": 4, "within": None}, key=key)
    for n in nodes:
        w.node(n if isinstance(n, bytes) else encode_node(n))
    for scope_key, seq, blob in events:
        w.event(scope_key, seq, blob)
    for s in slots:
        w.slot(*s)
    w.finish()
    return path


def records(path):
    with open(path, "rb") as f:
        return list(msgpack.Unpacker(f, raw=False))


def pack(path, recs):
    path.write_bytes(b"".join(msgpack.packb(r, use_bin_type=True) for r in recs))
    return path


@pytest.fixture
def good(tmp_path):
    fact = node(ALICE, "Alice lives in Lyon", key=FACT, kind="semantic")
    return write(tmp_path / "good.mbx", [node(ALICE, "Alice likes tea"), fact], slots=[(ALICE.key, FACT, fact.id, 1)])


def test_a_sealed_file_reads_with_its_key_only(good, tmp_path):
    assert len(read_export(good, key=KEY).nodes) == 2
    with pytest.raises(InvalidRequest, match="does not match this key"):
        read_export(good, key=b"another-key-0123456789abcdef")
    with pytest.raises(InvalidRequest, match="no key given"):
        read_export(good)  # neither a key nor trusted
    assert len(read_export(good, trusted=True).nodes) == 2  # the caller vouches: digest only
    with pytest.raises(InvalidRequest, match="at least 16"):
        read_export(good, key=b"short")
    unsealed = write(tmp_path / "unsealed.mbx", [node(ALICE, "x")], key=None)
    with pytest.raises(InvalidRequest, match="not sealed"):
        read_export(unsealed, key=KEY)
    assert len(read_export(unsealed, trusted=True).nodes) == 1


def test_an_edited_file_is_refused_even_when_digested_again(good, tmp_path):
    import hashlib

    recs = records(good)
    body = recs[1]
    edited = dict(body, d=body["d"].replace(b"Alice likes tea", b"Alice likes rum"))
    assert edited != body
    recs[1] = edited
    digest = hashlib.blake2b(digest_size=32)  # what an editor without the key can recompute
    for r in recs[:-1]:
        digest.update(msgpack.packb(r, use_bin_type=True))
    resealed = pack(tmp_path / "resealed.mbx", [*recs[:-1], dict(recs[-1], digest=digest.hexdigest())])
    with pytest.raises(InvalidRequest, match="does not match this key"):
        read_export(resealed, key=KEY)  # the old MAC kept: it no longer matches
    stripped = pack(tmp_path / "stripped.mbx", [dict(recs[0], seal=None), *recs[1:-1],
                                                 {k: v for k, v in recs[-1].items() if k != "mac"}])  # fmt: skip
    with pytest.raises(InvalidRequest, match="not sealed"):
        read_export(stripped, key=KEY)  # the seal removed
    forged = write(tmp_path / "forged.mbx", [node(ALICE, "Alice likes rum")], key=b"attacker-key-0123456789abcdef")
    with pytest.raises(InvalidRequest, match="does not match this key"):
        read_export(forged, key=KEY)


def bad_files(tmp_path):
    """Files whose records are each valid alone but whose ids or references are not."""
    alice_fact = node(ALICE, "Alice lives in Lyon", key=FACT, kind="semantic")
    bob_fact = node(BOB, "Bob lives in Oslo", key=FACT, kind="semantic")
    good_id = new_id(ALICE)
    event_node = dict(node_to_dict(node(ALICE, "y"), with_embedding=False), id="")  # a node cannot be made so
    empty_event = encode(EVENT, {"kind": "remembered", "node": event_node, "at": 1.0, "by": "", "data": {}})
    empty_node = encode(NODE, dict(node_to_dict(node(ALICE, "z")), id=""))  # imported thrice: three copies, once
    cases = {
        "memory with an empty id": ([empty_node], [], []),
        "foreign slot": ([alice_fact, bob_fact], [], [(BOB.key, FACT, alice_fact.id, 1)]),
        "empty head": ([bob_fact], [], [(BOB.key, FACT, "", 1)]),
        "empty key": ([bob_fact], [], [(BOB.key, "", bob_fact.id, 1)]),
        "head of another key": ([bob_fact], [], [(BOB.key, "user:profile/job", bob_fact.id, 1)]),
        "nil id": ([node(ALICE, "nil", id=str(uuid.UUID(int=0)))], [], []),
        "upper-case alias": ([node(ALICE, "a", id=good_id), node(ALICE, "b", id=good_id.upper())], [], []),
        "braced alias": ([node(ALICE, "c", id="{" + good_id + "}")], [], []),
        "uuid4 id": ([node(ALICE, "d", id=str(uuid.uuid4()))], [], []),
        "id of another scope": ([node(ALICE, "e", id=new_id(BOB))], [], []),
        "same id twice": ([node(ALICE, "f", id=good_id), node(ALICE, "g", id=good_id)], [], []),
        "event with an empty id": ([], [(ALICE.key, 1, empty_event)], []),
    }
    return {name: write(tmp_path / f"{i}.mbx", n, e, s) for i, (name, (n, e, s)) in enumerate(cases.items())}


def test_files_with_bad_ids_or_references_are_refused(tmp_path):
    for name, path in bad_files(tmp_path).items():
        with pytest.raises(InvalidRequest, match="nothing was imported") as caught:
            read_export(path, key=KEY)
        assert "id" in str(caught.value) or "head" in str(caught.value) or "key" in str(caught.value), name


@pytest.fixture
def shard(tmp_path):
    s = Shard("shard-0", SqliteStore(tmp_path / "r.sqlite"), EdgeVectorIndex(tmp_path / "v", 4), dim=4)
    yield s
    s.close()


def stored(shard):
    return sorted(n.id for n in shard.store.iter_all()), shard.store.all_slots(), shard.index.count()


def test_the_shard_refuses_what_the_file_check_refuses_and_writes_nothing(shard, tmp_path):
    alice_fact = node(ALICE, "Alice lives in Lyon", key=FACT, kind="semantic")
    assert shard.import_records([alice_fact], [], [(ALICE.key, FACT, alice_fact.id, 1)]) == {
        "nodes": 1, "events": 0, "slots": 1}  # fmt: skip
    before = stored(shard)
    bob_fact = node(BOB, "Bob lives in Oslo", key=FACT, kind="semantic")
    calls = [
        ([bob_fact], [], [(BOB.key, FACT, alice_fact.id, 1)]),  # bob's slot -> alice's memory (here already)
        ([], [], [(BOB.key, FACT, "", 1)]),
        ([node(ALICE, "nil", id=str(uuid.UUID(int=0)))], [], []),
        ([node(ALICE, "alias", id=alice_fact.id.upper())], [], []),
        ([node(ALICE, "v4", id=str(uuid.uuid4()))], [], []),
    ]
    for nodes, events, slots in calls:
        with pytest.raises(InvalidRequest):
            shard.import_records(nodes, events, slots)
        assert stored(shard) == before
    assert shard.import_conflicts([], [], {}, [(BOB.key, FACT, alice_fact.id, 1)])
    assert shard.current_fact(Context("acme", "bob"), FACT, BOB) is None
    # an attacker's scope chosen so that its bucket is alice's: alice's id "fits" it, but
    # the memory it names is alice's (here), so the head is still refused
    twin = colliding(ALICE, Scope("acme", "bob", "agent"))
    assert ids.fits(alice_fact.id, twin)
    slot = (twin.key, FACT, alice_fact.id, 1)
    assert "another scope or key" in " ".join(shard.import_conflicts([], [], {}, [slot]))
    with pytest.raises(InvalidRequest, match="another scope or key"):
        shard.import_records([], [], [slot])
    assert stored(shard) == before
    assert shard.current_fact(Context("acme", "bob", "agent", twin.session), FACT, twin) is None


def colliding(target, like):
    """A scope like ``like`` (another session) whose routing bucket is ``target``'s."""
    for i in range(1_000_000):
        scope = Scope(like.org, like.user, like.agent, f"s{i}")
        if bucket_of(scope.key) == bucket_of(target.key):
            return scope
    raise AssertionError("no colliding session")


def test_a_file_with_a_colliding_scope_slot_is_refused(tmp_path):
    alice_fact = node(ALICE, "Alice lives in Lyon", key=FACT, kind="semantic")
    twin = colliding(ALICE, Scope("acme", "bob", "agent"))
    path = write(tmp_path / "twin.mbx", [alice_fact], [], [(twin.key, FACT, alice_fact.id, 1)])
    with pytest.raises(InvalidRequest, match="another scope or key"):
        read_export(path, key=KEY)


def test_an_import_rerun_writes_nothing_twice(shard):
    fact = node(ALICE, "Alice lives in Lyon", key=FACT, kind="semantic")
    blob = Event(EventKind.ASSERTED, dataclasses.replace(fact, embedding=None), 1.0, data={"fact_seq": 1}).encode()
    part = ([node(ALICE, "Alice likes tea"), fact], [(ALICE.key, 1, blob)], [(ALICE.key, FACT, fact.id, 1)])
    first = shard.import_records(*part)
    assert first == {"nodes": 2, "events": 1, "slots": 1}
    after = stored(shard)
    for _ in range(3):
        assert shard.import_records(*part) == {"nodes": 0, "events": 0, "slots": 0}
        assert stored(shard) == after


def test_a_slot_pointing_at_another_scope_never_answers_nor_is_overwritten(shard):
    """Defence in depth: were such a slot in the store, current_fact would not return the
    other scope's memory, and an assertion would not deprecate it."""
    alice_fact = node(ALICE, "Alice lives in Lyon", key=FACT, kind="semantic")
    shard.import_records([alice_fact], [], [])
    shard.store.commit(WriteBatch(slots=[SlotWrite(BOB.key, FACT, 0, alice_fact.id, 1)]))
    bob = Context("acme", "bob")
    assert shard.current_fact(bob, FACT, BOB) is None
    (result,) = shard.assert_facts(bob, [MemoryNode(content="Bob lives in Oslo", scope=BOB, key=FACT,
                                                    kind="semantic")], [VEC])  # fmt: skip
    assert result.outcome == "created" and result.node.scope == BOB
    assert shard.current_fact(bob, FACT, BOB).content == "Bob lives in Oslo"
    assert shard.store.get(alice_fact.id).status.value == "active" and shard.store.get(alice_fact.id).version == 1
