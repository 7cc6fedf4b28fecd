"""LightRAG 1.5's own clients against this server (issue 14, "a drop-in for LightRAG Server"):
the request bodies its WebUI and Python request models send (tests/fixtures/lightrag_requests.json)
are accepted, and the answers hold the fields those clients read; the WebUI's extra routes
(auth, paginated documents, pipeline status, labels) and CORS.

Real HTTP against the Serve app of test_serve (its fixtures) and the scripted LLM, which
records the requests it was sent; the route helpers are also checked on their own.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from lightrag_ray.core.context import Budgets, build_context
from lightrag_ray.core.subgraph import search_labels
from lightrag_ray.serve.api_models import DocumentsRequest, lightrag_data
from lightrag_ray.serve.document_views import paginate, pipeline_status
from lightrag_ray.serve.http_guard import LazyCORS
from tests.scripted_llm import ANSWER_PREFIX, ScriptedLLM
from tests.serve_helpers import API_KEY, wait_for

WORKSPACE = "lightrag_contract"  # the module's workspace on the package's app (tests/served/conftest.py)

BODIES: dict[str, Any] = json.loads((Path(__file__).parents[1] / "fixtures" / "lightrag_requests.json").read_text())
WEBUI_ORIGIN = "http://localhost:5173"  # the WebUI's dev server


def ndjson(client: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The lines of a /query/stream answer."""
    with client.stream("POST", "/query/stream", json=body) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line) for line in response.iter_lines() if line]


def calls(llm: ScriptedLLM, kind: str) -> list[list[dict[str, Any]]]:
    """The messages of each request of ``kind`` the scripted LLM received."""
    return [messages for seen, messages in llm.requests if seen == kind]


def token_payload(token: str) -> dict[str, Any]:
    """The middle part of a JWT-shaped token, decoded as the WebUI does (atob + JSON)."""
    parts = token.split(".")
    assert len(parts) == 3
    return json.loads(base64.b64decode(parts[1]))


# ---- queries ------------------------------------------------------------------------------

def assert_references(refs: list[dict[str, Any]]) -> None:
    assert refs and all(ref["reference_id"] and ref["file_path"] for ref in refs)


