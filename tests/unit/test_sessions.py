"""Sessions from time (memorybus.retrieval.sessions): the partition is the one a pause of
more than the gap defines, whatever order memories come and go in; vectors follow."""

from __future__ import annotations

import random

import numpy as np
import pytest

from memorybus.retrieval.sessions import Sessions


def brute(present: dict[str, tuple[str, float]], gap: float) -> set[frozenset[str]]:
    """The partition by definition: per group, sorted times cut where a pause exceeds ``gap``."""
    out: set[frozenset[str]] = set()
    for group in {g for g, _ in present.values()}:
        items = sorted((t, i) for i, (g, t) in present.items() if g == group)
        run: list[str] = []
        last = None
        for t, i in items:
            if last is not None and t - last > gap:
                out.add(frozenset(run))
                run = []
            run.append(i)
            last = t
        out.add(frozenset(run))
    return out


def sums(present: dict[str, tuple[str, float]], vectors: dict[str, np.ndarray], s: Sessions) -> None:
    """Each session's centroid cosine equals the one computed from its members."""
    for members in s.partition():
        sid = s.session(next(iter(members)))
        assert sid is not None and s.size(sid) == len(members)
        probe = vectors[min(members)]
        if len(members) == 1:
            assert s.scores(probe, [sid]) == {}  # one memory keeps no sum: nothing to lift it by
            continue
        mean = np.sum([vectors[i] for i in members], axis=0)
        want = float(mean @ probe / max(np.linalg.norm(mean), 1e-9))
        assert s.scores(probe, [sid])[sid] == pytest.approx(want, abs=1e-4)


@pytest.mark.parametrize("seed", range(12))
def test_the_partition_is_the_definition_after_any_adds_and_removes(seed):
    rng = random.Random(seed)
    gap = rng.choice([1.0, 5.0, 30.0])
    vectors: dict[str, np.ndarray] = {}
    s = Sessions(gap, vectors.get)
    present: dict[str, tuple[str, float]] = {}
    for step in range(400):
        if present and rng.random() < 0.35:
            victim = rng.choice(sorted(present))
            del present[victim]
            s.remove(victim)
        else:
            i = f"m{step}"
            group = rng.choice(["a", "b"])
            # clusters of times, repeated times, times exactly a gap apart, negative times
            t = rng.choice([rng.uniform(-50, 200), round(rng.uniform(0, 100)) * 1.0,
                            rng.choice(list(present.values()) or [("a", 0.0)])[1] + rng.choice([0, gap, -gap, gap * 1.01])])
            vectors[i] = np.asarray([rng.uniform(-1, 1) for _ in range(4)], dtype=np.float32)
            present[i] = (group, t)
            s.add(i, group, t)
        if step % 20 == 0:
            assert s.partition() == brute(present, gap)
    assert s.partition() == brute(present, gap)
    assert len(s) == len(present)
    sums(present, vectors, s)


def test_order_of_arrival_does_not_change_the_sessions():
    times = [0, 3, 7, 20, 21, 50, 54, 58, 62, 100]
    items = {f"m{k}": ("g", float(t)) for k, t in enumerate(times)}
    parts = set()
    for seed in range(6):
        order = list(items)
        random.Random(seed).shuffle(order)
        s = Sessions(4.0, lambda _: None)
        for i in order:
            s.add(i, *items[i])
        parts.add(frozenset(s.partition()))
    assert len(parts) == 1
    assert next(iter(parts)) == {frozenset({"m0", "m1", "m2"}), frozenset({"m3", "m4"}),
                                 frozenset({"m5", "m6", "m7", "m8"}), frozenset({"m9"})}


def test_a_memory_between_two_sessions_joins_them_and_its_removal_splits_them_again():
    vecs = {"a": np.array([1.0, 0.0]), "b": np.array([0.0, 1.0]), "mid": np.array([1.0, 1.0])}
    s = Sessions(10.0, vecs.get)
    s.add("a", "g", 0.0)
    s.add("b", "g", 15.0)
    assert s.session("a") != s.session("b")
    s.add("mid", "g", 8.0)
    assert s.session("a") == s.session("b") == s.session("mid")
    joined = s.session("a")
    assert s.scores(np.array([1.0, 0.0]), [joined]) == {joined: pytest.approx((1 + 0 + 1) / np.sqrt(2**2 + 2**2))}
    s.remove("mid")
    assert s.session("a") != s.session("b")
    assert s.scores(np.array([1.0, 0.0]), [s.session("a"), s.session("b")]) == {}  # two sessions of one
    s.add("a2", "g", 1.0)
    vecs["a2"] = np.array([1.0, 0.0])
    s.remove("a2")
    s.add("a2", "g", 1.0)
    assert s.scores(np.array([1.0, 0.0]), [s.session("a")]) == {s.session("a"): pytest.approx(1.0)}
    # groups never mix, however close their times
    s.add("other", "h", 1.0)
    assert s.session("other") not in (s.session("a"), s.session("b"))
    # re-adding an id moves it
    s.add("b", "g", 2.0)
    assert s.session("a") == s.session("b")
    assert s.partition() == {frozenset({"a", "a2", "b"}), frozenset({"other"})}


@pytest.mark.parametrize("gap", [0, -1, float("nan"), float("inf")])
def test_a_gap_that_is_not_a_positive_number_is_refused(gap):
    with pytest.raises(ValueError):
        Sessions(gap, lambda _: None)


def test_a_shard_rebuilds_the_same_sessions_from_its_store(tmp_path):
    """Sessions are derived: after a restart (and after a crash, the index rebuilt from the
    store) a shard groups its memories as before, forgotten ones left out."""
    from memorybus import Context, ManualClock, MemoryNode
    from memorybus.config import RankingWeights
    from memorybus.shard import Shard
    from memorybus.storage.sqlite import SqliteStore
    from memorybus.storage.vectors import EdgeVectorIndex

    dim, ctx = 8, Context("acme", "u1", "planner")

    def open_shard():
        return Shard("shard-0", SqliteStore(tmp_path / "r.sqlite"), EdgeVectorIndex(tmp_path / "v", dim), dim=dim,
                     clock=ManualClock(), ranking=RankingWeights(session_gap=600.0))  # fmt: skip

    rng = np.random.default_rng(3)
    times = [0, 100, 650, 5000, 5100, 5200, 9000, 9000, 9700]  # gaps of 550 / 4350 / 3800 / 700 s
    nodes = [MemoryNode(content=f"note {k}", scope=ctx.scope, valid_from=1.7e9 + t) for k, t in enumerate(times)]
    vectors = rng.normal(size=(len(nodes), dim)).astype(np.float32)
    shard = open_shard()
    stored = shard.put_many(ctx, nodes, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    ids = [n.id for n in stored]
    before = shard.core.index.structure.sessions.partition()
    assert before == {frozenset(ids[0:3]), frozenset(ids[3:6]), frozenset(ids[6:8]), frozenset(ids[8:9])}
    shard.delete(ctx, ids[4])  # 5000 and 5200 are 200 s apart: still one session
    after_forget = shard.core.index.structure.sessions.partition()
    assert after_forget == {frozenset(ids[0:3]), frozenset([ids[3], ids[5]]), frozenset(ids[6:8]), frozenset(ids[8:9])}
    shard.close()
    again = open_shard()
    assert again.core.index.structure.sessions.partition() == after_forget
    # a crash: no checkpoint, the vector index rebuilt from the store
    again.core.index.index.close()
    again.store.close()
    third = open_shard()
    assert third.core.index.structure.sessions.partition() == after_forget
    third.close()
