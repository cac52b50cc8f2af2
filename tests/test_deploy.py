"""What `deploy/` ships: the Grafana dashboard and the Prometheus alert rules use only metrics that the
real `/metrics` view exports, and the rules pass `promtool check rules` and their own unit tests."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from charts.models import ChartPlan, ChartState
from fairsched.devservices import REPO_ROOT
from scheduling import metrics
from tests.conftest import Tenants
from tests.factories import ChartFactory

DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "fairsched.json"
RULES = REPO_ROOT / "deploy" / "prometheus" / "alerts.yml"
RULES_TEST = REPO_ROOT / "deploy" / "prometheus" / "alerts_test.yml"
METRIC_NAME = re.compile(r"\bfairsched_[a-zA-Z0-9_:]*")
# Grafana's dashboard JSON of Grafana 10.4 and later (11.x reads it too).
LEAST_SCHEMA_VERSION = 39


@pytest.fixture
def exported(tenants: Tenants, client: Client) -> set[str]:
    """The sample names `/metrics` answers once every family has a sample (every counter counted,
    every histogram observed, a waiting chart with its plan row)."""
    redis = metrics._redis()
    for key in redis.scan_iter(f"{metrics.PREFIX}*"):
        redis.delete(key)
    chart = ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=ChartState.QUEUED)
    ChartPlan.objects.create(chart=chart, position=0, waiting_reason="budget")
    ChartFactory(org=tenants.org_b, workflow=tenants.workflow, state=ChartState.RUNNING, cost=2)
    now = timezone.now()
    ChartFactory(org=tenants.org_a, workflow=tenants.workflow, state=ChartState.SUCCEEDED, due_at=now, finished_at=now)
    tenants.org_a.turnaround_share = 0.95
    tenants.org_a.save()
    metrics.observe_start(org="acme", waited=3.0, first=True, cost=1)
    metrics.observe_finish(org="acme", cost=1, retry=False, turnaround=600.0)
    metrics.observe_failure(org="beta", kind="failed", cost=2)
    metrics.observe_throttle(org="beta", provider="gpu")
    metrics.observe_dispatch(latency=0.01, started=1, skips={("acme", "budget"): 1})
    metrics.observe_eta_outcome(org="acme", at="start", error=0.2, in_band=True)
    metrics.observe_replan(0.1)
    metrics.observe_reconcile(0.05)
    metrics.observe_webhook_attempt(org="acme", ok=False, disabled=True)

    client.force_login(tenants.staff)
    response = client.get("/metrics")
    assert response.status_code == 200
    families = list(text_string_to_metric_families(response.content.decode()))
    empty = [family.name for family in families if not family.samples]
    assert not empty, f"families without a sample: the fixture should observe them too: {empty}"
    return {sample.name for family in families for sample in family.samples}


def names_in(expression: str) -> set[str]:
    return set(METRIC_NAME.findall(expression))


def dashboard_expressions(dashboard: dict[str, Any]) -> list[str]:
    expressions = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            expressions.append(variable["query"]["query"])
    return expressions


def rule_expressions() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule["expr"] for group in groups for rule in group["rules"]]


def test_the_dashboard_is_grafana_json_over_a_chosen_prometheus(tenants: Tenants) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= LEAST_SCHEMA_VERSION
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    assert panels
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert names_in(target["expr"]), f"{panel['title']}: {target['expr']} reads no fairsched metric"


def test_the_dashboard_and_the_rules_use_only_metrics_the_app_exports(exported: set[str]) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    expressions = dashboard_expressions(dashboard) + rule_expressions()
    unknown = {name: expression for expression in expressions for name in names_in(expression) - exported}
    assert not unknown, f"not exported by /metrics: {sorted(unknown)}"
    used = set().union(*map(names_in, expressions))
    # The topics the dashboard and the alerts are for are all there.
    for name in (
        "fairsched_queued_charts",
        "fairsched_started_cost_units_total",
        "fairsched_budget_used",
        "fairsched_waiting_charts",
        "fairsched_eta_error_ratio_bucket",
        "fairsched_eta_in_band_total",
        "fairsched_oldest_eligible_age_seconds",
        "fairsched_replan_duration_seconds_count",
        "fairsched_reconcile_duration_seconds_count",
        "fairsched_webhook_attempts_total",
        "fairsched_charts_at_risk",
        "fairsched_turnaround_attainment",
        "fairsched_turnaround_target_share",
        "fairsched_turnaround_seconds_bucket",
    ):
        assert name in used, name


def promtool() -> str:
    """The promtool binary (Debian's `prometheus` package); in CI its absence is a failure."""
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing: CI must install Debian's prometheus package (.ci/run)")
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return found


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_the_rules_pass_promtool_check() -> None:
    result = run([promtool(), "check", "rules", RULES.name], RULES.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rule_expressions())} rules found" in result.stdout


def test_every_alert_has_a_promtool_unit_test_and_they_pass() -> None:
    result = run([promtool(), "test", "rules", RULES_TEST.name], RULES_TEST.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    alerts = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}
    tests = yaml.safe_load(RULES_TEST.read_text())["tests"]
    tested_firing = {
        case["alertname"] for test in tests for case in test.get("alert_rule_test", []) if case.get("exp_alerts")
    }
    tested_quiet = {
        case["alertname"] for test in tests for case in test.get("alert_rule_test", []) if not case.get("exp_alerts")
    }
    assert alerts - tested_firing == set(), "alerts never shown firing"
    assert alerts - tested_quiet == set(), "alerts never shown quiet"
