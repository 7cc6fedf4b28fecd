"""The OpenAI-compatible API as the ``openai`` package sees it (issue 14): usage of the keyword
and answer calls as the LLM server reported it, or estimated (also as the last stream chunk), models list and retrieve, OpenAI-shaped errors whose message the client
shows, system messages in the answer prompt, null and list-of-parts content.

Real HTTP against the package's Serve app (conftest.py) and the scripted LLM, which
records the messages it was sent.
"""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from lightrag_ray.core.tokenizer import count_tokens
from tests.scripted_llm import ANSWER_PREFIX, ScriptedLLM, answer_for
from tests.serve_helpers import API_KEY

QUESTION = [{"role": "user", "content": "Where does Dora Quinn sail from?"}]
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


@pytest.fixture(scope="module")
def openai_client(app):
    """The ``openai`` client on the app's /v1, without retries (errors surface at once)."""
    with openai.OpenAI(base_url=f"{app[0]}/v1", api_key=API_KEY, max_retries=0) as c:
        yield c


def last_answer_call(llm: ScriptedLLM, kind: str = "answer") -> list[dict[str, Any]]:
    """The messages of the last answer call (or call of ``kind``) the scripted LLM received."""
    return [messages for seen, messages in llm.requests if seen == kind][-1]


def tokens(messages: list[dict[str, Any]]) -> int:
    return sum(count_tokens(m["content"]) for m in messages)


def keyword_call_tokens(llm: ScriptedLLM) -> tuple[int, int]:
    """Prompt and completion tokens of the last keyword-extraction call (its answer is scripted)."""
    messages = last_answer_call(llm, "keywords")
    return tokens(messages), count_tokens(answer_for("keywords", messages))


# ---- usage ----------------------------------------------------------------------------------

def sent_since(llm: ScriptedLLM, before: tuple[int, int]) -> tuple[int, int]:
    """(prompt, completion) tokens the keyword and answer calls reported since ``before``."""
    prompt, completion = llm.sent_tokens("keywords", "answer")
    return prompt - before[0], completion - before[1]


def test_completion_usage_is_the_llm_servers_for_the_keyword_and_answer_calls(openai_client, llm, indexed):
    before = llm.sent_tokens("keywords", "answer")
    completion = openai_client.chat.completions.create(model="lightrag-local", messages=QUESTION)
    usage = completion.usage
    assert (usage.prompt_tokens, usage.completion_tokens) == sent_since(llm, before) and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert set(usage.model_dump(exclude_none=True)) == {"prompt_tokens", "completion_tokens", "total_tokens"}


def test_completion_usage_is_estimated_when_the_llm_server_reports_none(openai_client, llm, indexed):
    llm.usage = False
    calls = len(llm.requests)
    completion = openai_client.chat.completions.create(model="lightrag-local", messages=QUESTION)
    answer = completion.choices[0].message.content
    assert answer.startswith(ANSWER_PREFIX)
    assert [kind for kind, _ in llm.requests[calls:]] == ["keywords", "answer"]
    keyword_prompt, keyword_completion = keyword_call_tokens(llm)
    usage = completion.usage
    assert tokens(last_answer_call(llm)) > 100  # the answer prompt holds the context
    assert usage.prompt_tokens == keyword_prompt + tokens(last_answer_call(llm)) and keyword_prompt > 0
    assert usage.completion_tokens == keyword_completion + count_tokens(answer) and keyword_completion > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_stream_ends_with_a_usage_chunk_when_asked(openai_client, llm, indexed):
    before = llm.sent_tokens("keywords", "answer")
    chunks = list(openai_client.chat.completions.create(
        model="lightrag-local", messages=QUESTION, stream=True, stream_options={"include_usage": True}))
    *pieces, last = chunks
    answer = "".join(c.choices[0].delta.content or "" for c in pieces)
    assert answer.startswith(ANSWER_PREFIX) and pieces[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in pieces)
    assert last.choices == [] and last.id == pieces[0].id
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == sent_since(llm, before)
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    plain = list(openai_client.chat.completions.create(model="lightrag-local", messages=QUESTION, stream=True))
    assert all(c.choices and c.usage is None for c in plain)


# ---- models -----------------------------------------------------------------------------------

def test_chat_answers_rerank_their_passages(openai_client, reranker, indexed):
    openai_client.chat.completions.create(model="lightrag-naive", messages=QUESTION)
    assert reranker.requests == 1 and reranker.bodies[0]["query"] == QUESTION[0]["content"]


def test_models_list_and_retrieve(openai_client):
    ids = [m.id for m in openai_client.models.list()]
    assert ids == ["lightrag-mix", "lightrag-local", "lightrag-global", "lightrag-hybrid", "lightrag-naive",
                   "lightrag-walk", "lightrag-bypass"]
    model = openai_client.models.retrieve("lightrag-local")
    assert (model.id, model.object, model.owned_by) == ("lightrag-local", "model", "lightrag-ray")
    assert openai_client.models.retrieve("lightrag").id == "lightrag"  # the default mode's alias
    with pytest.raises(openai.NotFoundError) as caught:
        openai_client.models.retrieve("gpt-4o")
    assert "the model 'gpt-4o' does not exist; use one of lightrag-mix" in str(caught.value)
    assert (caught.value.code, caught.value.param, caught.value.type) == ("model_not_found", "model",
                                                                          "invalid_request_error")


