"""The Ray Serve application over real HTTP on 127.0.0.1: every route, auth, limits, streaming.

The package's app (tests/served/conftest.py), in its default workspace: requests name no
workspace, as a single-workspace app's do. The workspace starts empty and is filled through
/documents/*, so inserts, queries and deletes all go through the service.
The LLM is the scripted OpenAI-compatible server (keywords and answers).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from lightrag_ray.core.ids import doc_id
from tests.document_helpers import docx_bytes, pdf_bytes
from tests.scripted_llm import ANSWER_PREFIX
from tests.scripted_rerank import score
from tests.served.conftest import RERANK_MODEL
from tests.serve_helpers import API_KEY, DOC_A, HEADERS, MAX_BODY_MB, wait_for
from tests.serve_schema import validate_serve_config


def query_data(client: httpx.Client, names: list[str], mode: str = "local") -> dict[str, Any]:
    response = client.post("/query/data", json={"query": f"Tell me about {names[0]}", "mode": mode,
                                                "ll_keywords": names, "hl_keywords": []})
    assert response.status_code == 200, response.text
    return response.json()


# ---- health, auth, limits, validation -------------------------------------------------

def test_health_needs_no_key_and_reports_the_graph_to_key_holders(app, indexed):
    assert httpx.get(f"{app[0]}/health", timeout=30).json() == {"status": "healthy"}  # liveness only
    health = httpx.get(f"{app[0]}/health", headers=HEADERS, timeout=30).json()
    assert health["status"] == "healthy"
    assert health["graph_version"] >= 2 and health["entities"] > 5 and health["relations"] > 3
    assert health["documents"] == {"processed": 3}
    assert health["embedding_model"].endswith("all-MiniLM-L6-v2") and health["embedding_dim"] == 384


@pytest.mark.parametrize("headers, reason", [({}, "API Key required"), ({"X-API-Key": "wrong"}, "Invalid API Key"),
                                             ({"Authorization": "Bearer wrong"}, "Invalid API Key")])
def test_missing_or_wrong_key_is_403_as_lightrag_answers(app, headers, reason):
    response = httpx.post(f"{app[0]}/query/data", json={"query": "x"}, headers=headers, timeout=30)
    assert response.status_code == 403 and "www-authenticate" not in response.headers
    assert response.json()["detail"].startswith(f"{reason}: send it as X-API-Key")


def test_only_health_and_api_docs_are_open(app):
    assert httpx.get(f"{app[0]}/docs", timeout=30).status_code == 200
    assert httpx.get(f"{app[0]}/documents/track_status/health", timeout=30).status_code == 403
    assert httpx.get(f"{app[0]}/graph/label/list", timeout=30).status_code == 403


def test_bearer_key_is_accepted(app):
    response = httpx.get(f"{app[0]}/v1/models", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30)
    assert response.status_code == 200
    assert [m["id"] for m in response.json()["data"]][:2] == ["lightrag-mix", "lightrag-local"]


def test_oversized_body_is_413(client):
    response = client.post("/documents/text", json={"text": "word " * int(MAX_BODY_MB * 1024 * 1024 / 4)})
    assert response.status_code == 413
    assert "limit" in response.json()["detail"]


def test_oversized_chunked_body_is_413(client):
    def body():  # no Content-Length: the limit must hold while the body is read
        yield b'{"text": "'
        for _ in range(30):
            yield b"x" * 4096
        yield b'"}'
    response = client.post("/documents/text", content=body(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413


def test_malformed_json_is_422(client):
    response = client.post("/query/data", content=b'{"query": "who?", ', headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "json_invalid"


def test_bad_mode_is_422_but_an_unknown_field_is_ignored(client, indexed):
    # LightRAG's contract: fields of other LightRAG versions must not break a query
    assert client.post("/query/data", json={"query": "who?", "colour": "red"}).status_code == 200
    detail = client.post("/query/data", json={"query": "who?", "mode": "deep"}).json()["detail"]
    assert detail[0]["loc"][-1] == "mode"


# ---- documents --------------------------------------------------------------------------

def test_documents_lists_every_processed_document(client, indexed):
    docs = client.get("/documents").json()
    processed = {d["doc_id"]: d for d in docs["statuses"]["processed"]}
    assert {indexed["a"], indexed["b"], indexed["c"]} <= set(processed)
    assert processed[indexed["a"]]["file_path"] == "acme.txt"  # the file_source, not the inbox path
    assert processed[indexed["c"]]["file_path"] == "lisbon"  # kept as given
    lightrag_fields = {"id", "content_summary", "content_length", "status", "created_at", "updated_at", "track_id",
                       "chunks_count", "error_msg", "metadata", "file_path"}  # LightRAG's DocStatusResponse
    assert lightrag_fields <= processed[indexed["a"]].keys()
    assert processed[indexed["a"]]["id"] == indexed["a"] and processed[indexed["a"]]["chunks_count"] >= 1


def test_same_text_again_is_duplicated(client, indexed):
    again = client.post("/documents/text", json={"text": DOC_A}).json()
    assert again["status"] == "duplicated" and again["doc_ids"] == [indexed["a"]]
    track = client.get(f"/documents/track_status/{again['track_id']}").json()
    assert track["job_status"] == "duplicated" and track["documents"][0]["status"] == "processed"


def test_unknown_track_id_is_404(client):
    assert client.get("/documents/track_status/insert_nope").status_code == 404


def test_upload_stays_inside_the_workspace(app, client, indexed):
    text = "Erin Blake repairs clocks in Vienna. Erin Blake collects Vienna maps."
    response = client.post("/documents/upload", files={"file": ("../../escape.txt", text.encode(), "text/plain")})
    assert response.status_code == 200, response.text
    track = response.json()["track_id"]
    assert wait_for(client, track)["job_status"] == "processed"
    workspace = app[1]
    assert not (workspace.parent / "escape.txt").exists() and not (workspace.parent.parent / "escape.txt").exists()
    stored = list((workspace / "inbox" / track).iterdir())
    assert [p.name for p in stored] == ["0000-escape.txt"] and stored[0].read_text() == text
    documents = client.get(f"/documents/track_status/{track}").json()["documents"]
    assert [d["file_path"] for d in documents] == ["../../escape.txt"]  # the name as given; only the disk path is cut
    assert "Erin Blake" in client.get("/graph/label/list").json()


@pytest.mark.parametrize("name, data, reason", [
    ("empty.txt", b"", "empty"),
    ("image.txt", bytes(range(256)) * 4, "binary"),
    ("broken.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog", "damaged or not a valid pdf file"),
    ("photo.png", b"\x89PNG\r\n\x1a\n", "unsupported file type .png"),
])
def test_unusable_upload_is_400_with_the_reason(client, name, data, reason):
    response = client.post("/documents/upload", files={"file": (name, data)})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail.startswith("nothing to index: ") and name in detail and reason in detail.lower()
    assert "ray::" not in detail and "Traceback" not in detail  # the cause, not Ray's remote traceback


def upload(client: httpx.Client, name: str, data: bytes) -> str:
    """Upload one file, wait for its job to be processed; returns the track id."""
    response = client.post("/documents/upload", files={"file": (name, data)})
    assert response.status_code == 200, response.text
    track = response.json()["track_id"]
    assert wait_for(client, track)["job_status"] == "processed"
    return track


@pytest.mark.parametrize("name, data, person", [
    ("violins.pdf", pdf_bytes(["Greta Holm builds violins in Bergen.", "Greta Holm sells violins in Bergen."]),
     "Greta Holm"),
    ("lighthouses.docx", docx_bytes(["Ivo Marek paints lighthouses in Split.", "Ivo Marek sells paintings in Split."]),
     "Ivo Marek"),
])
def test_pdf_and_docx_uploads_are_converted_and_found_by_query(client, name, data, person):
    upload(client, name, data)
    found = query_data(client, [person])["data"]
    assert any(person in chunk["content"] and "sells" in chunk["content"] for chunk in found["chunks"])
    assert name in {ref["file_path"] for ref in found["references"]}


def test_file_names_are_kept_as_given(app, client):
    text = "Lena Fischer audits breweries in Munich. Lena Fischer writes reports."
    track = upload(client, "报告.md", text.encode())
    assert [d["file_path"] for d in client.get(f"/documents/track_status/{track}").json()["documents"]] == ["报告.md"]
    assert [p.name for p in (app[1] / "inbox" / track).iterdir()] == ["0000-document.md"]  # ASCII on disk only
    url = "https://en.wikipedia.org/wiki/Paris"
    paris = "The Louvre Museum holds the Mona Lisa. The Louvre Museum lies on the Seine River."
    job = client.post("/documents/text", json={"text": paris, "file_source": url}).json()
    assert wait_for(client, job["track_id"])["documents"][0]["file_path"] == url
    assert url in {ref["file_path"] for ref in query_data(client, ["Louvre Museum"])["data"]["references"]}


# ---- queries ----------------------------------------------------------------------------

def test_insert_is_visible_to_query_data(client, indexed):
    data = query_data(client, ["Acme Corporation"])
    entities = {e["entity_name"] for e in data["data"]["entities"]}
    assert "Acme Corporation" in entities
    assert data["metadata"]["keywords"]["low_level"] == ["Acme Corporation"]
    assert data["metadata"]["query_mode"] == "local"
    refs = data["data"]["references"]
    assert refs and refs[0]["reference_id"] == "1" and refs[0]["file_path"] == "acme.txt"
    assert DOC_A in {c["content"] for c in data["data"]["chunks"]}


def test_query_data_passages_follow_the_rerankers_scores_unless_told_not_to(client, reranker, indexed):
    """The package's app reranks with the scripted rerank server (conftest.py)."""
    question = {"query": "Who studies whales near Lisbon, Alice Smith or Bob Jones?", "mode": "naive"}

    def passages(body: dict[str, Any]) -> list[str]:
        return [chunk["content"] for chunk in body["data"]["chunks"]]

    kept = client.post("/query/data", json={**question, "enable_rerank": False}).json()
    assert kept["metadata"]["retrieval"]["rerank"] == "off" and reranker.requests == 0
    ranked = client.post("/query/data", json=question).json()
    assert ranked["metadata"]["retrieval"]["rerank"] == f"reranked by {RERANK_MODEL}"
    assert passages(ranked) == sorted(passages(kept), key=lambda text: -score(question["query"], text)) != passages(kept)
    assert reranker.requests == 1 and reranker.authorizations == ["Bearer rerank-key"]
    assert reranker.bodies[0] == {"model": RERANK_MODEL, "query": question["query"], "documents": passages(kept),
                                  "top_n": len(passages(kept))}


