"""Operator-facing edges of the served workspace (issue 15): inserts without an LLM, /health
without the key, a delete during an insert, queued jobs, one-line job errors.

The app runs over real HTTP on the session's Ray cluster with no LLM; the write-path tests
drive a real WorkspaceService (graph shards, Milvus Lite, embedder) with the scripted LLM."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import httpx
import pytest
import ray

from lightrag_ray.cli.failures import report_failure
from lightrag_ray.core.errors import short_error
from lightrag_ray.models.embedding import make_embedder
from lightrag_ray.service.jobs import CANCELLED, PENDING, PROCESSING
from lightrag_ray.service.workspace_service import WorkspaceService, WriteBusy
from tests.net_helpers import free_port
from tests.opening_counts import Opened
from tests.test_index_pipeline import DOC_A, DOC_B

API_KEY = "edge-key"


@pytest.fixture(scope="module")
def app(ray_cluster, tmp_path_factory):
    """The app with no LLM (extraction mode llm) and an API key; yields its base URL."""
    from ray import serve

    from lightrag_ray.serve.app import AppArgs, build_app

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    args = AppArgs(workspace=str(tmp_path_factory.mktemp("edges") / "ws"), api_key=API_KEY,
                   settings={"llm": {"backend": "none"}, "extraction": {"mode": "llm"}, "graph": {"num_shards": 1}})
    serve.run(build_app(args), name="lightrag", route_prefix="/")
    yield f"http://127.0.0.1:{port}"
    serve.shutdown()


def test_insert_without_an_llm_is_refused_with_what_to_do(app):
    """Item 1: no more 200 "queued" for a job that can only fail."""
    response = httpx.post(f"{app}/documents/text", json={"text": DOC_A}, headers={"X-API-Key": API_KEY}, timeout=60)
    assert response.status_code == 409
    detail = response.json()["detail"]
    assert detail.startswith("inserts are off: this server has no LLM for extraction.")
    assert "--llm-base-url" in detail and "--extraction-mode fast" in detail
    documents = httpx.get(f"{app}/documents", headers={"X-API-Key": API_KEY}, timeout=60).json()
    assert documents["status_counts"] == {}


def test_health_without_the_key_is_liveness_only(app):
    """Item 7: no workspace path, counts or models for callers without the key."""
    anonymous = httpx.get(f"{app}/health", timeout=60)
    assert anonymous.status_code == 200 and anonymous.json() == {"status": "healthy"}
    full = httpx.get(f"{app}/health", headers={"X-API-Key": API_KEY}, timeout=60).json()
    assert full["status"] == "healthy" and full["graph_version"] == 0 and full["extraction_mode"] == "llm"
    assert full["llm_model"] is None and "workspace" in full


def test_a_failed_remote_call_becomes_one_line(ray_cluster, tmp_path, monkeypatch, capsys):
    """Item 1: what a job's ``error`` (and the CLI) shows of an error raised inside Ray."""

    @ray_cluster.remote
    def broken() -> None:
        raise KeyError("no such column: 'text'")

    with pytest.raises(Exception) as caught:
        ray_cluster.get(broken.remote())
    raw = str(caught.value)  # what used to reach users: colour codes, frames with paths
    assert "\x1b[" in raw and 'File "' in raw and len(raw.splitlines()) >= 4
    assert short_error(caught.value) == "KeyError: \"no such column: 'text'\""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert report_failure(caught.value, ["index", "x"]) == 1
    log = tmp_path / "lightrag-ray" / "errors.log"
    printed = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]  # not Ray's
    assert printed == [f"error: KeyError: \"no such column: 'text'\" (details in {log})"]
    assert "Traceback" in log.read_text() and "lightrag-ray index x" in log.read_text()


@pytest.fixture
def service(ray_cluster, make_settings):
    """A WorkspaceService (the Workspace deployment's owner) with the scripted LLM."""
    settings = make_settings(chunking={"chunk_tokens": 24, "overlap_tokens": 0},
                             llm={"max_concurrency": 1}, graph={"num_shards": 1})
    opened = WorkspaceService(settings, make_embedder(settings.embedding))
    yield opened
    opened.close()


def test_a_served_insert_builds_no_workspace_and_reads_the_manifest_once(service, monkeypatch):
    """The service's Workspace serves its insert jobs: a job builds none in this (the owner's)
    process and reads manifest.json once."""
    job = service.submit([("a.txt", DOC_A.encode())])
    opened = Opened(monkeypatch)
    assert service.run_job(job["track_id"])["status"] == "processed"
    assert opened.take() == (0, 1)


