"""`memorybus eval locomo` end to end on a tiny synthetic conversation (real Ray, model, files)."""

import json

import pytest

from memorybus.cli import main
from tests.unit.test_retrieval_eval import locomo_sample

pytestmark = [pytest.mark.ray, pytest.mark.model, pytest.mark.timeout(300)]


def test_eval_locomo_cli_writes_json_and_plot(tmp_path, capsys):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(locomo_sample()))
    out = tmp_path / "out"
    assert main(["eval", "locomo", "--data", str(data), "--out", str(out), "--no-progress", "--shards", "1"]) == 0
    result = json.loads((out / "locomo.json").read_text())
    assert result["methods"] == ["memorybus", "bm25", "dense", "rrf"]
    for method in result["methods"]:
        assert 0.0 <= result[method]["overall"]["recall@10"] <= 1.0
        assert set(result[method]["by_category"]) >= {"multi-hop", "temporal", "single-hop"}
    assert result["memorybus"]["overall"]["recall@10"] == 1.0  # 3 memories: everything is in the top 10
    assert result["speed"]["memorybus"]["ingest_rate"] > 0 and result["speed"]["raw"]["query_ms"]["p50"] > 0
    assert (out / "locomo_recall.png").stat().st_size > 1000
    assert "recall@10" in capsys.readouterr().out
