"""`memorybus eval locomo` end to end on a tiny synthetic conversation (real Ray, model, files)."""

import json
import logging

import pytest

from memorybus.cli import main
from tests.unit.test_retrieval_eval import locomo_sample

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(600)]


def test_eval_locomo_cli_reports_both_modes_both_search_paths_and_the_baselines(tmp_path, capsys, caplog):
    import ray

    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(locomo_sample()))
    out = tmp_path / "out"
    caplog.set_level(logging.INFO, logger="memorybus")
    assert main(["eval", "locomo", "--data", str(data), "--out", str(out), "--no-progress", "--shards", "1"]) == 0
    # one local Ray for the run's two buses (exact and index paths), stopped at its end
    starts = [r for r in caplog.records if r.getMessage() == "starting a local Ray"]
    assert len(starts) == 1 and not ray.is_initialized()
    result = json.loads((out / "locomo.json").read_text())
    ours = ["memorybus_structured", "memorybus_plain", "memorybus_structured_index", "memorybus_plain_index"]
    assert result["methods"] == [*ours, "bm25_en", "bm25", "dense", "rrf", "dense_dated"]
    assert "said" in result["baseline_texts"]["dense_dated"] and result["model"].startswith("all-MiniLM-L6-v2")
    for method in result["methods"]:
        assert 0.0 <= result[method]["overall"]["recall@10"] <= 1.0
        assert set(result[method]["by_category"]) >= {"multi-hop", "temporal", "single-hop"}
        assert result[method]["overall"]["n"] == 3
    # the vector index finds what the exact path finds
    for mode in ("structured", "plain"):
        exact, index = result[f"memorybus_{mode}"], result[f"memorybus_{mode}_index"]
        assert exact["overall"]["recall@10"] == index["overall"]["recall@10"]
    speed = result["speed"]
    assert speed["raw"]["query_ms"]["p50"] > 0 and speed["raw"]["sentence_transformers_path"]["encode_rate"] > 0
    for method in ours:
        assert speed[method]["ingest_rate"] > 0 and speed["ratios"][method]["recall_p50"] > 0
    assert (out / "locomo_recall.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "memorybus_plain_index" in printed and "bm25_en" in printed
