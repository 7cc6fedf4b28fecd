"""The Ollama-compatible API (/api/*) as an Ollama client sees it: version, tags, chat and
generate streamed as NDJSON (the default) or whole, counts and durations, LightRAG
Server's query prefixes (mode, bypass, context only), Ollama's ``{"error"}`` bodies.

Real HTTP against the package's Serve app (conftest.py) and the scripted LLM, which
records the messages it was sent; the client is httpx speaking Ollama's protocol.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from lightrag_ray.core.context import ENTITY_HEADER
from lightrag_ray.core.tokenizer import count_tokens
from tests.scripted_llm import ANSWER_PREFIX
from tests.serve_helpers import API_KEY, MAX_BODY_MB
from tests.served.chat_apis.test_openai import last_answer_call, tokens

QUESTION = "Where does Dora Quinn sail from?"
MODEL = "lightrag:latest"


def ask(text: str, *history: dict[str, str]) -> list[dict[str, str]]:
    return [*history, {"role": "user", "content": text}]


def ollama_lines(http: httpx.Client, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of a streamed Ollama answer, one per NDJSON line."""
    with http.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("application/x-ndjson")
        return [json.loads(line) for line in response.iter_lines() if line.strip()]


def chat(http: httpx.Client, messages: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
    """A chat answered whole (``stream: false``)."""
    response = http.post("/api/chat", json={"model": MODEL, "messages": messages, "stream": False, **extra})
    assert response.status_code == 200, response.text
    return response.json()


def context_of(http: httpx.Client, question: str, mode: str) -> str:
    """The context /query retrieves for ``question`` in ``mode``."""
    response = http.post("/query", json={"query": question, "mode": mode, "only_need_context": True})
    assert response.status_code == 200, response.text
    return response.json()["response"]


def assert_done(last: dict[str, Any], messages: list[dict[str, Any]], answer: str) -> None:
    """Ollama's last object: done, the counts of the answer call (the usage the scripted LLM
    reports: words), durations that add up."""
    assert last["done"] is True and last["done_reason"] == "stop" and last["model"] == MODEL
    assert last["prompt_eval_count"] == sum(len(str(m["content"]).split()) for m in messages)
    assert last["eval_count"] == len(answer.split()) > 0
    assert last["load_duration"] == 0 and last["prompt_eval_duration"] > 0 and last["eval_duration"] > 0
    assert last["total_duration"] == last["prompt_eval_duration"] + last["eval_duration"]


# ---- model listing ------------------------------------------------------------------------------

def test_version_tags_and_ps_announce_one_model(client):
    assert client.get("/api/version").json() == {"version": "0.9.3"}
    [model] = client.get("/api/tags").json()["models"]
    assert model["name"] == model["model"] == MODEL
    assert set(model) == {"name", "model", "modified_at", "size", "digest", "details"}
    assert len(model["digest"]) == 64 and model["details"]["family"] == "lightrag"
    [running] = client.get("/api/ps").json()["models"]
    assert running["name"] == MODEL and {"expires_at", "size_vram"} <= set(running)


# ---- chat ---------------------------------------------------------------------------------------

def test_chat_whole_answers_from_the_graph_with_counts(client, llm, indexed):
    reply = chat(client, ask(QUESTION))
    answer = reply["message"]["content"]
    assert reply["message"]["role"] == "assistant" and answer == f"{ANSWER_PREFIX} {QUESTION}"
    sent = last_answer_call(llm)
    assert sent[-1] == {"role": "user", "content": QUESTION}
    assert_done(reply, sent, answer)
    assert tokens(sent) > 100  # the prompt holds the retrieved context


def test_chat_reranks_its_passages(client, reranker, indexed):
    chat(client, ask(f"/naive {QUESTION}"))
    assert reranker.requests == 1 and reranker.bodies[0]["query"] == QUESTION


def test_chat_streams_ndjson_by_default(client, llm, indexed):
    *pieces, last = ollama_lines(client, "/api/chat", {"model": MODEL, "messages": ask(QUESTION)})
    assert len(pieces) > 1 and all(p["done"] is False and p["message"]["role"] == "assistant" for p in pieces)
    answer = "".join(p["message"]["content"] for p in pieces)
    assert answer == f"{ANSWER_PREFIX} {QUESTION}"
    assert last["message"] == {"role": "assistant", "content": ""}
    assert_done(last, last_answer_call(llm), answer)


def test_mode_prefix_selects_the_mode_and_is_stripped(client, llm, indexed):
    local, walk = context_of(client, QUESTION, "local"), context_of(client, QUESTION, "walk")
    assert local != walk and ENTITY_HEADER in local and ENTITY_HEADER in walk  # walk describes its entities too
    chat(client, ask(f"/local {QUESTION}"))
    system, question = last_answer_call(llm)
    assert question == {"role": "user", "content": QUESTION}
    assert system["content"].endswith(f"Knowledge base context:\n{local}")
    chat(client, ask(QUESTION))  # no prefix: the default mode (walk)
    assert last_answer_call(llm)[0]["content"].endswith(f"Knowledge base context:\n{walk}")


def test_history_system_messages_and_bracket_instructions(client, llm, indexed):
    turns = [{"role": "user", "content": "Who is Dora Quinn?"}, {"role": "assistant", "content": "A biologist."}]
    messages = ask(f"/local[Answer in a table.] {QUESTION}", {"role": "system", "content": "Be brief."}, *turns)
    chat(client, messages, system="Answer like a pirate.", keep_alive="5m", options={"temperature": 0})
    sent = last_answer_call(llm)
    assert sent[1:] == [*turns, {"role": "user", "content": QUESTION}]
    assert ("Instructions from the application:\nBe brief.\n\nAnswer like a pirate.\n\nAnswer in a table.\n\n"
            "Knowledge base context:\n") in sent[0]["content"]


@pytest.mark.parametrize("text, sent", [
    (f"/bypass {QUESTION}", QUESTION),
    ("### Task:\nA title.\n<chat_history>\nUSER: Hi\n</chat_history>", None),  # Open WebUI's own task
])
def test_bypass_sends_the_chat_to_the_llm_without_retrieval(client, llm, indexed, text, sent):
    turn = {"role": "assistant", "content": "Hello."}
    reply = chat(client, ask(text, turn))
    question = sent or text
    assert last_answer_call(llm) == [turn, {"role": "user", "content": question}]  # no context, no system prompt
    assert reply["message"]["content"] == f"{ANSWER_PREFIX} {question}"
    assert "keywords" not in llm.counts()  # no retrieval started


def test_context_prefix_answers_with_the_context_alone(client, llm, indexed):
    local = context_of(client, QUESTION, "local")
    reply = chat(client, ask(f"/localcontext {QUESTION}"))
    assert reply["message"]["content"] == local and reply["eval_count"] == count_tokens(local)
    assert reply["prompt_eval_count"] == 0 and "answer" not in llm.counts()
    *pieces, last = ollama_lines(client, "/api/chat", {"model": MODEL, "messages": ask(f"/localcontext {QUESTION}")})
    assert [p["message"]["content"] for p in pieces] == [local] and last["done"] is True


# ---- generate -----------------------------------------------------------------------------------

def test_generate_asks_the_llm_alone(client, llm, indexed):
    body = {"model": MODEL, "prompt": "Write a title for: sailing.", "system": "Five words at most."}
    reply = client.post("/api/generate", json={**body, "stream": False}).json()
    expected = [{"role": "system", "content": body["system"]}, {"role": "user", "content": body["prompt"]}]
    assert last_answer_call(llm) == expected and "keywords" not in llm.counts()
    assert reply["response"] == f"{ANSWER_PREFIX} {body['prompt']}"
    assert_done(reply, expected, reply["response"])
    *pieces, last = ollama_lines(client, "/api/generate", body)
    answer = "".join(p["response"] for p in pieces)
    assert len(pieces) > 1 and answer == reply["response"]
    assert last["response"] == "" and "message" not in last
    assert_done(last, expected, answer)


# ---- errors -------------------------------------------------------------------------------------

def test_bad_bodies_are_400_with_ollamas_error(client):
    cases = [
        ("/api/chat", {"model": MODEL, "messages": []},
         "invalid request body: messages: List should have at least 1 item after validation, not 0"),
        ("/api/chat", {"model": MODEL}, "invalid request body: messages: Field required"),
        ("/api/chat", {"messages": ask("/local ")}, "the last user message has no question after its prefix"),
        ("/api/chat", {"messages": [{"role": "system", "content": "Hi"}]}, "messages hold no user message to answer"),
        ("/api/generate", {"model": MODEL, "prompt": ""}, "invalid request body: prompt: String should have at least 1 character"),
    ]
    for path, body, message in cases:
        response = client.post(path, json=body)
        assert (response.status_code, response.json()) == (400, {"error": message})
    unknown = client.post("/api/pull", json={"model": MODEL})
    assert (unknown.status_code, unknown.json()) == (404, {"error": "Not Found"})
    openai = client.post("/v1/chat/completions", json={"model": "lightrag-local", "messages": []})  # /v1 keeps its shape
    assert openai.status_code == 400 and openai.json()["error"]["type"] == "invalid_request_error"
    lightrag = client.post("/query/data", json={"query": "who?", "mode": "deep"})  # and LightRAG's routes theirs
    assert lightrag.status_code == 422 and lightrag.json()["detail"][0]["type"] == "literal_error"


def test_missing_key_and_oversized_body_have_ollamas_error(app):
    response = httpx.get(f"{app[0]}/api/tags", timeout=30)
    assert response.status_code == 403 and response.json()["error"].startswith("API Key required")  # as LightRAG's /api
    bearer = httpx.get(f"{app[0]}/api/tags", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30)
    assert bearer.status_code == 200  # what Open WebUI sends for a connection's key
    big = httpx.post(f"{app[0]}/api/generate", headers={"X-API-Key": API_KEY}, timeout=30,
                     json={"prompt": "word " * int(MAX_BODY_MB * 1024 * 1024 / 4)})
    assert big.status_code == 413 and big.json()["error"].startswith("request body over the limit")


def test_llm_failure_is_502_or_an_error_line(client, llm, indexed):
    llm.add_rule(kind="answer", action="500", times=10)
    response = client.post("/api/chat", json={"model": MODEL, "messages": ask(QUESTION), "stream": False})
    assert response.status_code == 502 and response.json()["error"].startswith("the LLM failed: ")
    lines = ollama_lines(client, "/api/chat", {"model": MODEL, "messages": ask(QUESTION)})
    assert len(lines) == 1 and lines[0]["error"].startswith("the LLM failed: ")