def test_query_answers_with_references(client, llm, indexed):
    response = client.post("/query", json={"query": "Who founded Acme Corporation?", "mode": "mix"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["response"].startswith(ANSWER_PREFIX)
    assert any(r["file_path"].endswith("acme.txt") for r in body["references"])
    assert llm.counts()["keywords"] == 1 and llm.counts()["answer"] == 1


def test_query_only_context_returns_the_context_text(client, indexed):
    body = client.post("/query", json={"query": "Acme?", "mode": "local", "ll_keywords": ["Acme Corporation"],
                                       "only_need_context": True}).json()
    assert "Acme Corporation" in body["response"] and "References:" in body["response"]


def test_query_stream_of_the_context_alone_is_one_line_without_the_llm(client, llm, indexed):
    """As LightRAG streams it: one NDJSON line holding the context (llm_generated false, the
    references when asked for), and no LLM request."""
    question = {"query": "Acme?", "mode": "local", "ll_keywords": ["Acme Corporation"], "hl_keywords": [],
                "only_need_context": True}
    whole = client.post("/query", json=question).json()
    llm.reset()
    with client.stream("POST", "/query/stream", json={**question, "include_references": True}) as response:
        assert response.status_code == 200
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert len(lines) == 1 and lines[0]["response"] == whole["response"] and lines[0]["llm_generated"] is False
    assert any(r["file_path"].endswith("acme.txt") for r in lines[0]["references"])
    assert sum(llm.counts().values()) == 0


def test_query_stream_is_ndjson_references_then_the_answer(client, indexed):
    question = {"query": "Who met Bob Jones?", "mode": "hybrid"}
    whole = client.post("/query", json=question).json()
    with client.stream("POST", "/query/stream", json=question) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert lines[0] == {"references": whole["references"]}
    pieces = [line["response"] for line in lines[1:-1]]
    assert len(pieces) > 1 and "".join(pieces) == whole["response"]
    assert lines[-1]["usage"].keys() == whole["usage"].keys() and lines[-1]["usage"]["completion_tokens"] > 0


def test_llm_failure_is_502_and_a_stream_error_line(client, llm, indexed):
    llm.add_rule(kind="answer", action="500", times=10)
    response = client.post("/query", json={"query": "Who met Bob Jones?", "mode": "local", "ll_keywords": ["Bob Jones"]})
    assert response.status_code == 502 and response.json()["detail"].startswith("the LLM failed: ")
    assert "ray::" not in response.json()["detail"]
    with client.stream("POST", "/query/stream", json={"query": "Bob?", "ll_keywords": ["Bob Jones"]}) as stream:
        lines = [json.loads(line) for line in stream.iter_lines() if line]
    assert "references" in lines[0] and "LLM" in lines[-1]["error"]


# ---- graph ------------------------------------------------------------------------------

def test_graphs_returns_the_subgraph_around_a_label(client, indexed):
    graph = client.get("/graphs", params={"label": "Alice Smith", "max_depth": 1, "max_nodes": 50}).json()
    names = {n["id"] for n in graph["nodes"]}
    assert {"Alice Smith", "Acme Corporation", "Bob Jones"} <= names
    assert "Dora Quinn" not in names
    assert all(e["source"] in names and e["target"] in names for e in graph["edges"])
    assert any({e["source"], e["target"]} == {"Alice Smith", "Bob Jones"} for e in graph["edges"])
    alice = next(n for n in graph["nodes"] if n["id"] == "Alice Smith")["properties"]  # LightRAG's names and formats
    assert alice["entity_id"] == "Alice Smith" and alice["entity_type"] and alice["description"]
    assert alice["source_id"].split("<SEP>") and all(c.startswith("chunk-") for c in alice["source_id"].split("<SEP>"))
    assert isinstance(alice["file_path"], str) and alice["degree"] >= 2
    assert {"weight", "description", "keywords", "source_id", "file_path"} <= set(graph["edges"][0]["properties"])
    small = client.get("/graphs", params={"label": "Alice Smith", "max_nodes": 2}).json()
    assert len(small["nodes"]) == 2 and small["is_truncated"] is True


def test_label_list_holds_every_entity_name(client, indexed):
    labels = client.get("/graph/label/list").json()
    assert labels == sorted(labels)
    assert {"Alice Smith", "Bob Jones", "Dora Quinn", "Lisbon"} <= set(labels)


# ---- OpenAI-compatible --------------------------------------------------------------------

def test_openai_client_chat(app, indexed):
    client = openai.OpenAI(base_url=f"{app[0]}/v1", api_key=API_KEY)
    completion = client.chat.completions.create(
        model="lightrag-local", messages=[{"role": "user", "content": "Where does Dora Quinn sail from?"}])
    assert completion.choices[0].message.content.startswith(ANSWER_PREFIX)
    assert completion.model == "lightrag-local" and completion.choices[0].finish_reason == "stop"


def test_openai_client_chat_streaming_matches(app, indexed):
    client = openai.OpenAI(base_url=f"{app[0]}/v1", api_key=API_KEY)
    messages = [{"role": "user", "content": "Who is Bob?"}, {"role": "assistant", "content": "A novelist."},
                {"role": "user", "content": "Where does Bob Jones live?"}]
    whole = client.chat.completions.create(model="lightrag-mix", messages=messages).choices[0].message.content
    pieces = [c.choices[0].delta.content for c in client.chat.completions.create(
        model="lightrag-mix", messages=messages, stream=True) if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 1 and "".join(pieces) == whole


def test_walk_is_the_default_mode_of_query_data_and_a_v1_model(app, client, indexed):
    response = client.post("/query/data", json={"query": "Who founded Acme Corporation?", "ll_keywords": ["Acme Corporation"]})
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["metadata"]["query_mode"] == "walk"
    assert data["data"]["chunks"] and data["data"]["chunks"][0]["file_path"] == "acme.txt"
    completion = openai.OpenAI(base_url=f"{app[0]}/v1", api_key=API_KEY).chat.completions.create(
        model="lightrag-walk", messages=[{"role": "user", "content": "Who founded Acme Corporation?"}])
    assert completion.model == "lightrag-walk" and completion.choices[0].message.content.startswith(ANSWER_PREFIX)


def test_openai_unknown_model_is_not_found(app):
    client = openai.OpenAI(base_url=f"{app[0]}/v1", api_key=API_KEY)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])


# ---- delete (last: it changes the graph) ----------------------------------------------------

def test_delete_removes_a_document_but_shared_entities_keep_other_sources(client, indexed):
    before = {e["entity_name"]: e for e in query_data(client, ["Alice Smith", "Acme Corporation"])["data"]["entities"]}
    assert len(before["Alice Smith"]["source_id"].split("<SEP>")) == 2
    response = client.request("DELETE", "/documents/delete_document", json={"doc_ids": [indexed["a"]]})
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["deleted"] == [indexed["a"]] and result["entities_removed"] >= 2  # Acme, Carol White, Paris...
    labels = set(client.get("/graph/label/list").json())
    assert "Acme Corporation" not in labels and "Carol White" not in labels
    assert {"Alice Smith", "Bob Jones"} <= labels
    after = {e["entity_name"]: e for e in query_data(client, ["Alice Smith", "Acme Corporation"])["data"]["entities"]}
    assert "Acme Corporation" not in after
    assert len(after["Alice Smith"]["source_id"].split("<SEP>")) == 1
    assert "Acme" not in after["Alice Smith"]["description"]
    chunks = query_data(client, ["Alice Smith"], mode="mix")["data"]["chunks"]
    assert DOC_A not in {c["content"] for c in chunks}
    assert indexed["a"] not in {d["doc_id"] for d in client.get("/documents").json()["statuses"]["processed"]}
    missing = client.request("DELETE", "/documents/delete_document", json={"doc_ids": ["doc-nope"]})
    assert missing.status_code == 404


def test_serve_config_validates_against_the_serve_schema():
    import yaml

    from lightrag_ray.serve.app import AppArgs

    config = yaml.safe_load((Path(__file__).resolve().parents[2] / "serve_config.yaml").read_text())
    schema = validate_serve_config(config)
    assert schema.http_options.host == "127.0.0.1"
    app_config = config["applications"][0]
    assert app_config["import_path"] == "lightrag_ray.serve.app:build_app"
    AppArgs.model_validate(app_config["args"])  # unknown keys would raise
    names = {d["name"] for d in app_config["deployments"]}
    assert names == {"Ingress", "EmbedderDeployment", "LLMDeployment", "WorkspaceDeployment"}
    typo = yaml.safe_load(yaml.safe_dump(config))
    typo["applications"][0]["deployments"][0]["autoscaling_config"]["max_replica"] = 3
    with pytest.raises(ValueError, match=r"applications\[0\]\.deployments\[0\]\.autoscaling_config\.max_replica"):
        validate_serve_config(typo)
    with pytest.raises(ValueError):
        AppArgs.model_validate({**app_config["args"], "colour": "red"})


def test_killed_workspace_replica_resumes_its_insert_job(client, indexed):
    """Kill the workspace owner while it indexes: Serve restarts it, the job runs again and
    nothing is lost or counted twice."""
    import ray

    text = "Frank Moss rows across Lake Geneva. Frank Moss builds boats near Lake Geneva."
    track = client.post("/documents/text", json={"text": text, "file_source": "geneva.txt"}).json()["track_id"]
    deadline = time.monotonic() + 120
    while client.get(f"/documents/track_status/{track}").json()["job_status"] != "processing":
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.2)
    replicas = [a for a in ray.util.list_named_actors(all_namespaces=True)
                if "WorkspaceDeployment" in a["name"] and a["namespace"] == "serve"]
    assert len(replicas) == 1
    ray.kill(ray.get_actor(replicas[0]["name"], namespace="serve"), no_restart=True)
    deadline = time.monotonic() + 300
    status = None
    while time.monotonic() < deadline:
        try:
            status = client.get(f"/documents/track_status/{track}").json()
            if status.get("job_status") == "processed":
                break
        except httpx.HTTPError:
            pass
        time.sleep(2)
    assert status and status["job_status"] == "processed", status
    labels = client.get("/graph/label/list").json()
    assert "Frank Moss" in labels and labels.count("Frank Moss") == 1
    frank = query_data(client, ["Frank Moss"])["data"]["entities"]
    assert frank[0]["entity_name"] == "Frank Moss" and "<SEP>" not in frank[0]["source_id"]
    docs = client.get("/documents").json()["statuses"]
    assert doc_id(text) in {d["doc_id"] for d in docs["processed"]} and "processing" not in docs

