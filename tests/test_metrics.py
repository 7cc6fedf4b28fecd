"""The metrics plumbing without a cluster: names and labels checked against the catalog,
figures summed in the buffer, nothing kept while metrics are off, the workspace label capped,
and an indexing report turned into per-outcome totals."""

from __future__ import annotations

import pytest

from lightrag_ray.config import MetricsConfig
from lightrag_ray.index.pipeline import IndexReport
from lightrag_ray.index.run_metrics import report_totals
from lightrag_ray.metrics.catalog import METRICS, spec
from lightrag_ray.metrics.client import MetricsClient, workspace_label
from lightrag_ray.metrics.recorder import ALL_WORKSPACES, OTHER_WORKSPACES, MetricsRecorder


def test_every_metric_has_a_prometheus_name_and_unique_labels():
    assert len({m.name for m in METRICS}) == len(METRICS)
    assert spec("index_documents").prometheus_name == "ray_lightrag_index_documents_total"
    assert spec("query_latency_seconds").prometheus_name == "ray_lightrag_query_latency_seconds"
    assert all(m.buckets for m in METRICS if m.kind == "histogram")
    with pytest.raises(KeyError, match="declared: "):
        spec("no_such_metric")


def test_the_buffer_sums_counters_keeps_last_gauges_and_every_observation():
    client = MetricsClient()
    client.count("index_chunks", 2, workspace="w", outcome="cached")
    client.count("index_chunks", 3, outcome="cached", workspace="w")
    client.gauge("index_running", 1, workspace="w")
    client.gauge("index_running", 0, workspace="w")
    client.observe("query_latency_seconds", 0.5, mode="mix")
    client.observe("query_latency_seconds", 1.5, mode="mix")
    assert client._batch == {
        "index_chunks": {(("outcome", "cached"), ("workspace", "w")): 5.0},
        "index_running": {(("workspace", "w"),): 0.0},
        "query_latency_seconds": {(("mode", "mix"),): [0.5, 1.5]},
    }


def test_a_wrong_name_kind_or_label_set_raises():
    client = MetricsClient()
    with pytest.raises(KeyError):
        client.count("index_chunk", 1, workspace="w", outcome="cached")
    with pytest.raises(ValueError, match="is a counter"):
        client.gauge("index_chunks", 1, workspace="w", outcome="cached")
    with pytest.raises(ValueError, match="labelled"):
        client.count("index_chunks", 1, workspace="w")


def test_nothing_is_kept_while_metrics_are_off():
    client = MetricsClient(MetricsConfig(enabled=False))
    client.count("index_chunks", 1, workspace="w", outcome="cached")
    assert client._batch == {} and client._thread is None


def test_the_workspace_label_is_capped_in_the_order_workspaces_report():
    recorder = MetricsRecorder()
    assert [recorder._workspace(name, 2) for name in ("a", "b", "c", "a", "d", "b")] == \
        ["a", "b", OTHER_WORKSPACES, "a", OTHER_WORKSPACES, "b"]
    assert recorder._workspace("a", 0) == ALL_WORKSPACES
    assert workspace_label("/data/spaces/team-a/") == "team-a"
    assert workspace_label("s3://bucket/ws") == "ws"


def test_a_report_counts_replaced_documents_apart_from_new_ones():
    report = IndexReport(docs_new=5, sources_replaced=2, docs_skipped=4, docs_failed=1, docs_removed=3,
                         chunks_extracted=7, chunks_cached=6, chunks_failed=1, vectors_upserted=90)
    totals = report_totals(report)
    assert totals[("index_documents", "new")] == 3
    assert totals[("index_documents", "replaced")] == 2
    assert totals[("index_documents", "removed")] == 3
    assert totals[("index_chunks", "cached")] == 6
    assert totals[("vectors_written", "")] == 90