# ---- errors -----------------------------------------------------------------------------------

def test_unknown_chat_model_is_404_with_the_servers_message(openai_client):
    with pytest.raises(openai.NotFoundError) as caught:
        openai_client.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert "the model 'gpt-4o' does not exist" in str(caught.value) and caught.value.code == "model_not_found"


def test_invalid_bodies_are_openai_400_on_v1_only(openai_client, client):
    with pytest.raises(openai.BadRequestError) as caught:
        openai_client.chat.completions.create(model="lightrag-local", messages=[])
    assert "invalid request body: messages: List should have at least 1 item" in str(caught.value)
    assert caught.value.param == "messages"
    missing = client.post("/v1/chat/completions", json={"model": "lightrag-local"})
    assert missing.status_code == 400
    assert missing.json() == {"error": {"message": "invalid request body: messages: Field required",
                                        "type": "invalid_request_error", "param": "messages",
                                        "code": "missing_required_parameter"}}
    malformed = client.post("/v1/chat/completions", content=b'{"model": ', headers={"Content-Type": "application/json"})
    assert malformed.status_code == 400 and malformed.json()["error"]["message"].startswith("invalid request body")
    unknown_route = client.post("/v1/embeddings", json={"input": "x"})
    assert unknown_route.status_code == 404 and unknown_route.json()["error"]["message"] == "Not Found"
    lightrag = client.post("/query/data", json={"query": "who?", "mode": "deep"})  # LightRAG's shape stays
    assert lightrag.status_code == 422 and lightrag.json()["detail"][0]["type"] == "literal_error"


def test_missing_or_wrong_key_is_openai_401_on_v1_only(app):
    wrong = openai.OpenAI(base_url=f"{app[0]}/v1", api_key="wrong", max_retries=0)
    with wrong, pytest.raises(openai.AuthenticationError) as caught:
        wrong.models.list()
    assert "Invalid API Key" in str(caught.value) and caught.value.code == "invalid_api_key"
    lightrag = httpx.get(f"{app[0]}/graph/label/list", timeout=30)
    assert lightrag.status_code == 403 and lightrag.json()["detail"].startswith("API Key required")


def test_llm_failure_is_a_server_error_and_a_stream_error(openai_client, llm, indexed):
    llm.add_rule(kind="answer", action="500", times=10)
    with pytest.raises(openai.InternalServerError) as caught:
        openai_client.chat.completions.create(model="lightrag-local", messages=QUESTION)
    assert caught.value.status_code == 502 and "the LLM failed: " in str(caught.value)
    assert caught.value.type == "server_error"
    with pytest.raises(openai.APIError, match="the LLM failed: "):
        list(openai_client.chat.completions.create(model="lightrag-local", messages=QUESTION, stream=True))


# ---- messages ---------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["lightrag-local", "lightrag-bypass"])
def test_system_messages_reach_the_answer_prompt(openai_client, llm, indexed, model):
    turns = [{"role": "user", "content": "Who is Bob?"}, {"role": "assistant", "content": "A novelist."},
             {"role": "user", "content": "Where does Bob Jones live?"}]
    messages = [{"role": "system", "content": "Answer like a pirate."}, *turns[:2],
                {"role": "developer", "content": "Keep it short."}, turns[2]]
    openai_client.chat.completions.create(model=model, messages=messages)
    sent = last_answer_call(llm)
    assert sent[0]["role"] == "system" and sent[1:] == turns
    if model == "lightrag-bypass":
        assert sent[0]["content"] == "Answer like a pirate.\n\nKeep it short."
    else:  # after the answer rules, before the retrieved context
        assert "\nAnswer like a pirate.\n\nKeep it short.\n\nKnowledge base context:\n" in sent[0]["content"]


def test_null_content_and_content_parts(openai_client, llm, indexed):
    completion = openai_client.chat.completions.create(model="lightrag-local", messages=[
        {"role": "system", "content": None},
        {"role": "user", "content": [{"type": "text", "text": "Who is Dora Quinn?"}]},
        {"role": "assistant", "content": None},
        {"role": "user", "content": [{"type": "text", "text": "Where does"}, IMAGE,
                                     {"type": "text", "text": "Dora Quinn sail from?"}]},
    ])
    assert completion.choices[0].message.content.startswith(ANSWER_PREFIX)
    sent = last_answer_call(llm)
    assert sent[1:] == [{"role": "user", "content": "Who is Dora Quinn?"},
                        {"role": "user", "content": "Where does\nDora Quinn sail from?"}]
    assert "Instructions from the application" not in sent[0]["content"]
    for content in (None, [IMAGE]):
        with pytest.raises(openai.BadRequestError) as caught:
            openai_client.chat.completions.create(model="lightrag-local", messages=[{"role": "user", "content": content}])
        assert "the last user message has no text to answer" in str(caught.value)
        assert caught.value.param == "messages"
