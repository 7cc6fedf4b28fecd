"""OpenAICompatibleClient against the scripted LLM server over real HTTP (no mocks)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from lightrag_ray.config import LLMConfig
from lightrag_ray.core.prompts import (
    COMPLETE,
    FIELD_SEP,
    extraction_messages,
    gleaning_messages,
    summary_messages,
)
from lightrag_ray.models.llm import LLMClient, LLMError
from lightrag_ray.models.llm_clients import make_llm_client
from lightrag_ray.models.openai_http import OpenAICompatibleClient
from tests.scripted_llm import ScriptedLLM, derive_records, extraction_answer

pytestmark = pytest.mark.timeout(60)

PASSAGE = (
    "Marie Curie worked in Paris with Pierre Curie. The Sorbonne hired Marie Curie in 1906.\n"
    "In Warsaw she had studied at the Flying University!"
)


@pytest.fixture
def server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as llm:
        yield llm


def _client(server: ScriptedLLM, **overrides: Any) -> OpenAICompatibleClient:
    fields: dict[str, Any] = {"backend": "openai", "base_url": server.url, "backoff_s": 0.01, "timeout_s": 5.0}
    fields.update(overrides)
    return OpenAICompatibleClient(LLMConfig(**fields))


def _messages() -> list[dict[str, str]]:
    return extraction_messages(PASSAGE, ["person", "location"], "English")


async def _complete(client: OpenAICompatibleClient, messages: list[dict[str, str]]) -> str:
    try:
        return await client.complete(messages)
    finally:
        await client.aclose()


def test_derive_records() -> None:
    entities, relations = derive_records(PASSAGE)
    names = [e["name"] for e in entities]
    assert names == ["Marie Curie", "Paris", "Pierre Curie", "Sorbonne", "Warsaw", "Flying University"]
    assert entities[3]["description"] == 'Sorbonne appears in: "The Sorbonne hired Marie Curie in 1906."'
    pairs = {(r["source"], r["target"]) for r in relations}
    assert pairs == {
        ("Marie Curie", "Paris"), ("Marie Curie", "Pierre Curie"), ("Paris", "Pierre Curie"),
        ("Sorbonne", "Marie Curie"), ("Warsaw", "Flying University"),
    }


def test_complete_extraction(server: ScriptedLLM) -> None:
    client = _client(server)
    assert isinstance(client, LLMClient)
    answer = asyncio.run(_complete(client, _messages()))
    assert answer == extraction_answer(PASSAGE)
    assert answer.endswith(COMPLETE)
    assert f"entity{FIELD_SEP}Marie Curie{FIELD_SEP}concept{FIELD_SEP}" in answer
    assert server.counts() == {"extract": 1}
    assert client.stats == {"requests": 1, "retries": 0, "failures": 0}


def test_request_kinds(server: ScriptedLLM) -> None:
    async def run() -> list[str]:
        client = _client(server)
        try:
            glean = await client.complete(gleaning_messages(_messages(), "previous answer"))
            summary = await client.complete(summary_messages("entity", "X", ["one", "two"], "English", 100))
            keywords = await client.complete([{"role": "user", "content": "## Query keywords\nWho hired Marie Curie?"}])
            answer = await client.complete([{"role": "user", "content": "Who hired Marie Curie?"}])
            return [glean, summary, keywords, answer]
        finally:
            await client.aclose()

    glean, summary, keywords, answer = asyncio.run(run())
    assert glean == COMPLETE
    assert summary == "Summary of 2 descriptions: one two"
    assert json.loads(keywords) == {"high_level_keywords": ["keywords", "hired"], "low_level_keywords": ["Query", "Marie Curie"]}
    assert answer.startswith("Answer based on the context [1].")
    assert server.counts() == {"glean": 1, "summary": 1, "keywords": 1, "answer": 1}


def test_stream_joins_to_full_answer(server: ScriptedLLM) -> None:
    async def run() -> list[str]:
        client = _client(server)
        try:
            return [piece async for piece in client.stream(_messages())]
        finally:
            await client.aclose()

    pieces = asyncio.run(run())
    assert len(pieces) > 1
    assert "".join(pieces) == extraction_answer(PASSAGE)


def test_retries_on_429(server: ScriptedLLM) -> None:
    server.add_rule(kind="extract", action="429", times=2)
    client = _client(server)
    assert asyncio.run(_complete(client, _messages())) == extraction_answer(PASSAGE)
    assert client.stats == {"requests": 1, "retries": 2, "failures": 0}
    assert server.counts() == {"extract": 3} and server.injected == 2


def test_retries_on_500(server: ScriptedLLM) -> None:
    server.add_rule(kind="extract", contains="Sorbonne", action="500", times=1)
    client = _client(server)
    assert asyncio.run(_complete(client, _messages())) == extraction_answer(PASSAGE)
    assert client.stats["retries"] == 1


def test_retries_on_timeout(server: ScriptedLLM) -> None:
    server.timeout_sleep_s = 2.0
    server.add_rule(kind="extract", action="timeout", times=1)
    client = _client(server, timeout_s=0.5)
    start = time.monotonic()
    assert asyncio.run(_complete(client, _messages())) == extraction_answer(PASSAGE)
    assert 0.5 <= time.monotonic() - start < 2.0
    assert client.stats["retries"] == 1


def test_permanent_429_gives_llm_error(server: ScriptedLLM) -> None:
    server.add_rule(kind=None, action="429", times=1000)
    client = _client(server, max_retries=1)
    with pytest.raises(LLMError, match=r"failed after 2 attempts: HTTP 429: rate limited"):
        asyncio.run(_complete(client, _messages()))
    assert client.stats == {"requests": 1, "retries": 1, "failures": 1}


def test_4xx_is_not_retried(server: ScriptedLLM) -> None:
    client = OpenAICompatibleClient(LLMConfig(backend="openai", base_url=server.url + "/nope", backoff_s=0.01))
    with pytest.raises(LLMError, match=r"HTTP 404: no route"):
        asyncio.run(_complete(client, _messages()))
    assert client.stats == {"requests": 1, "retries": 0, "failures": 1}


def test_connection_refused_gives_llm_error() -> None:
    with ScriptedLLM() as gone:
        url = gone.url
    client = OpenAICompatibleClient(LLMConfig(backend="openai", base_url=url, backoff_s=0.01, max_retries=2))
    with pytest.raises(LLMError, match=r"failed after 3 attempts: connection error"):
        asyncio.run(_complete(client, _messages()))


def test_empty_choices_gives_llm_error(server: ScriptedLLM) -> None:
    server.add_rule(kind="extract", action="empty", times=2)
    client = _client(server)
    with pytest.raises(LLMError, match="no choices"):
        asyncio.run(_complete(client, _messages()))

    async def run() -> list[str]:
        stream_client = _client(server)
        try:
            return [piece async for piece in stream_client.stream(_messages())]
        finally:
            await stream_client.aclose()

    with pytest.raises(LLMError, match="without content"):
        asyncio.run(run())


def test_malformed_answer_is_returned_as_text(server: ScriptedLLM) -> None:
    server.add_rule(kind="extract", action="malformed", times=1)
    answer = asyncio.run(_complete(_client(server), _messages()))
    assert FIELD_SEP not in answer and COMPLETE not in answer


def test_concurrency_is_bounded(server: ScriptedLLM) -> None:
    server.latency_s = 0.2
    client = _client(server, max_concurrency=4)

    async def run() -> list[str]:
        try:
            return await asyncio.gather(*(client.complete(_messages()) for _ in range(20)))
        finally:
            await client.aclose()

    start = time.monotonic()
    answers = asyncio.run(run())
    elapsed = time.monotonic() - start
    assert len(answers) == 20 and set(answers) == {extraction_answer(PASSAGE)}
    assert 0.95 <= elapsed < 3.0
    assert server.max_in_flight == 4
    assert client.stats == {"requests": 20, "retries": 0, "failures": 0}


def test_make_llm_client() -> None:
    assert isinstance(make_llm_client(LLMConfig(backend="openai")), OpenAICompatibleClient)
    # openai-batch batches indexing through ray.data.llm; queries use the same server's client
    assert isinstance(make_llm_client(LLMConfig(backend="openai-batch")), OpenAICompatibleClient)
    with pytest.raises(ValueError, match="ray.data.llm"):
        make_llm_client(LLMConfig(backend="vllm"))
    with pytest.raises(ValueError, match="no LLM configured"):
        make_llm_client(LLMConfig(backend="none"))
