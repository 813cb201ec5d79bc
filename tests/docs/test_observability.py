"""deploy/grafana and deploy/prometheus (issue 14): the dashboard and the alert rules name
only metrics (and labels) the services export, cover what on-call needs, parse as PromQL,
and the alerts pass their promtool unit tests."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.bff.metrics import BffMetrics
from services.orders_state.waiting.metrics import WaitingMetrics
from shared.metrics import HttpMetrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "mlutp.json"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
ALERTS_TEST = ROOT / "deploy" / "prometheus" / "alerts_test.yaml"
# labels Prometheus itself adds to every scraped series, and a histogram's bucket bound
SCRAPE_LABELS = {"job", "instance", "le"}
METRIC = re.compile(r"\b(?:http|mlutp)_[a-z0-9_]+")
SELECTOR = re.compile(r"\b((?:http|mlutp)_[a-z0-9_]+)\{([^}]*)\}")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")


def exported() -> dict[str, set[str]]:
    """Every series name the services' /metrics can show, with its label names."""
    http = HttpMetrics("any")
    BffMetrics(http.registry)
    WaitingMetrics(http.registry)
    names: dict[str, set[str]] = {}
    # the registry's own index of sample names (counter _total, histogram _bucket, ...)
    for name, collector in http.registry._names_to_collectors.items():
        names[name] = set(getattr(collector, "_labelnames", ()))
    return names


def promql(expr: str) -> str:
    """The expression with label values and dashboard variables blanked out."""
    expr = re.sub(r'"[^"]*"', '""', expr)
    return expr.replace("$legacy_heavy_rps", "2500")


def check_expression(expr: str, where: str, series: dict[str, set[str]]) -> None:
    text = promql(expr)
    used = set(METRIC.findall(text))
    unknown = used - set(series)
    assert not unknown, f"{where}: metrics the services do not export: {unknown}"
    labels_of_used = set().union(*(series[name] for name in used)) | SCRAPE_LABELS
    for name, matchers in SELECTOR.findall(text):
        for matcher in filter(None, (m.strip() for m in matchers.split(","))):
            label = re.split(r"[=!~]", matcher, maxsplit=1)[0].strip()
            assert label in series[name] | SCRAPE_LABELS, f"{where}: {name} has no label {label}"
    for grouping in GROUPING.findall(text):
        for label in filter(None, (g.strip() for g in grouping.split(","))):
            assert label in labels_of_used, f"{where}: no metric of it has the label {label}"


def dashboard_targets() -> list[tuple[str, dict[str, Any]]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], t) for panel in dashboard["panels"] for t in panel["targets"]]


def alert_rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = [
        rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]
    ]
    return rules


def test_the_dashboard_queries_name_only_exported_metrics_and_labels() -> None:
    series = exported()
    for title, target in dashboard_targets():
        check_expression(target["expr"], title, series)


def test_the_alert_rules_name_only_exported_metrics_and_labels() -> None:
    series = exported()
    for rule in alert_rules():
        check_expression(rule["expr"], rule["alert"], series)


def test_the_dashboard_has_the_panels_on_call_needs() -> None:
    queries = " ".join(target["expr"] for _, target in dashboard_targets())
    titles = " ".join(title.lower() for title, _ in dashboard_targets())
    needed = {
        "polls and parts per second": ["http_requests_total", "mlutp_part_requests_total"],
        "answers by cause": ["mlutp_waiting_poll_answers_total", "sum by (status)"],
        "stale orders by service": ["sum by (service) (rate(mlutp_stale_orders_total"],
        "tag-cache outcomes and circuit": [
            "sum by (outcome) (rate(mlutp_tag_cache_calls_total",
            "mlutp_tag_cache_circuit_open",
        ],
        "heavy upstream calls against legacy": [
            'mlutp_upstream_calls_total{upstream=~"totw|eats_full|grocery_full"}',
            "vector($legacy_heavy_rps)",
        ],
        "part requests per policy version": ["policy_version", "mlutp_part_requests_total"],
        "p50/p99 latency per route": [
            "histogram_quantile(0.5, sum by (route, le)",
            "histogram_quantile(0.99, sum by (route, le)",
        ],
        "polls waiting": ["mlutp_polls_waiting"],
    }
    for subject, fragments in needed.items():
        for fragment in fragments:
            assert fragment in queries, f"{subject}: no query has {fragment}"
    assert "legacy" in titles and "policy version" in titles and "waiting" in titles
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    # the legacy figure the heavy calls are held to: the production figure of the old polling (2-3k
    # rps)
    assert 2000 <= int(variables["legacy_heavy_rps"]["query"]) <= 3000
    # no two panels on one spot
    spots = [(p["gridPos"]["x"], p["gridPos"]["y"]) for p in dashboard["panels"]]
    assert len(spots) == len(set(spots))


def test_there_is_an_alert_for_each_failure_on_call_is_paged_or_ticketed_for() -> None:
    alerts = {rule["alert"]: rule for rule in alert_rules()}
    assert set(alerts) == {
        "MlutpTagCacheUnavailable",
        "MlutpOrderSourceUnavailable",
        "Mlutp5xxRate",
        "MlutpPollP99OverBudget",
        "MlutpLoadShedding",
        "MlutpDeprecatedPolicyVersionInUse",
        "MlutpWakeupsDown",
    }
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"page", "ticket", "info"}, name
        assert rule["annotations"]["summary"], name
    # 503 is admission control shedding on purpose: counted by its own alert, not as an error
    assert 'status!="503"' in alerts["Mlutp5xxRate"]["expr"]
    # "after a set time": a deprecated version is allowed a week of traffic
    assert alerts["MlutpDeprecatedPolicyVersionInUse"]["for"] == "7d"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; .ci/run installs it)")
    return found


def test_the_alert_rules_pass_their_promtool_unit_tests() -> None:
    tested = subprocess.run(
        [promtool(), "test", "rules", ALERTS_TEST.name],
        cwd=ALERTS_TEST.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # every alert is tested
    tests = yaml.safe_load(ALERTS_TEST.read_text())["tests"]
    tested_alerts = {case["alertname"] for t in tests for case in t["alert_rule_test"]}
    assert tested_alerts == {rule["alert"] for rule in alert_rules()}


def test_every_dashboard_query_parses_as_promql(tmp_path: Path) -> None:
    # promtool parses the expressions of a rules file: the dashboard's, as recording rules
    rules = [
        {
            "record": f"dashboard:query_{index}",
            "expr": target["expr"].replace("$legacy_heavy_rps", "2500"),
        }
        for index, (_, target) in enumerate(dashboard_targets())
    ]
    path = tmp_path / "dashboard_rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
