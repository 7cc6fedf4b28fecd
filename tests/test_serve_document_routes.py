"""LightRAG 1.5's document management routes (issue 14): scan of the input folder, clear
of all documents, LLM cache clear, reprocess of failed documents, cancel of the pipeline.

Each is called as LightRAG's WebUI calls it (no body, or ``{}`` for clear_cache) and
answered with the fields and statuses it reads. Real HTTP against the Serve app of
test_serve (one per module), in ``llm`` extraction mode so that the scripted LLM can make
documents fail and jobs slow.
"""

from __future__ import annotations

import itertools
import time

import httpx
import pytest

from lightrag_ray.cli.main import _parser
from lightrag_ray.core.ids import doc_id
from tests.scripted_llm import ScriptedLLM
from tests.test_serve_versions import stored_chunk_texts
from tests.serve_helpers import DOC_A, DOC_B, DOC_C, client, owner_log_text, run_app, wait_for  # noqa: F401 - client: fixture

DOC_D = "Ezra Pike repairs clocks in Oslo. Ezra Pike sells clocks to Nora Lind in Oslo."
RUNS = itertools.count(1)  # numbers the documents of _new_document


@pytest.fixture(scope="module")
def app(ray_cluster, llm_server, tmp_path_factory):
    """The app (LLM extraction); yields (base URL, workspace path). Its input folder is the default."""
    from ray import serve

    root = tmp_path_factory.mktemp("document_routes")
    yield run_app(root / "ws", llm_server.url, extraction_mode="llm"), root / "ws"
    serve.shutdown()


def statuses(client: httpx.Client) -> dict[str, dict[str, dict]]:  # noqa: F811
    """Documents by status, then by file path."""
    return {status: {row["file_path"]: row for row in rows}
            for status, rows in client.get("/documents").json()["statuses"].items()}


def scan(client: httpx.Client) -> dict:  # noqa: F811
    response = client.post("/documents/scan")  # the WebUI sends no body
    assert response.status_code == 200, response.text
    return response.json()


def test_serve_takes_the_input_folder():
    assert _parser().parse_args(["serve", "--input-dir", "in"]).input_dir == "in"


def test_scan_indexes_new_files_and_records_unreadable_ones(app, client):  # noqa: F811
    inputs = app[1] / "inputs"  # the default input folder: <workspace>/inputs
    (inputs / "sub").mkdir(parents=True)
    (inputs / "acme.txt").write_text(DOC_A)
    (inputs / "sub" / "london.md").write_text(DOC_B)
    (inputs / "picture.png").write_bytes(b"\x89PNG")
    (inputs / "empty.txt").write_text("")
    started = scan(client)
    assert started["status"] == "scanning_started" and started["track_id"].startswith("scan_")
    assert "2 new files queued, 0 known files skipped, 2 documents that cannot be read" in started["message"]
    done = wait_for(client, started["track_id"])
    assert done["job_status"] == "processed", done
    docs = statuses(client)
    assert set(docs["processed"]) == {"acme.txt", "sub/london.md"}
    assert set(docs["failed"]) == {"picture.png", "empty.txt"}
    assert docs["failed"]["picture.png"]["error"].startswith("unsupported file type .png")
    assert "empty" in docs["failed"]["empty.txt"]["error"]

    again = scan(client)  # nothing new: known files are skipped, the unreadable ones stay failed once
    assert "0 new files queued, 4 known files skipped, 0 documents" in again["message"]
    assert client.get(f"/documents/track_status/{again['track_id']}").json()["job_status"] == "processed"
    (inputs / "lisbon.txt").write_text(DOC_C)
    third = scan(client)
    job = client.get(f"/documents/track_status/{third['track_id']}").json()
    assert [d["doc_id"] for d in job["documents"]] == [doc_id(DOC_C)]
    assert wait_for(client, third["track_id"])["job_status"] == "processed"
    assert len(statuses(client)["failed"]) == 2


def _held_job(client: httpx.Client, llm: ScriptedLLM, text: str, source: str) -> dict:  # noqa: F811
    """Insert ``text`` while ``llm`` holds its requests (the caller's ``with llm.held()``) and
    return the job once its extraction request reached the LLM: it is running, and stays so.
    ``text`` and ``source`` must be new to the workspace (see ``_new_document``)."""
    job = client.post("/documents/text", json={"text": text, "file_source": source}).json()
    deadline = time.monotonic() + 120
    while not any(text in str(messages) for _, messages in list(llm.requests)):
        assert time.monotonic() < deadline, client.get(f"/documents/track_status/{job['track_id']}").json()
        time.sleep(0.1)
    return job


