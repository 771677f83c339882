"""The in-RAM vector cache recall searches exactly: against a plain dict, under churn."""

from __future__ import annotations

import numpy as np

from memorybus.retrieval.vectorcache import VectorCache


def _unit(rng: np.random.Generator, dim: int = 16) -> np.ndarray:
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def _expected(ref: dict[str, tuple[str, np.ndarray]], q: np.ndarray, scopes: list[str], limit: int) -> list[str]:
    rows = [(i, float(v @ q)) for i, (s, v) in ref.items() if s in scopes]
    rows.sort(key=lambda x: (-x[1], x[0]))
    return [i for i, _ in rows[:limit]]


def test_search_scores_and_counts_match_a_plain_dict_through_adds_moves_and_removals() -> None:
    rng = np.random.default_rng(7)
    cache = VectorCache()
    ref: dict[str, tuple[str, np.ndarray]] = {}
    scopes = [f"s{i}" for i in range(5)]
    for step in range(6000):
        memory_id = f"m{int(rng.integers(0, 400))}"
        op = rng.random()
        if op < 0.55:  # add, re-index in place, or move to another scope
            scope = scopes[int(rng.integers(0, len(scopes)))]
            vec = _unit(rng)
            cache.add(memory_id, scope, vec)
            ref[memory_id] = (scope, vec)
        else:
            cache.remove(memory_id)
            ref.pop(memory_id, None)
        if step % 250 == 0:
            q = _unit(rng)
            visible = [scopes[i] for i in sorted(set(rng.integers(0, len(scopes), 3).tolist()))]
            for limit in (1, 7, 1000):
                got = cache.search(q, visible, limit)
                assert [i for i, _ in got] == _expected(ref, q, visible, limit)
                for i, cos in got:
                    assert abs(cos - float(ref[i][1] @ q)) < 1e-5
            assert cache.live_count(visible) == sum(1 for s, _ in ref.values() if s in visible)
            assert len(cache) == len(ref)
            asked = [f"m{i}" for i in range(0, 400, 3)]
            scores = cache.scores(q, asked)
            assert set(scores) == {i for i in asked if i in ref}
            for i, cos in scores.items():
                assert abs(cos - float(ref[i][1] @ q)) < 1e-5
            scan = cache.scan(q, visible)  # the scan's cosines: the visible ones read off it, others computed
            assert [i for i, _ in scan.top(7)] == _expected(ref, q, visible, 7)
            from_scan = scan.scores(asked)
            assert set(from_scan) == set(scores)
            for i, cos in from_scan.items():
                assert abs(cos - scores[i]) < 1e-5
            for i in asked:
                vec = cache.vector(i)
                assert (vec is None) == (i not in ref)
                if vec is not None:
                    assert np.array_equal(vec, ref[i][1])
    # removed rows are reclaimed: rows stay within twice the live ones plus the slack
    assert cache.rows() <= 2 * len(ref) + 16 * len(scopes)


def test_a_memory_moved_to_another_scope_is_found_only_there_and_emptied_scopes_are_dropped() -> None:
    rng = np.random.default_rng(1)
    cache = VectorCache()
    v = _unit(rng)
    cache.add("a", "org", v)
    cache.add("a", "user", v)
    assert cache.search(v, ["org"], 5) == []
    assert [i for i, _ in cache.search(v, ["user"], 5)] == ["a"]
    assert cache.live_count(["org", "user"]) == 1
    cache.remove("a")
    assert cache.search(v, ["org", "user"], 5) == [] and len(cache) == 0 and cache.rows() == 0
    cache.add("b", "org", np.ones(8, dtype=np.float32))  # another width than the cache's: ignored
    cache.add("c", "org", np.ones(16, dtype=np.float32))
    assert cache.has("c") and not cache.has("b")
    assert cache.search(v, ["org"], 0) == []


def test_a_scan_never_reads_rows_that_moved_after_it() -> None:
    """A block compacted (or grown) after a scan renumbers its rows: the scan then scores
    the memories asked for again instead of reading another memory's cosine."""
    rng = np.random.default_rng(3)
    cache = VectorCache()
    vecs = {f"m{i}": _unit(rng) for i in range(100)}
    for i, v in vecs.items():
        cache.add(i, "s", v)
    q = _unit(rng)
    scan = cache.scan(q, ["s"])
    for i in [f"m{i}" for i in range(60)]:  # enough removals to compact the block
        cache.remove(i)
    cache.add("new", "s", _unit(rng))
    got = scan.scores(["m70", "m99", "new", "m3"])
    assert set(got) == {"m70", "m99", "new"}
    for i in ("m70", "m99"):
        assert abs(got[i] - float(vecs[i] @ q)) < 1e-5
