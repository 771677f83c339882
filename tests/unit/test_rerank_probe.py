"""benchmarks/rerank_probe.py's two reorderings do what docs/retrieval.md says they do:
the bridge lifts only a candidate below the top m that shares a rare word with the top m
(not a word of the question), and MMR passes over a near-duplicate of what it picked."""

from __future__ import annotations

from collections import Counter

import numpy as np

from benchmarks.rerank_probe import Probe


def _probe() -> Probe:
    words = {
        ("c", "D1:1"): {"tilly", "stuffed", "dog"},
        ("c", "D1:2"): {"weather", "nice"},
        ("c", "D2:1"): {"stuffed", "pup", "gift"},
        ("c", "D2:2"): {"dog", "walk"},
    }
    seen: Counter[str] = Counter()
    for ws in words.values():
        seen.update(ws)
    for _ in range(40):  # "dog" and "walk" common, the rest rare
        seen.update({"dog", "walk"})
    e = np.eye(4, dtype=np.float32)
    vecs = {("c", "D1:1"): e[0], ("c", "D1:2"): e[0] * 0.99 + e[1] * 0.14, ("c", "D2:1"): e[2], ("c", "D2:2"): e[3]}
    return Probe(words, vecs, {"c": (seen, 44)})


def _row(scores: list[float]) -> dict[str, object]:
    return {"conv": "c", "q": "Who is Tilly?", "ranked": ["D1:1", "D1:2", "D2:1", "D2:2"], "scores": scores}


def test_the_bridge_lifts_only_a_candidate_sharing_a_rare_word_with_the_top() -> None:
    probe = _probe()
    row = _row([0.9, 0.5, 0.45, 0.44])
    assert probe.bridge(row, beta=0.0, m=1, rare=2.0) == row["ranked"]
    lifted = probe.bridge(row, beta=0.2, m=1, rare=2.0)
    assert lifted[:2] == ["D1:1", "D2:1"]  # shares "stuffed" (rare) with the top hit
    assert lifted.index("D2:2") > lifted.index("D1:2")  # shares only "dog", a common word


def test_mmr_passes_over_a_near_duplicate_and_keeps_the_order_at_lam_1() -> None:
    probe = _probe()
    row = _row([0.9, 0.8, 0.7, 0.6])
    assert probe.mmr(row, lam=1.0) == row["ranked"]
    assert probe.mmr(row, lam=0.8)[:2] == ["D1:1", "D2:1"]  # D1:2 is nearly D1:1's vector


def test_a_row_without_scores_is_left_as_it_is() -> None:
    probe = _probe()
    row = _row([])
    assert probe.bridge(row, beta=0.5, m=1, rare=0.0) == row["ranked"]
    assert probe.mmr(row, lam=0.5) == row["ranked"]
