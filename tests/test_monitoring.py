"""cluster/monitoring/ (alert rules, Grafana dashboard) against promtool and a real Prometheus,
and `lightrag-ray top` reading figures recorded in the session cluster."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from lightrag_ray.cli.main import main
from lightrag_ray.config import MetricsConfig
from lightrag_ray.metrics.catalog import METRICS, MetricSpec
from lightrag_ray.metrics.client import metrics
from tests.monitoring_helpers import (
    ALERTS,
    DASHBOARD,
    alert_expressions,
    alert_rules,
    dashboard_expressions,
    dashboard_panels,
    metric_names,
)
from tests.conftest import METRICS_EXPORT_PORT
from tests.net_helpers import free_port, wait_until
from tests.prometheus_server import PromQLError

# Series of Ray itself the dashboard reads: name -> (the name in Ray's source, its labels, that file).
SERVE_STATE = "serve/_private/deployment_state.py"
RAY_BUILTINS = {
    "ray_serve_deployment_replica_healthy": ("serve_deployment_replica_healthy", ("deployment", "application"), SERVE_STATE),
    "ray_serve_autoscaling_target_replicas": ("serve_autoscaling_target_replicas", ("deployment", "application"), SERVE_STATE),
}
MATCHERS = re.compile(r"(ray_[A-Za-z0-9_:]+)\{([^}]*)\}")
MATCHER_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)")


def _exported(metric: MetricSpec) -> dict[str, tuple[str, ...]]:
    """The series Prometheus stores for ``metric``, with their labels."""
    name = metric.prometheus_name
    if metric.kind != "histogram":
        return {name: metric.tags}
    return {f"{name}_bucket": (*metric.tags, "le"), f"{name}_sum": metric.tags, f"{name}_count": metric.tags}


LABELS = {series: labels for metric in METRICS for series, labels in _exported(metric).items()} | {
    name: labels for name, (_, labels, _) in RAY_BUILTINS.items()}
EXPRESSIONS = dashboard_expressions() | {f"alert {name}": expr for name, expr in alert_expressions().items()}


@pytest.mark.integration  # runs a program, which the fast tier does not
def test_promtool_accepts_the_alert_rules():
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: scripts/test.sh installs Debian's prometheus package"
    result = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_alert_rules_cover_llm_errors_429s_stalled_runs_query_errors_and_latency():
    reads = {name: metric_names(expr) for name, expr in alert_expressions().items()}
    assert reads == {
        "LightRAGLLMErrorRate": {"ray_lightrag_llm_requests_total"},
        "LightRAGLLMRateLimited": {"ray_lightrag_llm_requests_total"},
        "LightRAGIndexingStalled": {"ray_lightrag_index_running", "ray_lightrag_index_last_progress_timestamp_seconds"},
        "LightRAGQueryErrors": {"ray_lightrag_query_requests_total"},
        "LightRAGQuerySlow": {"ray_lightrag_query_latency_seconds_bucket"},
    }
    for rule in alert_rules():
        assert rule["for"] and rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]


def test_dashboard_is_a_grafana_model_on_a_prometheus_datasource_variable():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["workspace"]["datasource"]["uid"] == "${datasource}"
    panels = dashboard_panels()
    assert len({p["id"] for p in panels}) == len(panels), "panel ids are unique"
    assert {p["title"] for p in panels if p["type"] == "row"} >= {"Indexing", "Queries"}
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["targets"] and all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])


def test_expressions_read_declared_metrics_with_their_labels():
    for name, expr in EXPRESSIONS.items():
        series = metric_names(expr)
        assert series and series <= set(LABELS), f"{name}: undeclared {series - set(LABELS)}"
        for metric, matchers in MATCHERS.findall(expr):
            assert set(MATCHER_LABEL.findall(matchers)) <= set(LABELS[metric]), f"{name}: {metric}{{{matchers}}}"
        known = {label for s in series for label in LABELS[s]}
        for grouping in GROUPING.findall(expr):
            labels = {label.strip() for label in grouping.split(",") if label.strip()}
            assert labels <= known, f"{name}: no series it reads has {labels - known}"


def test_every_metric_is_on_the_dashboard_or_in_an_alert():
    read = {s for expr in EXPRESSIONS.values() for s in metric_names(expr)}
    unread = [metric.name for metric in METRICS if not set(_exported(metric)) & read]
    assert not unread, f"no panel or alert reads {unread}"


def test_ray_builtins_the_dashboard_reads_are_in_rays_source():
    import ray

    package = Path(ray.__file__).parent
    for exported, (name, labels, source) in RAY_BUILTINS.items():
        text = (package / source).read_text()
        at = text.find(f'"{name}"')
        assert exported == f"ray_{name}" and at >= 0, f"{name} not in {source}"
        declaration = text[at:at + 1000]  # the metric's description and tag keys follow its name
        assert all(f'"{label}"' in declaration for label in labels), (name, labels)


def test_every_expression_parses_in_prometheus(prometheus):
    with pytest.raises(PromQLError, match="parse error"):  # the check below is not vacuous
        prometheus.query("sum by (mode (ray_lightrag_query_passages_total)")
    for name, expr in EXPRESSIONS.items():
        try:
            prometheus.query(expr)
        except PromQLError as exc:
            pytest.fail(f"{name}: {exc}")


# --- what the session cluster exports ---------------------------------------------------------------


@pytest.fixture
def own_labels(monkeypatch):
    """This process's metrics client, giving any workspace a label of its own (whatever the
    workspaces other tests of the session reported first)."""
    client = metrics()
    monkeypatch.setattr(client, "config", MetricsConfig(workspace_labels=10_000))
    return client


def test_a_gauge_set_once_stays_exported(ray_cluster, own_labels):
    """Ray's metrics agent drops a gauge not set within two report intervals; the recorder sets it again."""
    workspace = f"gauge-{uuid.uuid4().hex[:8]}"
    own_labels.gauge("index_running", 1, workspace=workspace)
    own_labels.flush(wait=True)

    def exported() -> bool:
        text = httpx.get(f"http://127.0.0.1:{METRICS_EXPORT_PORT}/metrics", timeout=10).text
        return any(line.startswith("ray_lightrag_index_running{") and f'workspace="{workspace}"' in line
                   for line in text.splitlines())

    wait_until(exported, 20, "the gauge on the metrics port")
    eviction_age_s = 2 * max(int(os.environ["RAY_metrics_report_interval_ms"]), 1000) / 1000
    time.sleep(2 * eviction_age_s)
    assert exported()


