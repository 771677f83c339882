"""benchmarks/encoders.py measures each model through the bus's encoder path, the shipped
model first and every other relative to it, in the same run."""

import json

import pytest

from benchmarks import encoders

pytestmark = [pytest.mark.model]


def test_each_model_is_timed_in_rounds_and_compared_with_the_shipped_one(projected_model_path, model_path, tmp_path):
    out = tmp_path / "encoders.json"
    assert encoders.main(["--model", projected_model_path, "--n", "40", "--queries", "5", "--rounds", "2",
                          "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    models = result["models"]
    assert list(models) == [model_path, projected_model_path]  # the shipped model first, then as given
    default, other = models[model_path], models[projected_model_path]
    assert default["dim"] == 384 and other["dim"] == 48  # each model's own vectors, not one model twice
    assert default["ingest_vs_default"] == 1.0 and default["query_p50_vs_default"] == 1.0
    for row in (default, other):
        assert len(row["runs"]) == 2  # one per round
        assert row["ingest_texts_per_s"] > 0 and 0 < row["query_ms_p50"] <= row["query_ms_p95"]
        # the median over the rounds (of two: their mean)
        assert row["ingest_texts_per_s"] == pytest.approx(sum(r["ingest_texts_per_s"] for r in row["runs"]) / 2)
    assert other["ingest_vs_default"] == pytest.approx(other["ingest_texts_per_s"] / default["ingest_texts_per_s"])


def test_a_model_directory_that_is_not_a_model_fails_before_anything_is_timed(tmp_path, monkeypatch):
    from memorybus.errors import EmbeddingError

    timed = []
    monkeypatch.setattr(encoders, "measure", lambda *a: timed.append(a))
    (tmp_path / "config.json").write_text("{}")  # a directory, but no model's files in it
    with pytest.raises(EmbeddingError):
        encoders.main(["--model", str(tmp_path), "--n", "8", "--queries", "1", "--rounds", "1"])
    with pytest.raises(EmbeddingError, match="no such directory"):
        encoders.main(["--model", str(tmp_path / "absent"), "--n", "8", "--queries", "1", "--rounds", "1"])
    assert timed == []
