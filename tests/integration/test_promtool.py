"""promtool on the deploy files: the rules parse, behave as their unit tests say
(deploy/prometheus/alerts_test.yml: each alert fires on the series Ray exports and
stays quiet otherwise), prometheus.yml loads them, and every dashboard expression
parses. promtool comes from scripts/promtool.sh (PATH, else the Debian package)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

pytestmark = pytest.mark.promtool


@pytest.fixture(scope="module")
def promtool() -> str:
    out = subprocess.run(["bash", str(ROOT / "scripts" / "promtool.sh")], capture_output=True, text=True,
                         timeout=300, check=True)  # fmt: skip
    return out.stdout.strip().splitlines()[-1]


def run(promtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, check=False)


def test_alert_rules_parse(promtool):
    res = run(promtool, "check", "rules", str(DEPLOY / "prometheus" / "alerts.yml"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 12 rules found" in res.stdout


def test_alert_rules_fire_as_their_unit_tests_say(promtool):
    res = run(promtool, "test", "rules", str(DEPLOY / "prometheus" / "alerts_test.yml"))
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_naive_counter_rule_fails_the_unit_tests(promtool, tmp_path):
    """The unit tests can fail: rate() misses a store error whose series is born at 1."""
    alerts = (DEPLOY / "prometheus" / "alerts.yml").read_text()
    rules = yaml.safe_load(alerts)
    for rule in rules["groups"][0]["rules"]:
        if rule["alert"] == "MemorybusStoreErrors":
            rule["expr"] = "sum by (namespace, shard) (rate(ray_memorybus_store_errors_total[10m])) > 0"
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "alerts_test.yml").write_text((DEPLOY / "prometheus" / "alerts_test.yml").read_text())
    res = run(promtool, "test", "rules", str(tmp_path / "alerts_test.yml"))
    assert res.returncode != 0
    assert "MemorybusStoreErrors" in res.stdout + res.stderr


def test_prometheus_config_loads_the_rules(promtool):
    res = run(promtool, "check", "config", str(DEPLOY / "prometheus.yml"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 1 rule files found" in res.stdout + res.stderr


def test_every_dashboard_expression_parses(promtool, tmp_path):
    dash = json.loads((DEPLOY / "grafana" / "memorybus.json").read_text())
    exprs = [t["expr"].replace("$namespace", ".*") for p in dash["panels"] for t in p["targets"]]
    rules = [{"record": f"memorybus:dashboard:{i}", "expr": e} for i, e in enumerate(exprs)]
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    res = run(promtool, "check", "rules", str(path))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in res.stdout