def test_webui_query_is_answered_with_references(client, llm, indexed):
    response = client.post("/query", json=BODIES["webui_query"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["response"].startswith(ANSWER_PREFIX) and body["llm_generated"] is True
    assert isinstance(body["response_time"], float) and body["response_time"] > 0
    assert_references(body["references"])
    answer = calls(llm, "answer")[-1]
    assert {"role": "assistant", "content": "A founder."} in answer  # the conversation history reached the prompt
    prompt, completion = llm.sent_tokens()  # what the scripted LLM reported for this query's calls
    assert body["usage"] == {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion, "estimated": False}


def test_webui_stream_sends_references_then_the_answer_then_its_usage(client, llm, indexed):
    lines = ndjson(client, BODIES["webui_query"])
    assert_references(lines[0]["references"])
    pieces = [line["response"] for line in lines[1:-1]]
    assert len(pieces) > 1 and "".join(pieces).startswith(ANSWER_PREFIX)
    prompt, completion = llm.sent_tokens()
    assert lines[-1] == {"usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                   "total_tokens": prompt + completion, "estimated": False}}


def test_older_webui_query_extracts_keywords_and_passes_the_user_prompt(client, llm, indexed):
    response = client.post("/query", json=BODIES["webui_query_1_4"])  # history_turns: an unknown field
    assert response.status_code == 200, response.text
    assert llm.counts()["keywords"] == 1  # hl_keywords and ll_keywords [] mean "extract them"
    prompt = "\n".join(m["content"] for m in calls(llm, "answer")[-1])
    assert "Answer in one sentence." in prompt


def test_python_client_nulls_and_empty_keywords(client, llm, indexed):
    response = client.post("/query", json=BODIES["python_query"])
    assert response.status_code == 200, response.text
    counts = llm.counts()
    assert counts["keywords"] == 1 and counts["answer"] == 1  # hl_keywords and ll_keywords []: extracted
    refs = response.json()["references"]
    assert_references(refs)
    assert all(ref["content"] and all(isinstance(text, str) for text in ref["content"]) for ref in refs)


def test_stream_false_sends_the_answer_as_one_line(client, indexed):
    lines = ndjson(client, BODIES["python_query_stream_false"])
    [line] = lines  # as LightRAG 1.5.7: the answer, its flag and the references together
    assert line["response"].startswith(ANSWER_PREFIX) and line["llm_generated"] is True
    assert [ref["file_path"] for ref in line["references"]]


def test_null_means_the_default_and_unknown_fields_are_ignored(client, indexed):
    nulls = {key: None for key in BODIES["python_query"] if key not in ("query", "mode")}
    body = {**nulls, "query": "Who founded Acme Corporation?", "mode": "local", "history_turns": 3, "colour": "red"}
    response = client.post("/query/data", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["processing_info"]["context_tokens_budget"] == 30000


def test_only_need_prompt_returns_the_prompt_without_an_answer(client, llm, indexed):
    body = {"query": "Who founded Acme Corporation?", "mode": "local", "ll_keywords": ["Acme Corporation"],
            "only_need_prompt": True, "user_prompt": "Be terse."}
    answer = client.post("/query", json=body).json()
    response = answer["response"]
    assert "Who founded Acme Corporation?" in response and "Be terse." in response and "Acme Corporation" in response
    assert llm.counts().get("answer", 0) == 0 and answer["llm_generated"] is False


# ---- auth ---------------------------------------------------------------------------------

def test_auth_status_and_login_give_a_guest_token_without_the_key(app):
    status = httpx.get(f"{app[0]}/auth-status", timeout=30)
    assert status.status_code == 200, status.text
    body = status.json()
    assert body["auth_configured"] is False and body["auth_mode"] == "disabled" and body["token_type"] == "bearer"
    assert token_payload(body["access_token"])["role"] == "guest"  # the WebUI's guest mode
    assert "API key" in body["message"] and body["core_version"] and body["api_version"] and body["webui_title"]
    login = httpx.post(f"{app[0]}/login", data=BODIES["webui_login"], timeout=30)
    assert login.status_code == 200, login.text
    assert {"access_token", "token_type", "auth_mode", "core_version", "api_version"} <= login.json().keys()
    guest = {"Authorization": f"Bearer {body['access_token']}"}  # with an API key set, the token opens nothing
    assert httpx.get(f"{app[0]}/documents/status_counts", headers=guest, timeout=30).status_code == 403


@pytest.mark.parametrize("headers, status, detail", [({}, 403, "API Key required"), ({"X-API-Key": "wrong"}, 403, "Invalid API Key"),
                                                     ({"X-API-Key": API_KEY}, 200, None)])
def test_auth_verify_answers_as_the_webuis_key_dialog_expects(app, headers, status, detail):
    answer = httpx.get(f"{app[0]}/auth/verify", headers=headers, timeout=30)
    assert answer.status_code == status
    if detail is None:
        assert answer.json() == {"status": "ok"}
    else:
        assert detail in answer.json()["detail"]


# ---- documents ----------------------------------------------------------------------------

def test_paginated_documents_as_the_webui_reads_them(client, indexed):
    response = client.post("/documents/paginated", json=BODIES["webui_paginated"])
    assert response.status_code == 200, response.text
    page = response.json()
    docs, pagination, counts = page["documents"], page["pagination"], page["status_counts"]
    assert set(indexed.values()) <= {d["id"] for d in docs}
    assert all({"id", "status", "file_path", "content_summary", "content_length", "created_at", "updated_at",
                "chunks_count"} <= d.keys() for d in docs)
    assert pagination["total_count"] == counts["all"] == len(docs) and pagination["has_prev"] is False
    updated = [d["updated_at"] for d in docs]
    assert updated == sorted(updated, reverse=True)
    processed = client.post("/documents/paginated", json=BODIES["webui_paginated_processed"]).json()["documents"]
    assert {d["status"] for d in processed} == {"processed"}
    assert [d["file_path"] for d in processed] == sorted(d["file_path"] for d in processed)
    assert client.post("/documents/paginated", json=BODIES["python_paginated"]).status_code == 200
    none = client.post("/documents/paginated", json={"status_filters": ["failed"], "page_size": 10}).json()
    assert none["documents"] == [] and none["pagination"]["total_count"] == 0


def test_status_counts_and_an_idle_pipeline(client, indexed):
    counts = client.get("/documents/status_counts").json()["status_counts"]
    assert counts["processed"] >= 3 and counts["all"] == sum(v for k, v in counts.items() if k != "all")
    status = client.get("/documents/pipeline_status").json()
    assert status["busy"] is False and status["docs"] == 0 and status["history_messages"] == []
    assert {"job_name", "batchs", "cur_batch", "latest_message", "request_pending"} <= status.keys()


# ---- graph --------------------------------------------------------------------------------

def test_popular_and_searched_labels_and_entity_exists(client, indexed):
    popular = client.get("/graph/label/popular", params={"limit": 3}).json()
    assert len(popular) == 3 and all(isinstance(name, str) for name in popular)
    assert "Alice Smith" in client.get("/graph/label/popular").json()
    assert client.get("/graph/label/popular", params={"limit": 0}).status_code == 422
    assert client.get("/graph/label/search", params={"q": "alice"}).json()[0] == "Alice Smith"
    assert client.get("/graph/label/search", params={"q": "LISB", "limit": 1}).json() == ["Lisbon"]
    assert client.get("/graph/entity/exists", params={"name": "Bob Jones"}).json() == {"exists": True}
    assert client.get("/graph/entity/exists", params={"name": "bob jones"}).json() == {"exists": False}


# ---- CORS ---------------------------------------------------------------------------------

def test_cors_preflight_needs_no_key_and_allows_any_origin_by_default(app):
    preflight = httpx.options(f"{app[0]}/query", timeout=30, headers={
        "Origin": WEBUI_ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-api-key,authorization"})
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "x-api-key" in preflight.headers["access-control-allow-headers"].lower()
    denied = httpx.get(f"{app[0]}/graph/label/list", headers={"Origin": WEBUI_ORIGIN}, timeout=30)
    assert denied.status_code == 403 and denied.headers["access-control-allow-origin"] == "*"  # readable by the WebUI


def test_cors_with_an_origin_list_allows_only_those_with_credentials():
    page = Starlette(routes=[Route("/x", lambda request: PlainTextResponse("ok"))])
    with TestClient(LazyCORS(page, origins=lambda: [WEBUI_ORIGIN])) as http:
        asked = {"Access-Control-Request-Method": "GET"}
        allowed = http.options("/x", headers={"Origin": WEBUI_ORIGIN, **asked})
        assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == WEBUI_ORIGIN
        assert allowed.headers["access-control-allow-credentials"] == "true"
        assert http.options("/x", headers={"Origin": "http://elsewhere.example", **asked}).status_code == 400


# ---- route helpers ------------------------------------------------------------------------

def row(doc: str, status: str, updated: str, track: str = "", path: str = "") -> dict[str, Any]:
    return {"doc_id": doc, "status": status, "updated": updated, "track_id": track, "file_path": path,
            "error": "", "chunks": 0}


def test_pipeline_status_maps_the_running_and_queued_jobs():
    statuses = {"processing": [row("d1", "processing", "t1", "insert_a"), row("d2", "processing", "t1", "insert_a")],
                "pending": [row("d3", "pending", "t2", "insert_b")], "processed": [row("d0", "processed", "t0")]}
    status = pipeline_status(statuses)
    assert status["busy"] is True and status["docs"] == 2 and status["job_name"] == "insert insert_a"
    assert status["job_start"] == "t1" and status["request_pending"] is True and (status["cur_batch"], status["batchs"]) == (1, 1)
    assert status["history_messages"] == ["indexing 2 document(s) of insert job insert_a", "1 insert job(s) queued"]
    assert status["cancellation_requested"] is False
    cancelling = pipeline_status(statuses, cancelling=True)
    assert cancelling["cancellation_requested"] is True and "cancelling insert job insert_a" in cancelling["history_messages"][1]
    assert pipeline_status({"processed": statuses["processed"]}, cancelling=True)["cancellation_requested"] is False


def test_paginate_pages_filters_and_sorts():
    statuses = {"processed": [row(f"d{i:02d}", "processed", f"t{i:02d}", path=f"f{25 - i:02d}") for i in range(25)],
                "failed": [row("bad", "failed", "t99")]}
    second = paginate(statuses, DocumentsRequest(status_filter="processed", page=2, page_size=10, sort_field="file_path",
                                                 sort_direction="asc"))
    assert [d["file_path"] for d in second["documents"]] == [f"f{i:02d}" for i in range(11, 21)]
    assert second["pagination"] == {"page": 2, "page_size": 10, "total_count": 25, "total_pages": 3,
                                    "has_next": True, "has_prev": True}
    assert second["status_counts"] == {"processed": 25, "failed": 1, "all": 26}


@pytest.mark.parametrize("query, expected", [
    ("acme", ["Acme", "Acme Corporation", "Big Acme"]), ("ACME CORP", ["Acme Corporation"]), ("  ", [])])
def test_search_labels_ranks_exact_then_prefix_then_substring(query, expected):
    assert search_labels(["Big Acme", "Acme Corporation", "Acme", "Paris"], query, 10) == expected


# ---- delete (last: it changes the graph) ------------------------------------------------------

def test_webui_delete_body_says_what_it_cannot_do(client, indexed):
    response = client.request("DELETE", "/documents/delete_document",
                              json={**BODIES["webui_delete"], "doc_ids": [indexed["c"]]})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["deleted"] == [indexed["c"]] and body["doc_id"] == indexed["c"]
    assert "not supported" in body["message"] and "delete_file" in body["message"] and "delete_llm_cache" in body["message"]
    docs = client.post("/documents/paginated", json=BODIES["webui_paginated"]).json()["documents"]
    assert indexed["c"] not in {d["id"] for d in docs}


# ---- /query/data and references in LightRAG's shape (last: it adds documents) --------------------

ENTITY_KEYS = {"entity_name", "entity_type", "description", "source_id", "file_path", "reference_id"}
RELATION_KEYS = {"src_id", "tgt_id", "description", "keywords", "weight", "source_id", "file_path", "reference_id"}
CHUNK_KEYS = {"content", "file_path", "chunk_id", "reference_id"}
PROCESSING_KEYS = {"total_entities_found", "total_relations_found", "entities_after_truncation",
                   "relations_after_truncation", "merged_chunks_count", "final_chunks_count"}
FLEET = ["Nora Vale commands the ship Kestrel. Nora Vale sails the Kestrel from Bergen.",
         "Nora Vale repairs the Kestrel in Bergen every winter. The Kestrel carries timber to Bergen."]
FLEET_QUERY = {"query": "What does Nora Vale do?", "mode": "mix", "ll_keywords": ["Nora Vale"], "hl_keywords": ["ships"]}


@pytest.fixture(scope="module")
def fleet(client, indexed):
    """Two documents of one file, fleet.txt: two chunks that must share one reference."""
    job = client.post("/documents/texts", json={"texts": FLEET, "file_sources": ["fleet.txt", "fleet.txt"]})
    assert job.status_code == 200, job.text
    assert wait_for(client, job.json()["track_id"])["job_status"] == "processed"


def test_lightrag_data_joins_sources_and_numbers_references_per_file():
    chunks = [{"chunk_id": f"chunk-{i}", "file_path": path, "text": f"passage {i}", "doc_id": f"doc-{i}"}
              for i, path in enumerate(["a.txt", "b.txt", "b.txt", ""])]
    entity = {"name": "Ann", "type": "person", "description": "A sailor.", "source_ids": ["chunk-0", "chunk-1"],
              "file_paths": ["a.txt", "b.txt"]}
    lone = {"source": "Ann", "target": "Bo", "keywords": "crew", "description": "Shipmates.", "weight": 2,
            "source_ids": ["chunk-9"], "file_paths": []}
    data = lightrag_data(build_context([entity], [lone], chunks, Budgets(1000, 1000, 5000)))
    assert data["references"] == [{"reference_id": "1", "file_path": "b.txt"}, {"reference_id": "2", "file_path": "a.txt"}]
    assert [c["reference_id"] for c in data["chunks"]] == ["2", "1", "1", ""]
    assert data["chunks"][3]["file_path"] == "unknown_source" and data["chunks"][0]["content"] == "passage 0"
    assert data["entities"] == [{"entity_name": "Ann", "entity_type": "person", "description": "A sailor.",
                                 "source_id": "chunk-0<SEP>chunk-1", "file_path": "a.txt<SEP>b.txt", "reference_id": "2"}]
    assert data["relationships"] == [{"src_id": "Ann", "tgt_id": "Bo", "description": "Shipmates.", "keywords": "crew",
                                      "weight": 2.0, "source_id": "chunk-9", "file_path": "unknown_source",
                                      "reference_id": ""}]


@pytest.mark.parametrize("mode", ["mix", "walk"])  # walk, the default: graph facts too, not passages alone
def test_query_data_has_the_keys_lightrag_clients_read(client, fleet, mode):
    response = client.post("/query/data", json={**FLEET_QUERY, "mode": mode})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body.keys() == {"status", "message", "data", "metadata"} and body["status"] == "success"
    data = body["data"]
    assert data.keys() == {"entities", "relationships", "chunks", "references"}
    assert data["entities"] and data["relationships"] and data["chunks"]
    assert all(ENTITY_KEYS <= e.keys() and all(isinstance(e[k], str) for k in ENTITY_KEYS) for e in data["entities"])
    assert all(RELATION_KEYS <= r.keys() and isinstance(r["weight"], float) for r in data["relationships"])
    assert all(CHUNK_KEYS <= c.keys() and c["content"] for c in data["chunks"])
    assert all(s.startswith("chunk-") for e in data["entities"] for s in e["source_id"].split("<SEP>"))
    refs = data["references"]
    assert all(ref.keys() == {"reference_id", "file_path"} for ref in refs)
    assert [ref["reference_id"] for ref in refs] == [str(n) for n in range(1, len(refs) + 1)]
    numbers = {ref["file_path"]: ref["reference_id"] for ref in refs}
    assert len(numbers) == len(refs) and all(c["reference_id"] == numbers[c["file_path"]] for c in data["chunks"])
    fleet_chunks = [c for c in data["chunks"] if c["file_path"] == "fleet.txt"]
    assert len(fleet_chunks) == 2 and refs[0] == {"reference_id": "1", "file_path": "fleet.txt"}  # most passages: first
    nora = next(e for e in data["entities"] if e["entity_name"] == "Nora Vale")
    assert nora["file_path"] == "fleet.txt" and nora["reference_id"] == "1" and nora["source_id"].count("<SEP>") == 1
    metadata = body["metadata"]
    assert metadata["query_mode"] == mode and metadata["keywords"] == {"high_level": ["ships"], "low_level": ["Nora Vale"]}
    info = metadata["processing_info"]
    assert PROCESSING_KEYS <= info.keys() and info["final_chunks_count"] == len(data["chunks"])
    assert info["entities_after_truncation"] == len(data["entities"]) <= info["total_entities_found"]


def test_answer_references_are_per_file_and_match_the_numbers_the_llm_sees(client, fleet):
    data_refs = client.post("/query/data", json=FLEET_QUERY).json()["data"]["references"]
    body = client.post("/query", json={**FLEET_QUERY, "only_need_context": True, "include_chunk_content": True}).json()
    refs = body["references"]
    assert [{k: ref[k] for k in ("reference_id", "file_path")} for ref in refs] == data_refs
    assert sorted(refs[0]["content"]) == sorted(FLEET)  # both passages of fleet.txt under its one reference
    listed = body["response"].split("References:\n")[1].splitlines()
    assert listed == [f"[{ref['reference_id']}] {ref['file_path']}" for ref in refs]  # an answer's [1] is reference "1"
    assert body["response"].count("\n[1] fleet.txt (chunk-") == 2
    lines = ndjson(client, FLEET_QUERY)
    assert lines[0] == {"references": data_refs}
