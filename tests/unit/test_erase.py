"""Erasure on the plain Shard over real SQLite and Qdrant Edge files: after an erase,
no byte of the erased content is left in any file of the data directory, and the
rest is intact. (Redis: tests/integration/test_erase_redis.py; through Ray:
tests/integration/test_erase_ray.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import msgpack
import numpy as np
import pytest

from memorybus import Context, InvalidRequest, ManualClock, MemoryNode, MemoryNotFound, Scope
from memorybus.config import ConsolidationPolicy
from memorybus.errors import StoreUnavailable
from memorybus.memory.events import Event, EventKind
from memorybus.retrieval import RecallOptions
from memorybus.shard import Shard
from memorybus.shard.erase import Selector
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

pytestmark = pytest.mark.model

ALICE = Context("acme", "alice", "planner", "s1")
BOB = Context("acme", "bob", "planner", "s2")
MARK = "zqxalicemark"  # in every text alice writes (and what is derived from it)
KEEP = "zqxbobkeep"  # in bob's


def open_shard(data: Path, clock: ManualClock) -> Shard:
    return Shard("shard-0", SqliteStore(data / "records.sqlite"), EdgeVectorIndex(data / "vectors", 384),
                 dim=384, clock=clock)  # fmt: skip


def files_holding(data: Path, needle: bytes) -> list[str]:
    """Every file under ``data`` (WAL, SHM, Qdrant segments, checkpoints) holding ``needle``."""
    found = []
    for root, _, files in os.walk(data):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                if needle in f.read():
                    found.append(os.path.relpath(path, data))
    return found


def hits_in_files(data: Path, marker: str) -> list[str]:
    return files_holding(data, marker.encode())


def put(shard: Shard, embedder, ctx: Context, texts: list[str], scope: Scope | None = None) -> list[MemoryNode]:
    nodes = [MemoryNode(content=t, scope=scope or ctx.scope) for t in texts]
    return shard.put_many(ctx, nodes, embedder.encode(texts))


def fact(shard: Shard, embedder, ctx: Context, text: str, scope: Scope):
    return shard.assert_fact(ctx, MemoryNode(content=text, scope=scope, key="favourite_colour"),
                             embedder.encode([text])[0], op=f"fact-{text}")  # fmt: skip


def populate(shard: Shard, embedder, clock: ManualClock) -> dict[str, object]:
    """Alice writes, updates, forgets, asserts and is consolidated and broadcast; Bob writes."""
    mine = Scope("acme", "alice")
    episodes = put(shard, embedder, ALICE, [f"Alice walked her dog Rex by the river {MARK} at dawn",
                                            f"Alice walked her dog Rex by the river {MARK} at dusk",
                                            f"Alice walked her dog Rex by the river {MARK} at noon"])
    [note] = put(shard, embedder, ALICE, [f"Alice keeps her passport in the blue drawer {MARK}"], scope=mine)
    [gone] = put(shard, embedder, ALICE, [f"Alice dislikes the Paris office {MARK}"], scope=mine)
    text = f"Alice keeps her passport in the red drawer {MARK}2"
    shard.update(ALICE, note.id, note.version, {"content": text}, embedder.encode([text])[0], op="upd-1")
    assert shard.delete(ALICE, gone.id, op="del-1")
    fact(shard, embedder, ALICE, f"green {MARK}", mine)
    clock.advance(10)
    fact(shard, embedder, ALICE, f"purple {MARK}", mine)
    assert len(shard.history(ALICE, "favourite_colour", mine)) == 2
    summary = f"Alice walks Rex by the river {MARK} every day"
    sem = shard.apply_consolidation([n.id for n in episodes], summary, embedder.encode([summary])[0],
                                    clock.now(), ConsolidationPolicy(min_cluster=2))  # fmt: skip
    assert sem is not None
    copy = shard.broadcast_source(ALICE, note.id, "org")
    shared = shard.put_broadcast(ALICE, copy, op="bc-1")
    [kept] = put(shard, embedder, BOB, [f"Bob's build server is named Hydra {KEEP}"], scope=Scope("acme", "bob"))
    fact(shard, embedder, BOB, f"orange {KEEP}", Scope("acme", "bob"))
    return {"episodes": episodes, "note": note, "gone": gone, "sem": sem, "shared": shared, "kept": kept}


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def dump(shard: Shard) -> tuple[object, ...]:
    """Everything the store holds that an erase could change."""
    store = shard.store
    events = {k: store.read_events(k, 0, 10_000) for k in store.event_scopes()}
    records = sorted((n.id, n.version, n.content) for n in store.iter_all())
    return records, events, sorted(store.op_results()), store.all_slots(), store.erase_job()


def test_erase_user_leaves_no_byte_of_it_in_any_file(tmp_path, embedder, clock):
    shard = open_shard(tmp_path, clock)
    made = populate(shard, embedder, clock)
    shard.flush()
    assert hits_in_files(tmp_path, MARK), "the scan must see the content before the erase"
    # Qdrant Edge keeps a deleted point's payload (its scope key, naming alice) and its
    # (normalised) vector in its segment and WAL files: the erase rebuilds the index
    shard.index.index.flush()
    assert hits_in_files(tmp_path / "vectors", "alice")
    vectors = [np.asarray(n.embedding, dtype=np.float32) for n in shard.store.iter_all() if n.scope.user == "alice"]
    prints = [(v / np.linalg.norm(v)).astype(np.float32)[:6].tobytes() for v in vectors]
    assert any(files_holding(tmp_path / "vectors", p) for p in prints)
    counts = shard.erase(Selector.of(org="acme", user="alice"))
    # five of alice's memories (one forgotten before), two fact values, the summary, the org copy
    assert counts["memories"] == 6 and counts["summaries"] == 1 and counts["copies"] == 1
    assert counts["events"] > 0 and counts["ops"] > 0 and counts["slots"] == 1 and counts["graph_edges"] >= 0
    for node in (made["note"], made["sem"], made["shared"], *made["episodes"]):
        with pytest.raises(MemoryNotFound):
            shard.get(ALICE, node.id)
    # history never returns erased content: the fact's slot and index went with alice's scopes
    assert shard.history(ALICE, "favourite_colour", Scope("acme", "alice")) == []
    # recall finds nothing of alice, in any of her scopes or the org's
    query = embedder.encode([f"where is the passport {MARK}"])[0]
    assert not [h for h in shard.search(ALICE, query, 10, query=f"passport {MARK}",
                                        options=RecallOptions(min_relevance=0.0)) if MARK in h.node.content]
    # the graph holds no entity or edge alice's memories sourced
    assert not [e for e in shard.graph.edges() if any(s in {n.id for n in made["episodes"]} for s in e.sources)]
    # events of alice's scopes keep kind and ids, not content
    for key in shard.store.event_scopes():
        for seq, blob in shard.store.read_events(key):
            assert MARK.encode() not in blob, (key, seq)
    # an export made afterwards (records, events, fact heads) holds none of it, and bob's
    nodes, _ = shard.export_nodes(None, None, 10_000)
    events, _ = shard.export_events(None, None, 0, 10_000)
    exported = b"".join(nodes) + b"".join(blob for _, _, blob in events) + repr(shard.export_slots(None)).encode()
    assert MARK.encode() not in exported and KEEP.encode() in exported
    # bob's memory and fact are intact and recallable
    hits = shard.search(BOB, embedder.encode(["build server name"])[0], 5, query=f"build server {KEEP}")
    assert [h.node.id for h in hits][:1] == [made["kept"].id]
    assert KEEP in shard.current_fact(BOB, "favourite_colour", Scope("acme", "bob")).content
    shard.close()
    assert hits_in_files(tmp_path, MARK) == []
    assert hits_in_files(tmp_path, KEEP), "bob's content is still stored"
    assert hits_in_files(tmp_path / "vectors", "alice") == []
    assert not [p for p in prints if files_holding(tmp_path / "vectors", p)]
    again = open_shard(tmp_path, clock)  # a restart rebuilds everything from the store
    try:
        assert again.get(BOB, made["kept"].id).content.endswith(KEEP)
        assert all(MARK not in n.content for n in again.store.iter_all())
        assert again.erase(Selector.of(org="acme", user="alice")) == dict.fromkeys(counts, 0)
    finally:
        again.close()
    assert hits_in_files(tmp_path, MARK) == []


def test_forget_then_erase_ids_scrubs_history_and_op_records(tmp_path, embedder, clock):
    """The issue's case: forget is soft (its content stays in the log and op records);
    erasing the forgotten ids removes it; FORGOTTEN events carry no content."""
    shard = open_shard(tmp_path, clock)
    scope = Scope("acme", "alice")
    r1 = fact(shard, embedder, ALICE, f"teal {MARK}", scope)
    clock.advance(5)
    r2 = fact(shard, embedder, ALICE, "navy", scope)
    [other] = put(shard, embedder, ALICE, [f"Alice's locker code is 4471 {KEEP}"], scope=scope)
    assert shard.delete(ALICE, r1.node.id, op="f1")
    logged = [Event.decode(b, s) for k in shard.store.event_scopes() for s, b in shard.store.read_events(k)]
    forgotten = [e for e in logged if e.kind is EventKind.FORGOTTEN]
    assert forgotten and all(e.node.content == "" for e in forgotten)  # forget writes no content
    shard.flush()
    assert hits_in_files(tmp_path, MARK), "forget is soft: the log still holds the content"
    counts = shard.erase(Selector.of(org="acme", memory_ids=[r1.node.id]))
    assert counts["memories"] == 0 and counts["events"] >= 1 and counts["ops"] >= 1
    history = shard.history(ALICE, "favourite_colour", scope)
    assert [(e.kind, e.node.id) for e in history] == [(EventKind.ASSERTED, r1.node.id),
                                                      (EventKind.ASSERTED, r2.node.id)]  # kind and ids stay
    assert history[0].node.content == "" and history[0].data["outcome"] == "created"
    assert history[1].node.content == "navy" and history[1].data["replaced"] == r1.node.id
    assert shard.current_fact(ALICE, "favourite_colour", scope).content == "navy"
    assert shard.get(ALICE, other.id).content.endswith(KEEP)
    shard.close()
    assert hits_in_files(tmp_path, MARK) == []
    assert hits_in_files(tmp_path, KEEP)


def test_dry_run_counts_and_changes_nothing(tmp_path, embedder, clock):
    shard = open_shard(tmp_path, clock)
    populate(shard, embedder, clock)
    before = dump(shard)
    dry = shard.erase(Selector.of(org="acme", user="alice"), dry_run=True)
    assert dry["memories"] == 6 and dry["events"] > 0 and dry["ops"] > 0 and dry["vectors"] == 8
    assert dump(shard) == before
    assert shard.erase(Selector.of(org="acme", user="alice")) == dry  # the dry run said what it does
    shard.close()


def test_second_erase_finds_nothing_and_changes_nothing(tmp_path, embedder, clock):
    shard = open_shard(tmp_path, clock)
    populate(shard, embedder, clock)
    sel = Selector.of(org="acme", agent="planner")
    first = shard.erase(sel)
    assert first["memories"] > 0
    after = dump(shard)
    assert shard.erase(sel) == dict.fromkeys(first, 0)
    assert dump(shard) == after
    shard.close()


def test_interrupted_erase_is_completed_on_reopen(tmp_path, embedder, clock):
    """A crash after the job is recorded and the records deleted, before the log and op
    records are scrubbed: the next open completes the job."""
    shard = open_shard(tmp_path, clock)
    made = populate(shard, embedder, clock)
    real = shard.store.scrub

    def crash(_scrub: object) -> None:
        raise StoreUnavailable("sqlite", "simulated crash mid-erase")

    shard.store.scrub = crash  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailable):
        shard.erase(Selector.of(org="acme", user="alice"))
    shard.store.scrub = real  # type: ignore[method-assign]
    assert shard.store.erase_job() is not None
    shard.close()
    assert hits_in_files(tmp_path, MARK), "the crash left content in the log"
    again = open_shard(tmp_path, clock)
    assert again.store.erase_job() is None
    assert again.get(BOB, made["kept"].id).content.endswith(KEEP)
    again.close()
    assert hits_in_files(tmp_path, MARK) == []


def test_job_recorded_before_anything_changed_is_completed(tmp_path, embedder, clock):
    shard = open_shard(tmp_path, clock)
    made = populate(shard, embedder, clock)
    sel = Selector.of(org="acme", user="alice")
    shard.store.set_erase_job(msgpack.packb([sel.pack(), shard.erase_targets(sel)]))
    shard.close()  # the process dies right after recording the job
    again = open_shard(tmp_path, clock)
    with pytest.raises(MemoryNotFound):
        again.get(ALICE, made["sem"].id)
    again.close()
    assert hits_in_files(tmp_path, MARK) == []


def test_bad_selectors_are_refused(tmp_path, clock):
    for kwargs in ({}, {"user": "alice"}, {"org": "acme"}, {"org": "acme", "memory_ids": []},
                   {"org": "acme", "memory_ids": "abc"}, {"org": "acme", "user": "a", "memory_ids": ["x"]},
                   {"org": 3, "user": "a"}, {"memory_ids": [""]}):  # fmt: skip
        with pytest.raises(InvalidRequest):
            Selector.of(**kwargs)


def test_erase_ids_of_another_org_erases_nothing(tmp_path, embedder, clock):
    shard = open_shard(tmp_path, clock)
    [mine] = put(shard, embedder, ALICE, [f"alice note {MARK}"])
    counts = shard.erase(Selector.of(org="globex", memory_ids=[mine.id]))
    assert counts["memories"] == 0 and counts["events"] == 0
    assert shard.get(ALICE, mine.id).content.endswith(MARK)
    shard.close()


def test_other_users_vectors_survive_the_index_rebuild(tmp_path, embedder, clock):
    shard = open_shard(tmp_path, clock)
    populate(shard, embedder, clock)
    shard.erase(Selector.of(org="acme", user="alice"))
    remaining = shard.store.count()
    assert shard.index.count() == remaining and not shard.index.stale
    vec = np.asarray(embedder.encode(["Hydra build server"])[0])
    assert shard.index.search(vec, 3, scope_keys=[Scope("acme", "bob").key])
    shard.close()


def test_erasing_one_source_removes_its_summary_and_frees_the_others(tmp_path, embedder, clock):
    """A summary derived from an erased memory goes with it; the sources left lose the
    link and are active again, so the next consolidation summarises what remains."""
    shard = open_shard(tmp_path, clock)
    texts = [f"Dana fixed the staging deploy script on day {i} {KEEP}" for i in range(3)]
    episodes = put(shard, embedder, ALICE, texts)
    policy = ConsolidationPolicy(min_cluster=2, similarity=0.5)
    summary = f"Dana keeps fixing the staging deploy script {MARK}"
    sem = shard.apply_consolidation([n.id for n in episodes], summary, embedder.encode([summary])[0], clock.now(),
                                    policy)  # fmt: skip
    assert sem is not None and all(shard.get(ALICE, n.id).status.value == "consolidated" for n in episodes)
    counts = shard.erase(Selector.of(memory_ids=[episodes[0].id]))
    assert counts["memories"] == 1 and counts["summaries"] == 1 and counts["relinked"] == 2
    with pytest.raises(MemoryNotFound):
        shard.get(ALICE, sem.id)
    left = [shard.get(ALICE, n.id) for n in episodes[1:]]
    assert all(n.status.value == "active" and n.children == () for n in left)
    plan = shard.consolidation_plan(clock.now(), policy)
    assert [sorted(m.id for m in c.members) for c in plan] == [sorted(n.id for n in left)]
    shard.close()
    assert hits_in_files(tmp_path, MARK) == []
