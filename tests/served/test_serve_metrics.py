"""What operators watch (issue 43), read back through a real Prometheus that scrapes the
session's Ray cluster: an indexing run with the scripted LLM (no faults) and a
served query load; each figure checked against the run's report, the scripted server's own
counts and the requests sent, and every dashboard and alert expression answers with data.

Counters are compared as the growth over this module's own work (other modules' runs and
queries count into the same cluster-wide series before it)."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from lightrag_ray.config import load_settings
from lightrag_ray.service.indexing import index_paths
from tests.monitoring_helpers import assert_every_expression_has_data
from tests.serve_helpers import DOC_A, DOC_B, DOC_C

WORKSPACE = "metrics"
MODES = ("naive", "local", "global", "hybrid", "mix")
QUERIES_PER_MODE = 2
LLM_KINDS = ("extract", "glean", "summary", "keywords", "answer")
# Series this load does not make: no LLM call fails and the scripted server reports usage.
ABSENT_OK = ("ray_lightrag_llm_unmetered_requests_total",)


def series(prometheus: Any, expr: str, by: str) -> dict[str, float]:
    """``expr``'s instant vector as {value of label ``by``: value}."""
    return {row["metric"].get(by, ""): float(row["value"][1]) for row in prometheus.query(expr)}


def grown(prometheus: Any, expr: str, by: str, before: dict[str, float], expected: dict[str, float],
          timeout_s: float = 60) -> dict[str, float]:
    """Wait until ``expr`` (by label ``by``) has grown by ``expected`` since ``before`` (the
    figures reach Prometheus within a flush, a Ray report interval and a scrape); the growth seen."""
    deadline = time.monotonic() + timeout_s
    while True:
        now = series(prometheus, expr, by)
        growth = {key: now.get(key, 0.0) - before.get(key, 0.0) for key in set(now) | set(before)}
        growth = {key: value for key, value in growth.items() if abs(value) > 1e-12}
        if growth.keys() == expected.keys() and all(math.isclose(growth[k], expected[k], rel_tol=1e-6) for k in growth):
            return expected
        if time.monotonic() > deadline:
            return growth
        time.sleep(1)


COUNTERS = {
    "documents": ("sum by (outcome) (ray_lightrag_index_documents_total)", "outcome"),
    "chunks": ("sum by (outcome) (ray_lightrag_index_chunks_total)", "outcome"),
    "llm": ("sum by (kind) (ray_lightrag_llm_requests_total)", "kind"),
    "tokens": ("sum by (type) (ray_lightrag_llm_tokens_total)", "type"),
    "queries": ('sum by (mode) (ray_lightrag_query_requests_total{route="/query"})', "mode"),
    "cost": ("sum(ray_lightrag_llm_cost_total)", ""),
    "embedded": ("sum by (purpose) (ray_lightrag_embedding_texts_total)", "purpose"),
    "embedded tokens": ("sum by (purpose) (ray_lightrag_embedding_tokens_total)", "purpose"),
}


SETTLE_S = 4.0  # > a flush (2 s) + a Ray report interval (1 s in tests) + a scrape (1 s)


@pytest.fixture(scope="module")
def before(prometheus, ray_cluster, indexed) -> dict[str, dict[str, float]]:
    """Every compared counter before this module's own run and queries, once the module's served
    insert (``indexed``, which also makes room: it closes earlier modules' idle workspaces) has
    reached Prometheus: read until two reads SETTLE_S apart agree."""
    def read() -> dict[str, dict[str, float]]:
        return {name: series(prometheus, expr, by) for name, (expr, by) in COUNTERS.items()}

    last, deadline = read(), time.monotonic() + 60
    while True:
        time.sleep(SETTLE_S)
        now = read()
        if now == last or time.monotonic() > deadline:
            return now
        last = now