def _run_slowly(service, llm, track_id: str) -> threading.Thread:
    """Run the job in a thread with a slow LLM; return once its first request is out."""
    llm.latency_s = 0.5
    worker = threading.Thread(target=service.run_job, args=(track_id,))
    worker.start()
    deadline = time.monotonic() + 120
    while not llm.requests and time.monotonic() < deadline:
        time.sleep(0.1)
    return worker


def test_delete_during_an_insert_answers_at_once_and_jobs_show_their_place(service, llm):
    """Item 3: a delete that cannot start now says which job to wait for instead of hanging;
    queued jobs show their position."""
    first = service.submit([("a.txt", (DOC_A * 4).encode())])
    second = service.submit([("b.txt", DOC_B.encode())])
    assert service.track_status(first["track_id"])["queue_position"] == 1
    assert service.track_status(second["track_id"])["queue_position"] == 2
    worker = _run_slowly(service, llm, first["track_id"])
    assert service.track_status(first["track_id"])["job_status"] == PROCESSING
    assert service.track_status(second["track_id"])["queue_position"] == 1
    started = time.monotonic()
    with pytest.raises(WriteBusy) as busy:
        service.delete(first["doc_ids"])
    assert time.monotonic() - started < 1
    assert busy.value.track_id == first["track_id"]
    assert str(busy.value).startswith(f"an insert job is running ({first['track_id']}); delete again")
    llm.latency_s = 0.0
    worker.join(timeout=300)
    assert service.track_status(first["track_id"])["job_status"] == "processed"
    assert service.delete(first["doc_ids"])["deleted"] == first["doc_ids"]
    assert service.track_status(second["track_id"])["job_status"] == PENDING


def test_queued_and_running_jobs_can_be_cancelled(service, llm):
    """Item 3: nothing could cancel a job."""
    running = service.submit([("a.txt", (DOC_A * 4).encode())])
    queued = service.submit([("b.txt", DOC_B.encode())])
    assert service.cancel(queued["track_id"])["status"] == CANCELLED
    assert service.run_job(queued["track_id"])["status"] == CANCELLED  # the worker skips it
    assert service.track_status(queued["track_id"])["status_summary"] == {CANCELLED: 1}
    worker = _run_slowly(service, llm, running["track_id"])
    assert service.cancel(running["track_id"])["status"] == PROCESSING
    started = time.monotonic()
    worker.join(timeout=120)
    assert time.monotonic() - started < 30
    status = service.track_status(running["track_id"])
    assert status["job_status"] == CANCELLED and status["error"].startswith("cancelled while running")
    [doc] = status["documents"]
    assert doc["status"] == "failed" and "cancelled on request" in doc["error"]
    assert doc["chunks"] > 2 and len(llm.requests) < 2 * doc["chunks"]  # a chunk costs 2 requests (gleaning)
    llm.latency_s = 0.0
    assert service.delete(running["doc_ids"])["deleted"] == running["doc_ids"]
    assert service.documents()["status_counts"] == {}


def test_cancel_of_an_unknown_job_is_404(app):
    response = httpx.post(f"{app}/documents/cancel/insert_nope", headers={"X-API-Key": API_KEY}, timeout=60)
    assert response.status_code == 404 and response.json() == {"detail": "no insert job with track id 'insert_nope'"}


def test_the_context_streams_without_an_llm(app):
    """/query/stream with only_need_context needs no LLM (as /query): 200, one NDJSON line."""
    body = {"query": "Who founded Acme?", "mode": "naive", "only_need_context": True}
    plain = httpx.post(f"{app}/query", json=body, headers={"X-API-Key": API_KEY}, timeout=60)
    streamed = httpx.post(f"{app}/query/stream", json=body, headers={"X-API-Key": API_KEY}, timeout=60)
    assert plain.status_code == streamed.status_code == 200, streamed.text
    assert [json.loads(line) for line in streamed.text.splitlines()] == [
        {"response": plain.json()["response"], "llm_generated": False, "references": plain.json()["references"]}]


def test_chat_without_an_llm_is_an_openai_503(app):
    import openai

    client = openai.OpenAI(base_url=f"{app}/v1", api_key=API_KEY, max_retries=0)
    with client, pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="lightrag-local", messages=[{"role": "user", "content": "Who?"}])
    assert caught.value.status_code == 503 and "no LLM configured" in str(caught.value)
    assert caught.value.type == "server_error"


