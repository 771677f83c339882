"""The vector index's HNSW graph is built in another process and swapped in: the shard
serves and writes meanwhile, no change made during the build is lost, and a build that
fails or is overtaken leaves the old index serving (real SQLite, Qdrant Edge, a real
build process)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from memorybus import Context, ManualClock, MemoryNode, MemoryStatus
from memorybus.shard import Shard
from memorybus.storage.sqlite import SqliteStore
from memorybus.storage.vectors import EdgeVectorIndex

DIM = 384
CTX = Context("acme", "u1", "a1")


def _shard(tmp_path) -> Shard:
    return Shard("shard-0", SqliteStore(tmp_path / "r.sqlite"), EdgeVectorIndex(tmp_path / "v", DIM), dim=DIM,
                 clock=ManualClock())  # fmt: skip


@pytest.fixture
def shard(tmp_path):
    s = _shard(tmp_path)
    yield s
    s.close()


def _vectors(rng, n):
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _put(shard, rng, n, prefix):
    vectors = _vectors(rng, n)
    nodes = shard.put_many(CTX, [MemoryNode(content=f"{prefix} {i}", scope=CTX.scope) for i in range(n)], vectors)
    return nodes, vectors


def _top(shard, vector):
    """The on-disk index's nearest active point, read as the shard's reads are (its gate)."""
    with shard.gate.read():
        return shard.index.index.search(vector, 1, scope_keys=[CTX.scope.key], statuses=[MemoryStatus.ACTIVE])


def _building(shard) -> tuple[threading.Thread, dict]:
    """A build started on a thread, returned once the copy is made and changes journal."""
    result: dict = {}
    builder = threading.Thread(target=lambda: result.update(shard.build_vector_index(min_points=0)))
    builder.start()
    deadline = time.monotonic() + 30
    while shard.index._journal is None and builder.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    return builder, result


def test_a_build_runs_in_another_process_while_the_shard_writes_and_keeps_every_change(tmp_path):
    rng = np.random.default_rng(1)
    shard = _shard(tmp_path)
    old, old_vectors = _put(shard, rng, 4000, "old")
    ticks = 0
    builder, result = _building(shard)
    # the build runs elsewhere: this process writes, searches and runs its threads meanwhile
    new, new_vectors = _put(shard, rng, 30, "new")
    for node in old[:20]:
        assert shard.delete(CTX, node.id)
    assert builder.is_alive(), "the build ended before the writes: the test saw no overlap"
    while builder.is_alive():
        ticks += 1
        assert _top(shard, new_vectors[0])[0][0] == new[0].id
        time.sleep(0.01)
    builder.join()
    assert result["built"] is True, result
    assert ticks > 10, "the shard's process stood still while the index was built"
    assert not os.path.exists(f"{tmp_path / 'v'}.build")
    # the swapped-in index holds every change made during the build
    assert shard.index.count() == 4000 + 30 - 20  # a forgotten memory leaves the vector index
    assert [_top(shard, v)[0][0] for v in new_vectors[:5]] == [n.id for n in new[:5]]
    assert all(_top(shard, old_vectors[i])[0][0] != old[i].id for i in range(20))  # forgotten: gone
    assert _top(shard, old_vectors[100])[0][0] == old[100].id
    # and it is the index a restart trusts (after its checkpoint), holding the same
    shard.close()
    again = _shard(tmp_path)
    try:
        assert again.core.index_trusted
        assert _top(again, new_vectors[7])[0][0] == new[7].id
    finally:
        again.close()


def test_a_build_that_fails_leaves_the_old_index_serving_and_no_copy(shard, tmp_path):
    rng = np.random.default_rng(2)
    nodes, vectors = _put(shard, rng, 500, "m")
    out = shard.build_vector_index(min_points=0, timeout=0.01)  # the build process cannot finish in time
    assert out["built"] is False and "ran past" in out["reason"]
    assert not os.path.exists(f"{tmp_path / 'v'}.build")
    assert shard.index._journal is None and not shard.index.stale
    more, more_vectors = _put(shard, rng, 5, "after")
    assert shard.index.count() == 505
    assert _top(shard, more_vectors[0])[0][0] == more[0].id
    assert _top(shard, vectors[3])[0][0] == nodes[3].id


def test_a_small_or_unchanged_index_is_not_built(shard, tmp_path):
    _put(shard, np.random.default_rng(3), 50, "m")
    assert shard.build_vector_index()["reason"] == "not due"  # 50 points: under the threshold
    assert shard.build_vector_index(min_points=0)["built"] is True
    assert shard.build_vector_index(min_points=0)["reason"] == "not due"  # nothing changed since


def test_a_rebuild_from_the_store_during_a_build_overtakes_it(shard, tmp_path):
    rng = np.random.default_rng(4)
    _put(shard, rng, 3000, "m")
    builder, result = _building(shard)
    with shard.gate.write():
        shard.index.load(shard.store.iter_all())  # what a repair does
    builder.join()
    assert result["built"] is False and "overtaken" in result["reason"]
    assert shard.index.count() == 3000 and not shard.index.stale


def test_a_shard_closed_during_a_build_is_not_swapped_and_reopens_whole(tmp_path):
    rng = np.random.default_rng(5)
    shard = _shard(tmp_path)
    nodes, vectors = _put(shard, rng, 3000, "m")
    builder, result = _building(shard)
    shard.close()
    builder.join()
    assert result["built"] is False
    assert not os.path.exists(f"{tmp_path / 'v'}.build")
    again = _shard(tmp_path)
    try:
        assert again.index.count() == 3000
        assert _top(again, vectors[42])[0][0] == nodes[42].id
    finally:
        again.close()