@pytest.fixture(scope="module")
def indexed_run(before, llm_server, tmp_path_factory) -> tuple[Any, dict[str, Any]]:
    """An LLM indexing run (in this process: a small run; beside the served app's actors, the 2
    CPUs have no whole CPU free for a Ray Data dataset's first task, and its actors ask for
    little): (its report, the scripted server's counts of it)."""
    root = tmp_path_factory.mktemp("metrics_run")
    for name, text in {"a.txt": DOC_A, "b.txt": DOC_B, "c.txt": DOC_C}.items():
        (root / name).write_text(text, encoding="utf-8")
    settings = load_settings(environ={}, overrides={
        "workspace": str(root / "ws"),
        "llm": {"backend": "openai", "base_url": llm_server.url, "timeout_s": 5, "backoff_s": 0.05},
        "extraction": {"actors": 1, "num_cpus": 0.05}, "embedding": {"actors": 1, "num_cpus": 0.05},
        "graph": {"num_shards": 2, "num_cpus": 0.02}, "ray": {"task_cpus": 0.05},
        "metrics": {"prices": {"default": {"prompt": 1.0, "completion": 2.0}}}})
    llm_server.reset()
    report = index_paths([str(root / n) for n in ("a.txt", "b.txt", "c.txt")], settings, progress=None)
    return report, llm_server.snapshot()


def test_an_indexing_runs_figures_equal_its_report_and_the_llm_servers_counts(prometheus, before, indexed_run):
    report, llm_counts = indexed_run
    assert report.docs_new == 3 and report.chunks_extracted >= 3
    documents = grown(prometheus, *COUNTERS["documents"], before["documents"], {"new": 3.0})
    assert documents == {"new": 3.0}
    chunks = grown(prometheus, *COUNTERS["chunks"], before["chunks"], {"extracted": float(report.chunks_extracted)})
    assert chunks == {"extracted": float(report.chunks_extracted)}
    requests = {kind: float(n) for kind, n in llm_counts["counts"].items()}
    assert set(requests) <= set(LLM_KINDS) and requests["extract"] == report.chunks_extracted
    assert grown(prometheus, *COUNTERS["llm"], before["llm"], requests) == requests
    tokens = {"prompt": float(sum(llm_counts["prompt_words"].values())),
              "completion": float(sum(llm_counts["completion_words"].values()))}
    assert grown(prometheus, *COUNTERS["tokens"], before["tokens"], tokens) == tokens
    assert (report.llm_prompt_tokens, report.llm_completion_tokens) == (tokens["prompt"], tokens["completion"])
    cost = (tokens["prompt"] * 1.0 + tokens["completion"] * 2.0) / 1e6
    assert report.llm_cost == pytest.approx(cost)
    assert grown(prometheus, *COUNTERS["cost"], before["cost"], {"": cost}) == {"": cost}
    embedded = {"index": float(report.vectors_upserted)}  # every vector stored was embedded once
    assert grown(prometheus, *COUNTERS["embedded"], before["embedded"], embedded) == embedded
    read = series(prometheus, *COUNTERS["embedded tokens"])["index"] - before["embedded tokens"].get("index", 0.0)
    assert read > 3 * report.vectors_upserted  # at least [CLS], a word and [SEP] a text


@pytest.fixture(scope="module")
def query_load(before, indexed_run, client, indexed) -> dict[str, float]:
    """QUERIES_PER_MODE answers in each of MODES, and one streamed answer; the /query requests by mode."""
    for mode in MODES:
        for number in range(QUERIES_PER_MODE):
            answer = client.post("/query", json={"query": f"Who founded Acme Corporation? ({number})", "mode": mode})
            assert answer.status_code == 200, answer.text
    with client.stream("POST", "/query/stream", json={"query": "Where does Dora Quinn sail from?"}) as streamed:
        assert streamed.status_code == 200 and streamed.read()
    return {mode: float(QUERIES_PER_MODE) for mode in MODES}


def test_a_served_query_load_is_counted_by_mode_and_timed_by_step(prometheus, before, query_load):
    assert grown(prometheus, *COUNTERS["queries"], before["queries"], query_load) == query_load
    steps = series(prometheus, 'sum by (step) (ray_lightrag_query_step_seconds_count{mode="mix"})', "step")
    assert {"keywords", "vector_search", "text_search", "graph", "llm"} <= set(steps), steps
    p50 = series(prometheus, "histogram_quantile(0.5, sum by (le, mode) (ray_lightrag_query_latency_seconds_bucket))",
                 "mode")
    assert all(p50[mode] > 0 for mode in MODES), p50


def test_every_dashboard_and_alert_expression_has_data_after_the_load(prometheus, indexed_run, query_load):
    """Read until every expression has answered once (within 30 s): Ray drops a gauge its process
    did not set again within two report intervals (1 s each here), and Serve's controller sets
    its replica gauges only as its control loop gets to them."""
    deadline = time.monotonic() + 30
    while True:
        try:
            assert_every_expression_has_data(prometheus, absent_ok=ABSENT_OK)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
