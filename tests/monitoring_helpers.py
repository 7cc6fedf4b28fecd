"""The PromQL of cluster/monitoring/ (the Grafana dashboard and the alert rules), ready to send to
a Prometheus, for tests/test_monitoring.py and for end-to-end tests that run a real load:

    assert_every_expression_has_data(prometheus)  # after indexing and querying under the fixture

and ``counted``, to sum what the ``recorded`` fixture (tests/conftest.py) saw a process record.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

MONITORING = Path(__file__).resolve().parents[1] / "cluster" / "monitoring"
DASHBOARD = MONITORING / "grafana-dashboard.json"
ALERTS = MONITORING / "alerts.yaml"

# What Grafana puts in place of the dashboard's variables: every workspace, 5 minute windows
# (at least two scrapes whatever the scrape interval), a 1 hour range.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__range": "1h", "$workspace": ".*"}
METRIC_NAME = re.compile(r"\bray_[A-Za-z0-9_:]+")


def _substituted(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def dashboard_panels() -> list[dict[str, Any]]:
    """The dashboard's panels, rows included (rows at the top level, as Grafana saves them)."""
    return json.loads(DASHBOARD.read_text())["panels"]


def dashboard_expressions() -> dict[str, str]:
    """Every query of the dashboard ("panel title/refId" -> PromQL, its variables substituted)."""
    return {f"{panel['title']}/{target['refId']}": _substituted(target["expr"])
            for panel in dashboard_panels() for target in panel.get("targets", [])}


def alert_rules() -> list[dict[str, Any]]:
    """The rules of every group of alerts.yaml."""
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def alert_expressions() -> dict[str, str]:
    """Every alert's expression (alert name -> PromQL)."""
    return {rule["alert"]: rule["expr"].strip() for rule in alert_rules()}


def metric_names(expr: str) -> set[str]:
    """The series names an expression reads (``ray_...``)."""
    return set(METRIC_NAME.findall(expr))


def assert_every_expression_has_data(prometheus: Any, absent_ok: tuple[str, ...] = ()) -> None:
    """Each dashboard query returns at least one series, and each series an alert rule reads
    exists (the rules themselves return series only while they fire). ``prometheus`` is a
    tests.prometheus_server.PrometheusServer; a query reading one of ``absent_ok`` (series a
    load may not produce, e.g. ``ray_lightrag_llm_cost_total`` without llm.prices) is left out."""
    empty = [name for name, expr in dashboard_expressions().items()
             if not metric_names(expr) & set(absent_ok) and not prometheus.query(expr)]
    alert_series = {series for expr in alert_expressions().values() for series in metric_names(expr)} - set(absent_ok)
    empty += [f"{series} (read by an alert)" for series in sorted(alert_series)
              if not prometheus.query(f"count({series})")]
    assert not empty, f"no data for: {empty}"


def counted(recorded: list[tuple[str, float, dict[str, str]]], name: str, **tags: str) -> float:
    """The sum of counter ``name``'s increments in ``recorded`` whose labels include ``tags``."""
    return sum(value for seen, value, labels in recorded if seen == name and tags.items() <= labels.items())
