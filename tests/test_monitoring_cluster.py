"""The laptop route of docs/deployment.md ("Monitoring") as an operator follows it: a long-lived
cluster from `ray start --head --metrics-export-port`, `lightrag-ray index --ray-address` into it,
a real Prometheus scraping that port; the run's figures read back through Prometheus equal its
report and the scripted LLM's own counts. (The served query load is read on the session's
cluster, tests/served/test_serve_metrics.py.)"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.net_helpers import answers, free_port, wait_until
from tests.prometheus_server import PrometheusServer
from tests.test_index_pipeline import DOC_A, DOC_B

ROOT = Path(__file__).resolve().parents[1]
READ_TIMEOUT_S = 60.0


@pytest.fixture
def persistent_cluster(tmp_path) -> Iterator[tuple[str, int]]:
    """(address, metrics port) of a cluster that `ray start --head --block` runs until the test
    ends; its own temp dir (a short path: Ray's socket names), so no other test's `ray.init`
    finds it."""
    ray_cli = Path(sys.executable).with_name("ray")
    port, metrics_port = free_port(), free_port()
    temp_dir = tempfile.mkdtemp(prefix="rm", dir="/tmp")
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},
           "RAY_AUTH_MODE": "disabled", "RAY_metrics_report_interval_ms": "1000"}
    log_path = tmp_path / "ray_start.log"
    with log_path.open("wb") as log:
        head = subprocess.Popen(
            [str(ray_cli), "start", "--head", "--block", f"--port={port}", f"--metrics-export-port={metrics_port}",
             "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}"],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{metrics_port}", "/metrics"), 90, "ray start", head, log_path)
        yield f"127.0.0.1:{port}", metrics_port
    finally:
        head.terminate()  # `ray start --block` stops the cluster's processes as it ends
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
        shutil.rmtree(temp_dir, ignore_errors=True)


def _total(prometheus: PrometheusServer, expr: str, by: str) -> dict[str, float]:
    return {row["metric"].get(by, ""): float(row["value"][1]) for row in prometheus.query(expr)}


def _read_until(prometheus: PrometheusServer, expr: str, by: str, expected: dict[str, float]) -> dict[str, float]:
    """``expr`` by label ``by`` once it equals ``expected`` (figures reach Prometheus within a
    flush, a report interval and a scrape), or what it was at the deadline."""
    deadline = time.monotonic() + READ_TIMEOUT_S
    while True:
        seen = _total(prometheus, expr, by)
        if seen.keys() == expected.keys() and all(math.isclose(seen[k], expected[k], rel_tol=1e-6) for k in seen):
            return seen
        if time.monotonic() > deadline:
            return seen
        time.sleep(1)


@pytest.mark.integration  # starts its own Ray cluster with `ray start`
def test_a_cli_run_on_a_ray_start_cluster_reaches_prometheus_as_its_report_says(
        persistent_cluster, llm_server, tmp_path):
    address, metrics_port = persistent_cluster
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(DOC_A, encoding="utf-8")
    (corpus / "b.txt").write_text(DOC_B, encoding="utf-8")
    llm_server.reset()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1",
           "LIGHTRAG_RAY__METRICS__PRICES": json.dumps({"default": {"prompt": 1.0, "completion": 3.0}})}
    (tmp_path / "prometheus").mkdir()
    with PrometheusServer(tmp_path / "prometheus", [f"127.0.0.1:{metrics_port}"]) as prometheus:
        done = subprocess.run(
            [sys.executable, "-m", "lightrag_ray.cli.main", "index", str(corpus), "--workspace", str(tmp_path / "ws"),
             "--ray-address", address, "--llm-base-url", llm_server.url, "--json"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout)
        counts = llm_server.snapshot()
        assert report["docs_new"] == 2 and report["chunks_extracted"] >= 2

        assert _read_until(prometheus, "sum by (outcome) (ray_lightrag_index_documents_total)", "outcome",
                           {"new": 2.0}) == {"new": 2.0}
        chunks = {"extracted": float(report["chunks_extracted"])}
        assert _read_until(prometheus, "sum by (outcome) (ray_lightrag_index_chunks_total)", "outcome", chunks) == chunks
        requests = {kind: float(n) for kind, n in counts["counts"].items()}
        assert requests["extract"] == report["chunks_extracted"]
        assert _read_until(prometheus, "sum by (kind) (ray_lightrag_llm_requests_total)", "kind", requests) == requests
        tokens = {"prompt": float(report["llm_prompt_tokens"]), "completion": float(report["llm_completion_tokens"])}
        assert tokens == {"prompt": float(sum(counts["prompt_words"].values())),
                          "completion": float(sum(counts["completion_words"].values()))}
        assert _read_until(prometheus, "sum by (type) (ray_lightrag_llm_tokens_total)", "type", tokens) == tokens
        cost = {"": (tokens["prompt"] * 1.0 + tokens["completion"] * 3.0) / 1e6}
        assert report["llm_cost"] == pytest.approx(cost[""])
        assert _read_until(prometheus, "sum(ray_lightrag_llm_cost_total)", "", cost) == cost
        embedded = {"index": float(report["vectors_upserted"])}
        assert _read_until(prometheus, "sum by (purpose) (ray_lightrag_embedding_texts_total)", "purpose",
                           embedded) == embedded
        runs = {"ok": 1.0}
        assert _read_until(prometheus, "sum by (outcome) (ray_lightrag_index_runs_total)", "outcome", runs) == runs
