"""benchmarks/redis_cluster.py's summary: medians per setting, and ratios to the single
Redis paired round by round (a slow round moves every setting measured in it)."""

from benchmarks.redis_cluster import summarise


def _round(ingest: float, recall: float) -> dict[str, float]:
    return {"ingest_per_s": ingest, "recall_per_s": recall}


def test_paired_ratios_follow_each_round_and_medians_do_not():
    runs = {
        "single Redis": [_round(100, 50), _round(50, 25), _round(200, 100)],
        "cluster, 1 primary": [_round(90, 50), _round(45, 25), _round(180, 100)],
        "cluster, 3 primaries": [_round(95, 40), _round(60, 20), _round(150, 120)],
    }
    rows = summarise(runs)
    assert [r["setting"] for r in rows] == list(runs)
    single, one, three = rows
    assert (single["ingest_per_s"], single["recall_per_s"]) == (100, 50)
    assert "ingest_vs_single_paired" not in single
    # 1 primary: 0.9 of the single Redis in every round, whatever the round's speed
    assert one["ingest_vs_single_paired"] == {"median": 0.9, "min": 0.9, "max": 0.9}
    assert one["recall_vs_single_paired"] == {"median": 1.0, "min": 1.0, "max": 1.0}
    # 3 primaries: per round 0.95, 1.2, 0.75 -> median 0.95; the medians of the rates give 95/100
    assert three["ingest_vs_single_paired"] == {"median": 0.95, "min": 0.75, "max": 1.2}
    assert three["ingest_vs_single"] == 0.95
    assert three["recall_vs_single_paired"] == {"median": 0.8, "min": 0.8, "max": 1.2}
    assert three["recall_vs_single"] == 0.8  # median rate 40 / 50
    assert three["ingest_vs_1_primary"] == round(95 / 90, 3)