def _new_document(text: str, name: str) -> tuple[str, str]:
    """``text`` and file ``name`` made new to the workspace, so that a test inserting them
    holds a running job however often it runs in one session (pytest-repeat)."""
    run = next(RUNS)
    return f"{text} Run {run} ended.", f"{name.removesuffix('.txt')}-{run}.txt"


def test_a_running_job_makes_writes_busy_and_cancel_pipeline_stops_it(client, llm: ScriptedLLM):  # noqa: F811
    text, source = _new_document(DOC_D, "oslo.txt")
    with llm.held():
        job = _held_job(client, llm, text, source)
        assert client.get(f"/documents/track_status/{job['track_id']}").json()["job_status"] == "processing"

        skipped = scan(client)
        assert skipped["status"] == "scanning_skipped_pipeline_busy" and skipped["track_id"] == job["track_id"]
        cleared = client.delete("/documents")
        assert cleared.status_code == 200 and cleared.json()["status"] == "busy"
        assert job["track_id"] in cleared.json()["message"]
        cache = client.post("/documents/clear_cache", json={})
        assert cache.status_code == 409 and cache.json()["track_id"] == job["track_id"]

        assert client.get("/documents/pipeline_status").json()["cancellation_requested"] is False
        cancel = client.post("/documents/cancel_pipeline")
        assert cancel.status_code == 200 and cancel.json()["status"] == "cancellation_requested"
        # the job stops after its extraction batch, whose LLM call is held: running, asked to stop
        status = client.get("/documents/pipeline_status").json()
        assert status["cancellation_requested"] is True and status["busy"] is True, status
        assert status["latest_message"].startswith(f"cancelling insert job {job['track_id']}")
    assert wait_for(client, job["track_id"])["job_status"] == "cancelled"
    assert source in statuses(client)["failed"]
    assert not any(text in stored for stored in stored_chunk_texts())  # its passage left with it
    assert client.post("/documents/cancel_pipeline").json() == {
        "status": "not_busy", "message": "Pipeline is not currently running. No cancellation needed."}
    assert client.get("/documents/pipeline_status").json()["cancellation_requested"] is False  # the job ended


def test_an_edit_while_an_insert_runs_is_409_and_applies_after_it(client, llm: ScriptedLLM):  # noqa: F811
    edit = {"entity_name": "Alice Smith", "updated_data": {"entity_type": "FOUNDER"}}  # acme.txt, scanned above
    text, source = _new_document("Mira Holt tunes pianos in Bergen.", "bergen.txt")
    with llm.held():
        job = _held_job(client, llm, text, source)
        response = client.post("/graph/entity/edit", json=edit)
    assert response.status_code == 409, response.text
    assert "Pipeline is busy" in response.json()["detail"] and job["track_id"] in response.json()["detail"]
    assert response.headers["Retry-After"]
    assert "WriteBusy" not in owner_log_text()  # an answer, not an error logged with its traceback
    assert wait_for(client, job["track_id"])["job_status"] == "processed"
    applied = client.post("/graph/entity/edit", json=edit)
    assert applied.status_code == 200, applied.text
    assert applied.json()["data"]["graph_data"]["entity_type"] == "FOUNDER"


def test_reprocess_failed_reruns_failed_documents_once_the_cause_is_gone(client, llm: ScriptedLLM):  # noqa: F811
    unreadable = {"picture.png", "empty.txt"}  # failed with no uploaded copy to retry
    cancelled = {name: row["id"] for name, row in statuses(client)["failed"].items() if name not in unreadable}
    assert cancelled  # the job that cancel_pipeline stopped, above
    llm.add_rule(kind="extract", contains="Dora", action="500", times=100)
    job = client.post("/documents/text", json={"text": DOC_C + " Dora Quinn owns a boat.", "file_source": "boat"}).json()
    assert wait_for(client, job["track_id"])["job_status"] == "failed"
    assert "boat" in statuses(client)["failed"]
    llm.clear_rules()  # the cause is gone

    response = client.post("/documents/reprocess_failed")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "reprocessing_started" and body["track_id"].startswith("reprocess_")
    assert "2 failed documents have no uploaded copy" in body["message"]  # picture.png, empty.txt
    done = wait_for(client, body["track_id"])
    assert done["job_status"] == "processed"
    assert {d["doc_id"] for d in done["documents"]} == {*cancelled.values(), doc_id(DOC_C + " Dora Quinn owns a boat.")}
    docs = statuses(client)
    assert {"boat", *cancelled} <= set(docs["processed"]) and set(docs["failed"]) == unreadable

    again = client.post("/documents/reprocess_failed").json()
    assert again["status"] == "reprocessing_started" and again["track_id"] == ""


