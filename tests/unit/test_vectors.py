"""VectorIndex contract over Qdrant Edge and qdrant-client local mode (real files)."""

import numpy as np
import pytest

from memorybus import MemoryKind, MemoryNode, MemoryStatus, Scope
from memorybus.storage.vectors import EdgeVectorIndex, QdrantClientIndex

DIM = 16


@pytest.fixture(params=["edge", "qdrant-local"])
def index(request, tmp_path):
    if request.param == "edge":
        idx = EdgeVectorIndex(tmp_path / "edge", DIM)
    else:
        idx = QdrantClientIndex("t", DIM, path=str(tmp_path / "ql"))
    yield idx
    idx.close()


def mk(i, scope, kind=MemoryKind.EPISODIC, vec=None):
    rng = np.random.default_rng(i)
    v = rng.normal(size=DIM).astype(np.float32) if vec is None else vec
    return MemoryNode(content=f"m{i}", scope=scope, kind=kind, embedding=v / np.linalg.norm(v))


def test_search_filters_by_scope_kind_status(index):
    a, b = Scope("o", "u1"), Scope("o", "u2")
    nodes = [
        mk(i, a if i % 2 else b, MemoryKind.SEMANTIC if i % 3 == 0 else MemoryKind.EPISODIC)
        for i in range(30)
    ]
    index.upsert(nodes)
    assert index.count() == 30
    q = nodes[1].embedding
    hits = index.search(q, 5, scope_keys=[a.key])
    assert hits[0][0] == nodes[1].id and hits[0][1] == pytest.approx(1.0, abs=1e-4)
    in_a = {n.id for n in nodes if n.scope == a}
    assert all(h[0] in in_a for h in hits)
    sem = index.search(q, 30, scope_keys=[a.key, b.key], kinds=[MemoryKind.SEMANTIC])
    assert {h[0] for h in sem} == {n.id for n in nodes if n.kind is MemoryKind.SEMANTIC}
    index.set_status([nodes[1].id], MemoryStatus.ARCHIVED)
    active = index.search(q, 5, scope_keys=[a.key], statuses=[MemoryStatus.ACTIVE])
    assert nodes[1].id not in {h[0] for h in active}
    archived = index.search(q, 5, scope_keys=[a.key], statuses=[MemoryStatus.ARCHIVED])
    assert [h[0] for h in archived] == [nodes[1].id]
    assert index.search(q, 5, scope_keys=[]) == []


def test_delete_and_reset(index):
    s = Scope("o")
    nodes = [mk(i, s) for i in range(10)]
    index.upsert(nodes)
    index.delete([nodes[0].id, nodes[1].id])
    assert index.count() == 8
    assert nodes[0].id not in {h[0] for h in index.search(nodes[0].embedding, 10, scope_keys=[s.key])}
    index.reset()
    assert index.count() == 0
    index.upsert(nodes[:3])
    assert index.count() == 3


def test_edge_index_persists_across_reopen(tmp_path):
    s = Scope("o")
    idx = EdgeVectorIndex(tmp_path / "e", DIM)
    idx.upsert([mk(i, s) for i in range(5)])
    idx.flush()
    idx.close()
    again = EdgeVectorIndex(tmp_path / "e", DIM)
    assert again.count() == 5
    again.close()