# --- lightrag-ray top ------------------------------------------------------------------------------


def _top(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["top", "--once", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _figures(screen: str, heading: str) -> dict[str, float]:
    """The "key value" pairs printed after ``heading`` on its line."""
    (line,) = [line for line in screen.splitlines() if line.startswith(heading)]
    words = line[len(heading):].split()
    return {key: float(value) for key, value in zip(words[::2], words[1::2])}


def test_top_prints_what_was_recorded(ray_cluster, prometheus, capsys, own_labels):
    workspace, mode = f"top-{uuid.uuid4().hex[:8]}", f"top{uuid.uuid4().hex[:6]}"
    client = own_labels
    client.count("index_documents", 3, workspace=workspace, outcome="new")
    client.count("index_documents", 1, workspace=workspace, outcome="failed")
    client.count("index_chunks", 12, workspace=workspace, outcome="extracted")
    client.count("llm_requests", 20, workspace=workspace, kind="extract", outcome="ok")
    client.count("llm_requests", 2, workspace=workspace, kind="extract", outcome="429")
    client.count("llm_requests", 5, workspace=workspace, kind="glean", outcome="ok")
    client.count("llm_tokens", 4000, workspace=workspace, kind="extract", type="prompt")
    client.count("llm_tokens", 900, workspace=workspace, kind="extract", type="completion")
    client.count("query_requests", 6, workspace=workspace, route="/query", mode=mode, status="200")
    for seconds in (0.04, 0.04, 0.04, 0.9, 0.9, 0.9):
        client.observe("query_latency_seconds", seconds, mode=mode)
    client.gauge("index_running", 1, workspace=workspace)
    client.gauge("index_stage", 1, workspace=workspace, stage="extract")
    client.gauge("index_stage_progress", 0.25, workspace=workspace, stage="extract")
    client.flush(wait=True)

    deadline = time.monotonic() + 30
    while not prometheus.query(f'ray_lightrag_query_latency_seconds_count{{mode="{mode}"}}'):
        assert time.monotonic() < deadline, "the recorded figures never reached Prometheus"
        time.sleep(0.5)

    code, screen, _ = _top(capsys, "--prometheus", prometheus.url, "--workspace", workspace, "--minutes", "10")
    assert code == 0, screen
    assert _figures(screen, "documents") == {"new": 3, "failed": 1}
    assert _figures(screen, "chunks") == {"extracted": 12}
    assert _figures(screen, "LLM requests") == {"ok": 25, "429": 2}
    assert _figures(screen, "LLM tokens") == {"prompt": 4000, "completion": 900}
    assert f"{workspace}: extract 25%" in screen
    (row,) = [line.split() for line in screen.splitlines() if line.split()[:1] == [mode]]
    # p50: the 3rd of 6 observations lies in the bucket (0.025, 0.05], which it fills to its top
    assert row == [mode, "6", f"{6 / 600:.3f}", "0.050"]


def test_top_says_what_to_do_when_prometheus_is_unreachable(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = _top(capsys, "--prometheus", url)
    assert code == 1 and not out
    assert len(err.strip().splitlines()) == 1
    assert f"no Prometheus at {url}" in err and "--prometheus" in err
