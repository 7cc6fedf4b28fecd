"""Shared fixtures: one local Ray cluster per session, one scripted LLM server, one scripted
rerank server, one Milvus server (each started by the first test that needs it), and a Prometheus
scraping the cluster for each module that asks for one."""

from __future__ import annotations

import os

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Ray's processes export their metrics every second (default 10 s), so a test sees a figure in
# Prometheus within a few seconds of recording it.
os.environ.setdefault("RAY_metrics_report_interval_ms", "1000")

import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import pytest  # noqa: E402

from lightrag_ray.config import Settings, load_settings  # noqa: E402
from tests.milvus_standalone import MilvusStandalone  # noqa: E402
from tests.net_helpers import free_port, wait_until  # noqa: E402
from tests.prometheus_server import PrometheusServer  # noqa: E402
from tests.s3_server import S3Server  # noqa: E402
from tests.scripted_llm import ScriptedLLM  # noqa: E402
from tests.scripted_rerank import ScriptedRerank  # noqa: E402

# The tests' S3 server (moto) listens here once a test asks for it (s3_server). Its address and
# credentials are in the environment before Ray starts, so every Ray worker of the session
# (graph shards, tasks) reaches a workspace on it, as a cluster's pods reach their object store.
S3_PORT = free_port()
os.environ.update(S3Server(Path("."), S3_PORT).env())

# The session cluster's metrics agent serves Prometheus's text format here (ray.init's
# _metrics_export_port); the prometheus fixture scrapes it.
METRICS_EXPORT_PORT = free_port()

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# A test that uses one of these (directly or through another fixture) is an integration test.
INTEGRATION_FIXTURES = {"ray_cluster", "milvus_server", "milvus_standalone", "s3_server", "prometheus"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests that need a Ray cluster or a Milvus server as ``integration`` (the
    fast tier, ``scripts/test.sh --fast``, leaves them out)."""
    for item in items:
        if INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def ray_cluster():
    """A real local Ray cluster shared by every test of the session."""
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, namespace="lightrag_ray", logging_level="WARNING",
                 _metrics_export_port=METRICS_EXPORT_PORT)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def prometheus(ray_cluster, tmp_path_factory):
    """A real Prometheus on 127.0.0.1 (tests/prometheus_server.py) scraping the session
    cluster's metrics every second, from its first scrape on, for one module: each scrape renders
    every series the session made, which kept Ray's metrics agent at up to half a core when one
    Prometheus scraped for the whole session (docs/benchmarks.md, Test suite time)."""
    with PrometheusServer(tmp_path_factory.mktemp("prometheus"), [f"127.0.0.1:{METRICS_EXPORT_PORT}"]) as server:
        wait_until(lambda: any(row["value"][1] == "1" for row in server.query("up")), 30, "Prometheus's first scrape of the cluster")
        yield server


@pytest.fixture(scope="session")
def llm_server():
    """The scripted OpenAI-compatible LLM on 127.0.0.1 (one per session)."""
    with ScriptedLLM() as server:
        yield server


@pytest.fixture(scope="session")
def rerank_server():
    """The scripted rerank server on 127.0.0.1 (one per session)."""
    with ScriptedRerank() as server:
        yield server


@pytest.fixture
def reranker(rerank_server):
    """The scripted rerank server, its counts and pending failures reset for this test."""
    rerank_server.reset()
    yield rerank_server
    rerank_server.reset()


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory):
    """URI of a Milvus server process on 127.0.0.1 (milvus-lite's gRPC server), as a
    cluster's workers would share."""
    port = free_port()
    data = tmp_path_factory.mktemp("milvus")
    cli = Path(sys.executable).with_name("milvus-lite")
    log_path = data / "server.log"
    with log_path.open("w") as log:
        server = subprocess.Popen([str(cli), "server", "--data-dir", str(data / "db"), "--host", "127.0.0.1",
                                   "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"milvus-lite server did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.5)
    yield f"http://127.0.0.1:{port}"
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture(scope="session")
def milvus_standalone(tmp_path_factory):
    """URI of a real Milvus server on 127.0.0.1: the 2.3 standalone binary of the PyPI package
    ``milvus``, on free ports (tests/milvus_standalone.py)."""
    with MilvusStandalone(tmp_path_factory.mktemp("milvus_standalone")) as server:
        yield server.uri


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3 server on 127.0.0.1 (moto's standalone server), where the session's processes
    and Ray workers find it (AWS_ENDPOINT_URL)."""
    server = S3Server(tmp_path_factory.mktemp("s3"), S3_PORT).start()
    yield server
    server.stop()


@pytest.fixture
def llm(llm_server):
    """The scripted LLM, with counts and failure rules reset for this test."""
    llm_server.reset()
    llm_server.clear_rules()
    llm_server.latency_s = 0.0
    llm_server.usage = True
    yield llm_server
    llm_server.clear_rules()
    llm_server.latency_s = 0.0
    llm_server.usage = True


@pytest.fixture
def make_settings(tmp_path, llm_server) -> Callable[..., Settings]:
    """Settings for a fresh workspace under tmp_path, talking to the scripted LLM."""

    def build(name: str = "ws", **overrides: Any) -> Settings:
        base: dict[str, Any] = {
            "workspace": str(tmp_path / name),
            "llm": {"backend": "openai", "base_url": llm_server.url, "timeout_s": 5, "backoff_s": 0.05,
                    "max_retries": 2},
            "extraction": {"actors": 1, "num_cpus": 0.2},
        }
        for key, value in overrides.items():
            if isinstance(value, dict):
                base[key] = {**base.get(key, {}), **value}
            else:
                base[key] = value
        return load_settings(overrides=base, environ={})

    return build


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data, with a clear skip message if the checkout has no copy beside it."""
    if not SHARED_DATA.exists():
        pytest.fail(f"shared data not found at {SHARED_DATA}; the tests need ../shared/data beside the repo")
    return SHARED_DATA


@pytest.fixture
def recorded(monkeypatch) -> list[tuple[str, float, dict[str, str]]]:
    """The counters this process records (name, value, labels); histograms are not kept."""
    from lightrag_ray.metrics.client import metrics

    seen: list[tuple[str, float, dict[str, str]]] = []
    monkeypatch.setattr(metrics(), "count", lambda name, value=1.0, **tags: seen.append((name, value, tags)))
    monkeypatch.setattr(metrics(), "observe", lambda name, value, **tags: None)
    return seen