def test_clear_cache_empties_the_llm_cache(app, client):  # noqa: F811
    cached = app[1] / "extractions"
    assert list(cached.glob("*.parquet"))
    response = client.post("/documents/clear_cache", json={})  # the WebUI's body
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "success" and "cleared all cache" in response.json()["message"]
    assert not list(cached.glob("*.parquet"))
    older = client.post("/documents/clear_cache", json={"modes": ["default"]})  # LightRAG 1.4's body
    assert older.status_code == 200 and "0 cached chunk extractions" in older.json()["message"]


def test_clear_documents_empties_documents_graph_and_vectors(app, client):  # noqa: F811
    response = client.delete("/documents")  # the WebUI sends no body
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "success" and body["message"].startswith("All documents cleared successfully. Deleted 8")
    assert client.get("/documents").json()["statuses"] == {}
    assert client.get("/graph/label/list").json() == []
    data = client.post("/query/data", json={"query": "Who founded Acme Corporation?", "mode": "mix",
                                            "ll_keywords": ["Alice Smith"], "hl_keywords": ["telescopes"]}).json()["data"]
    assert data["entities"] == data["relationships"] == data["chunks"] == []
    assert not [p for p in (app[1] / "inbox").rglob("*") if p.is_file()]
    assert (app[1] / "inputs" / "acme.txt").exists()  # the input folder's files stay: a scan indexes them again


def _sources(client: httpx.Client, file_path: str) -> list[dict]:  # noqa: F811
    [row] = [r for rows in client.get("/documents").json()["statuses"].values() for r in rows
             if r["file_path"] == file_path]
    return row["metadata"]["sources"]


def test_a_scan_replaces_changed_files_and_removes_gone_ones_only_when_asked(app, client):  # noqa: F811
    inputs = app[1] / "inputs" / "synced"
    inputs.mkdir(parents=True, exist_ok=True)
    (inputs / "clocks.txt").write_text(DOC_D)
    (inputs / "gone.txt").write_text("Ilsa Marchetti trained Oren Vashti in Thornmoor.")
    assert wait_for(client, scan(client)["track_id"])["job_status"] == "processed"
    [source] = _sources(client, "synced/clocks.txt")
    assert source["kind"] == "file" and source["source"] == str(inputs / "clocks.txt")

    edited = DOC_D.replace("Oslo", "Bergen")
    (inputs / "clocks.txt").write_text(edited)
    (inputs / "gone.txt").unlink()
    kept = scan(client)
    assert "1 replaced" in kept["message"] and "removed" not in kept["message"], kept
    assert wait_for(client, kept["track_id"])["job_status"] == "processed"
    docs = statuses(client)["processed"]
    assert docs["synced/clocks.txt"]["id"] == doc_id(edited) and "synced/gone.txt" in docs  # no prune: it stays
    assert doc_id(DOC_D) not in {row["id"] for row in docs.values()}  # the old version left

    pruned = client.post("/documents/scan", json={"prune": True}).json()
    assert "1 removed" in pruned["message"], pruned
    assert wait_for(client, pruned["track_id"])["job_status"] == "processed"
    assert "synced/gone.txt" not in statuses(client)["processed"]
    assert "Thornmoor" not in str(client.get("/graphs", params={"label": "*", "max_nodes": 1000}).json())


def test_an_upload_of_the_same_name_replaces_it_and_texts_never_replace(app, client):  # noqa: F811
    def upload(text: str) -> dict:
        job = client.post("/documents/upload", files={"file": ("shipyard.txt", text.encode())}).json()
        return wait_for(client, job["track_id"])

    first, second = (f"Caspian Roe built ships in Kestrel Bay. Caspian Roe hired Nadia Ferro. Run {next(RUNS)}."
                     for _ in range(2))
    assert upload(first)["job_status"] == "processed"
    assert upload(second)["job_status"] == "processed"
    processed = statuses(client)["processed"]
    assert processed["shipyard.txt"]["id"] == doc_id(second)
    assert doc_id(first) not in {row["id"] for row in processed.values()}
    assert _sources(client, "shipyard.txt") == [{"source": "upload:shipyard.txt", "kind": "upload"}]

    texts = [f"Greta Solberg sailed to Nettlewick. Note {next(RUNS)}." for _ in range(2)]
    for text in texts:
        job = client.post("/documents/text", json={"text": text, "file_source": "note.txt"}).json()
        assert wait_for(client, job["track_id"])["job_status"] == "processed"
    ids = {row["id"] for row in client.get("/documents").json()["statuses"]["processed"]}
    assert {doc_id(t) for t in texts} <= ids  # two inserted texts of one name are two documents