def test_a_failed_job_ends_with_one_line_naming_its_log(service, tmp_path):
    """Build: a job that raises ends with one line in its status (no traceback, colour codes or
    server paths) naming ``logs/<track_id>.log``, which holds the traceback. Here the job's
    stored files are gone when it runs (e.g. the inbox was cleaned while it queued)."""
    job = service.submit([("a.txt", DOC_A.encode())])
    track_id = job["track_id"]
    shutil.rmtree(tmp_path / "ws" / "inbox" / track_id)
    assert service.run_job(track_id)["status"] == "failed"
    error = service.track_status(track_id)["error"]
    assert error == (f"the insert failed: input not found: inbox/{track_id} "
                     f"(details in logs/{track_id}.log in the workspace)")
    log = (tmp_path / "ws" / "logs" / f"{track_id}.log").read_text()
    assert log.startswith("Traceback") and "FileNotFoundError" in log and str(tmp_path) in log


def test_the_documents_of_a_job_that_raised_are_failed_with_its_error(service, monkeypatch):
    """Issue 29 (scripts/soak.py): a job that raised (its embedding worker killed for good
    mid-job) left its documents in no status at all: /documents did not list them and
    /documents/reprocess_failed could not retry them. They are failed, with the job's error."""
    import lightrag_ray.service.jobs as jobs

    job = service.submit([("a.txt", DOC_A.encode()), ("b.txt", DOC_B.encode())])

    def crash(*_args, **_kwargs):
        raise ray.exceptions.ActorDiedError()

    monkeypatch.setattr(jobs, "index_paths", crash)
    done = service.run_job(job["track_id"])
    assert done["status"] == "failed" and done["error"].startswith("the insert failed: ")
    failed = {row["doc_id"]: row for row in service.documents()["statuses"]["failed"]}
    assert set(failed) == set(job["doc_ids"])
    assert {row["file_path"] for row in failed.values()} == {"a.txt", "b.txt"}
    assert all(row["error"] == done["error"] for row in failed.values())
    assert {d["status"] for d in service.track_status(job["track_id"])["documents"]} == {"failed"}
    monkeypatch.undo()
    retry = service.reprocess_failed()
    assert sorted(retry["doc_ids"]) == sorted(job["doc_ids"]) and retry["missing"] == 0
    assert service.run_job(retry["track_id"])["status"] == "processed"


def test_an_insert_after_the_embedding_workers_died_for_good_is_processed(service, llm):
    """Issue 29: past Ray's restarts the jobs' embedding workers stayed dead, and every later
    insert failed until the app restarted."""
    llm.latency_s = 0.0
    first = service.submit([("c.txt", DOC_B.encode())])
    assert service.run_job(first["track_id"])["status"] == "processed"
    for worker in service.embedding_pool.pool.workers:
        ray.kill(worker, no_restart=True)
    later = service.submit([("d.txt", DOC_A.encode())])
    assert service.run_job(later["track_id"])["status"] == "processed", service.track_status(later["track_id"])
    assert service.delete(first["doc_ids"] + later["doc_ids"])["deleted"]


def _unflushed_lite_files(settings) -> list[str]:
    """Rows Milvus Lite holds in its write-ahead log, searched by brute force until flushed."""
    return sorted(str(path.relative_to(settings.milvus_uri())) for path in
                  Path(settings.milvus_uri()).glob("collections/*/wal/*.arrow"))


def test_the_kept_lite_store_is_flushed_after_every_write_job(service, llm):
    """Issue 30: the Serve app's Lite owner stays open, so an insert's rows stayed in the WAL
    and every later lookup of that workspace scanned them (its query p50 went 1.6x after a
    one-document insert); a flush at the end of each write job indexes them."""
    llm.latency_s = 0.0
    job = service.submit([("a.txt", DOC_A.encode())])
    assert service.run_job(job["track_id"])["status"] == "processed"
    assert service.health()["entities"] > 0
    assert _unflushed_lite_files(service.settings) == []
    service.edit_graph("create_entity", "Flushed Lantern", {"description": "a lantern made for this test",
                                                            "entity_type": "object"})
    assert _unflushed_lite_files(service.settings) == []
    assert service.delete(job["doc_ids"])["deleted"] == job["doc_ids"]
    assert _unflushed_lite_files(service.settings) == []
