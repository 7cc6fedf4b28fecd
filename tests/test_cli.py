"""The `lightrag-ray` command: help, status, errors, and a driver killed mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from lightrag_ray.config import load_settings
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.extraction_cache import TABLE
from lightrag_ray.storage.workspace import Workspace
from tests.graph_helpers import dump_graph, expected_graph, passages_sent
from tests.test_index_pipeline import DOC_A, DOC_B

CLI = [sys.executable, "-m", "lightrag_ray.cli.main"]
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"}


def default_sigint() -> None:
    """``preexec_fn`` of a CLI that a test stops with Ctrl-C: a suite started in the
    background (``&`` in a CI script) runs with SIGINT ignored, which its children inherit,
    and a Python started that way never raises KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env or ENV)


def test_help_explains_every_index_option():
    result = run_cli("index", "--help")
    assert result.returncode == 0
    for option in ("--workspace", "--config", "--llm-base-url", "--llm-backend", "--llm-concurrency",
                   "--extraction-actors", "--gleaning", "--chunk-tokens", "--overlap-tokens", "--shards",
                   "--milvus-uri", "--ray-address", "LIGHTRAG_RAY__LLM__BASE_URL"):
        assert option in result.stdout, option
    top = run_cli("--help")
    assert "index" in top.stdout and "status" in top.stdout


def test_index_without_llm_says_what_to_do(tmp_path):
    (tmp_path / "a.txt").write_text(DOC_A)
    result = run_cli("index", str(tmp_path / "a.txt"), "--workspace", str(tmp_path / "ws"))
    assert result.returncode == 2 and "--llm-base-url" in result.stderr


def test_status_of_a_missing_workspace_is_a_clear_error(tmp_path):
    result = run_cli("status", "--workspace", str(tmp_path / "nothing"))
    assert result.returncode == 2 and "not a lightrag-ray workspace" in result.stderr


def _cache_chunk_ids(workspace: str) -> list[str]:
    return [row["chunk_id"] for row in Workspace(workspace).read_rows(TABLE)]


def test_killed_driver_resumes_without_extracting_a_chunk_twice(ray_cluster, llm, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(DOC_A)
    (corpus / "b.txt").write_text(DOC_B)
    workspace = str(tmp_path / "ws")
    address = ray_cluster.get_runtime_context().gcs_address
    args = ["index", str(corpus), "--workspace", workspace, "--llm-base-url", llm.url, "--ray-address", address,
            "--chunk-tokens", "16", "--overlap-tokens", "2", "--llm-concurrency", "1",
            "--extraction-actors", "1", "--quiet"]
    llm.latency_s = 0.4

    driver = subprocess.Popen([*CLI, *args], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    deadline = time.monotonic() + 180
    while len(_cache_chunk_ids(workspace)) < 3 and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert driver.poll() is None, "the run ended before it could be killed: " + driver.stderr.read().decode()
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    time.sleep(3)  # let Ray reap the dead job's extraction actor
    done_before = set(_cache_chunk_ids(workspace))
    sent_before = len(passages_sent(llm.requests))
    assert done_before and len(done_before) < sent_before + 20

    llm.reset()
    llm.latency_s = 0.0
    result = run_cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["chunks_cached"] >= len(done_before) and report["docs_failed"] == 0

    settings = load_settings(overrides={"workspace": workspace, "graph": {"num_shards": 2}}, environ={})
    chunk_text = {r["chunk_id"]: r["text"] for r in Workspace(workspace).read_rows("chunks")}
    resent = set(passages_sent(llm.requests))
    assert not resent & {chunk_text[c] for c in done_before}  # nothing finished before the kill is redone
    cached = _cache_chunk_ids(workspace)
    assert sorted(cached) == sorted(set(cached)) == sorted(chunk_text)  # one extraction per chunk
    entities, relations = expected_graph(list(chunk_text.values()))
    graph = dump_graph(settings)
    assert {e["key"] for e in graph["entities"]} == entities
    assert {frozenset((r["source_key"], r["target_key"])) for r in graph["relations"]} == relations

    status = run_cli("status", "--workspace", workspace, "--json")
    shown = json.loads(status.stdout)
    assert shown["documents"] == {"processed": 2} and shown["chunks"] == len(chunk_text)
    assert (shown["entities"], shown["relations"]) == (len(entities), len(relations))
    assert shown["graph_version"] == 1


def test_status_text_output(tmp_path):
    Path(tmp_path / "ws").mkdir()
    manifests.save(Workspace(str(tmp_path / "ws")), manifests.Manifest(graph_version=3, entities=5, relations=2))
    result = run_cli("status", "--workspace", str(tmp_path / "ws"))
    assert result.returncode == 0
    assert "graph_version: 3" in result.stdout and "entities: 5" in result.stdout
    assert "hint:" not in result.stdout


def test_status_hints_at_a_milvus_server_past_what_lite_searches_quickly(tmp_path):
    from lightrag_ray.service.status import workspace_status
    from lightrag_ray.storage.vectors import LITE_COMFORTABLE_VECTORS

    workspace = Workspace(str(tmp_path / "ws"))
    manifests.save(workspace, manifests.Manifest(entities=LITE_COMFORTABLE_VECTORS + 1, relations=10))
    lite = workspace_status(workspace.uri, str(tmp_path / "ws" / "milvus.db"))
    [hint] = lite["hints"]
    assert f"entities collection holds {LITE_COMFORTABLE_VECTORS + 1:,} vectors" in hint and "vectors.uri" in hint
    assert workspace_status(workspace.uri, "http://milvus:19530")["hints"] == []
    result = run_cli("status", "--workspace", workspace.uri)
    assert result.returncode == 0 and f"hint: {hint}" in result.stdout
