"""The alert rules and the Grafana dashboard name only metrics the code exports.

Exported names are collected from the source (every ``metrics.Counter/Gauge/Histogram``
constructor under memorybus/), then named as Ray 2.60's agent exports them (measured:
``ray_`` prefix; counters ``_total``; histograms ``_bucket``/``_sum``/``_count``). A
metric renamed in code, or a typo in a rule, fails here. ``promtool`` checks the
syntax and the rules' behaviour (tests/integration/test_promtool.py).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "memorybus.json"
PROMETHEUS = ROOT / "deploy" / "prometheus.yml"

#: metrics the rules may use that memorybus does not export itself: none (Redis memory
#: and backup times come from the bus's own gauges, so no redis_exporter is required)
EXTERNAL: frozenset[str] = frozenset()

_CTOR = re.compile(r"metrics\.(Counter|Gauge|Histogram)\(\s*([^,]+),")
_KIND = re.compile(r'^\s+kind = "(\w+)"', re.MULTILINE)
_SUFFIX = {"Counter": ("_total",), "Gauge": ("",), "Histogram": ("_bucket", "_sum", "_count")}


def _constants(package: Path) -> dict[str, str]:
    """Module-level string constants of monitoring.py (``NAME = "..."``)."""
    tree = ast.parse((package / "operator" / "monitoring.py").read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def exported_names(package: Path) -> set[str]:
    """Every metric name Ray exports for the metrics registered under ``package``."""
    consts = _constants(package)
    names: set[str] = set()
    for path in package.rglob("*.py"):
        text = path.read_text()
        kinds = _KIND.findall(text)
        for ctor, raw in _CTOR.findall(text):
            arg = raw.strip()
            if arg.startswith('f"') and "{self.kind}" in arg:
                registered = [arg[2:-1].replace("{self.kind}", k) for k in kinds]
            elif arg.startswith('"'):
                registered = [arg.strip('"')]
            else:  # mon.NAME / monitoring.NAME
                const = arg.rsplit(".", 1)[-1]
                assert const in consts, f"{path}: metric name {arg} is not a constant of monitoring.py"
                registered = [consts[const]]
            assert registered, f"{path}: cannot resolve the metric name {arg}"
            names |= {f"ray_{n}{suffix}" for n in registered for suffix in _SUFFIX[ctor]}
    return names


_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
             "unless", "inf", "nan", "le"}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (not functions, labels or keywords)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)  # label lists
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges and subqueries
    expr = re.sub(r"\boffset\s+\w+", "", expr)
    names = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", expr):
        word, call = m.group(1), m.group(2)
        if call is None and word not in _KEYWORDS:
            names.add(word)
    return names


def alert_exprs() -> dict[str, str]:
    rules = yaml.safe_load(ALERTS.read_text())["groups"][0]["rules"]
    return {r["alert"]: r["expr"] for r in rules}


def dashboard_exprs() -> dict[str, str]:
    dash = json.loads(DASHBOARD.read_text())
    out = {}
    for panel in dash["panels"]:
        for target in panel["targets"]:
            out[f"{panel['title']} {target['refId']}"] = target["expr"].replace("$namespace", ".*")
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            out[f"variable {var['name']}"] = re.sub(r"label_values\((\w+),.*\)", r"\1", var["definition"])
    return out


def unknown(exprs: dict[str, str], exported: set[str]) -> dict[str, set[str]]:
    return {where: bad for where, e in exprs.items() if (bad := metric_names(e) - exported - EXTERNAL)}


def test_the_parser_finds_metrics_and_skips_functions_labels_and_keywords():
    expr = ('sum by (namespace, shard) (rate(ray_a_total{op="x"}[5m])) - (sum by (namespace) (ray_b offset 30m) '
            'or ray_c * 0) / on (namespace) histogram_quantile(0.9, ray_d_bucket) > bool 2 unless time() - ray_e')
    assert metric_names(expr) == {"ray_a_total", "ray_b", "ray_c", "ray_d_bucket", "ray_e"}


def test_collected_names_follow_rays_export_naming():
    names = exported_names(ROOT / "memorybus")
    # counters get _total, gauges stay, histograms get their three series; maintenance per kind
    for expected in ("ray_memorybus_shard_writes_total", "ray_memorybus_shard_memories",
                     "ray_memorybus_shard_starts_total", "ray_memorybus_store_errors_total",
                     "ray_memorybus_shard_recall_seconds_bucket", "ray_memorybus_redis_used_memory_bytes",
                     "ray_memorybus_backup_last_success_timestamp_seconds",
                     "ray_memorybus_delivery_oldest_undelivered_seconds",
                     "ray_memorybus_decay_errors_total", "ray_memorybus_consolidation_runs_total"):  # fmt: skip
        assert expected in names, expected
    assert "ray_memorybus_shard_writes" not in names  # a counter is only exported with _total


def test_every_alert_and_panel_names_only_exported_metrics():
    exported = exported_names(ROOT / "memorybus")
    assert unknown(alert_exprs(), exported) == {}
    assert unknown(dashboard_exprs(), exported) == {}


def test_the_alerts_cover_what_operators_need():
    used = set().union(*(metric_names(e) for e in alert_exprs().values()))
    for needed in ("ray_memorybus_delivery_oldest_undelivered_seconds", "ray_memorybus_shard_starts_total",
                   "ray_memorybus_store_errors_total", "ray_memorybus_redis_used_memory_bytes",
                   "ray_memorybus_redis_maxmemory_bytes", "ray_memorybus_backup_last_success_timestamp_seconds",
                   "ray_memorybus_decay_errors_total", "ray_memorybus_consolidation_errors_total"):  # fmt: skip
        assert needed in used, needed
    panels = set().union(*(metric_names(e) for e in dashboard_exprs().values()))
    assert {"ray_memorybus_shard_writes_total", "ray_memorybus_shard_memories",
            "ray_memorybus_shard_recall_seconds_bucket"} <= panels  # fmt: skip


def test_a_metric_renamed_in_code_fails_the_check(tmp_path):
    pkg = tmp_path / "memorybus"
    shutil.copytree(ROOT / "memorybus", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    mon = pkg / "operator" / "monitoring.py"
    mon.write_text(mon.read_text().replace('"memorybus_store_errors"', '"memorybus_storage_errors"'))
    bad = unknown(alert_exprs(), exported_names(pkg))
    assert bad == {"MemorybusStoreErrors": {"ray_memorybus_store_errors_total"}}
    maint = pkg / "actors" / "maintenance.py"
    maint.write_text(maint.read_text().replace('f"memorybus_{self.kind}_errors"', 'f"memorybus_{self.kind}_failures"'))
    bad = unknown(alert_exprs(), exported_names(pkg))
    assert {"MemorybusDecayFailing", "MemorybusConsolidationFailing"} <= set(bad)


def test_prometheus_config_loads_the_rules():
    config = yaml.safe_load(PROMETHEUS.read_text())
    assert [(PROMETHEUS.parent / f).resolve() for f in config["rule_files"]] == [ALERTS.resolve()]
    keep = config["scrape_configs"][0]["metric_relabel_configs"][0]["regex"]
    exported = exported_names(ROOT / "memorybus")
    assert all(re.fullmatch(keep, n) for n in exported)  # the relabel filter keeps every bus metric
