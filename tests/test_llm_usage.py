"""Token usage of LLM calls (issue 43): what the server reported, per call however many run at
once, unknown (never 0) when it reported none; LLM request metrics by outcome; indexing reports'
token totals and cost; answers' usage, whole and streamed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from lightrag_ray.cli.main import _index_summary, _print
from lightrag_ray.config import TokenPrice, load_settings
from lightrag_ray.models.openai_http import OpenAICompatibleClient
from lightrag_ray.models.usage import LLMCall, TokenUsage
from lightrag_ray.query.engine import QueryParam
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.service.session import LocalSession
from lightrag_ray.service.status import workspace_status
from tests.test_query import CORPUS

QUESTION = "What did Maria Lopez discover?"


def test_token_usage_adds_up_and_is_unknown_when_a_call_had_none():
    metered, unmetered = TokenUsage.reported({"prompt_tokens": 7, "completion_tokens": 3}), TokenUsage.reported(None)
    assert metered == TokenUsage(7, 3, calls=1) and metered.known
    assert unmetered == TokenUsage(calls=1, unmetered=1) and not unmetered.known
    both = metered + unmetered
    assert (both.prompt, both.completion, both.calls, both.known) == (7, 3, 2, False)
    price = TokenPrice(prompt=2.0, completion=10.0)
    assert metered.cost(price) == pytest.approx((7 * 2.0 + 3 * 10.0) / 1e6)
    assert both.cost(price) is None and metered.cost(None) is None
    assert TokenUsage.of_row(metered.counts()) == TokenUsage(7, 3)


def _words(messages: list[dict[str, Any]]) -> int:
    return sum(len(m["content"].split()) for m in messages)


def test_client_usage_per_call_streams_and_outcomes(llm, recorded):
    config = load_settings(environ={}, overrides={"llm": {
        "backend": "openai", "base_url": llm.url, "timeout_s": 5, "backoff_s": 0.01, "max_retries": 1}}).llm
    client = OpenAICompatibleClient(config)
    questions = [[{"role": "user", "content": "Who hired Marie Curie " + "really " * n + "?"}] for n in range(5)]

    async def run() -> tuple[list[LLMCall], LLMCall, str, LLMCall]:
        calls = [LLMCall("answer", "ws") for _ in questions]
        await asyncio.gather(*(client.complete(q, call=c) for q, c in zip(questions, calls)))
        streamed = LLMCall("answer", "ws")
        text = "".join([piece async for piece in client.stream(questions[0], call=streamed)])
        llm.add_rule("answer", action="429")
        retried = LLMCall("answer", "ws")
        await client.complete(questions[0], call=retried)
        llm.add_rule("answer", action="429", times=2)
        with pytest.raises(Exception):
            await client.complete(questions[0], call=LLMCall("answer", "ws"))
        llm.usage = False
        unmetered = LLMCall("answer", "ws")
        await client.complete(questions[0], call=unmetered)
        await client.aclose()
        return calls, streamed, text, unmetered

    calls, streamed, text, unmetered = asyncio.run(run())
    assert [c.usage.prompt for c in calls] == [_words(q) for q in questions]  # each call its own, concurrently
    assert all(c.usage.known and c.usage.completion > 0 and c.usage.calls == 1 for c in calls)
    assert streamed.usage == TokenUsage(_words(questions[0]), len(text.split()), calls=1)  # the stream's last chunk
    assert unmetered.usage == TokenUsage(calls=1, unmetered=1)
    outcomes = [tags["outcome"] for name, _, tags in recorded if name == "llm_requests"]
    assert outcomes == ["ok"] * 6 + ["retried", "429", "ok"]
    assert ("llm_unmetered_requests", 1, {"workspace": "ws", "kind": "answer"}) in recorded
    prompt = sum(value for name, value, tags in recorded if name == "llm_tokens" and tags["type"] == "prompt")
    assert prompt == sum(c.usage.prompt for c in calls) + 2 * _words(questions[0])


def _corpus(root: Path) -> Path:
    corpus = root / "corpus"
    corpus.mkdir()
    for name, text in list(CORPUS.items())[:2]:
        (corpus / name).write_text(text, encoding="utf-8")
    return corpus


def test_index_report_tokens_are_the_servers_and_cost_follows_the_price_and_status_sums_the_runs(
        ray_cluster, llm, make_settings, tmp_path, capsys):
    corpus = _corpus(tmp_path)
    settings = make_settings("priced", metrics={"prices": {"scripted": {"prompt": 1.0, "completion": 4.0}}},
                             llm={"model": "scripted"})
    report = index_paths([str(corpus)], settings, progress=None)
    prompt, completion = llm.sent_tokens()
    assert report.chunks_extracted == 2 and report.llm_requests == sum(llm.counts().values()) - llm.counts().get("summary", 0)
    assert (report.llm_prompt_tokens, report.llm_completion_tokens, report.llm_unmetered_requests) == (
        prompt, completion, 0) and completion > 0
    assert report.llm_cost == pytest.approx((prompt * 1.0 + completion * 4.0) / 1e6)
    assert f"LLM tokens: {prompt} prompt, {completion} completion, estimated cost" in "\n".join(
        _index_summary(report.to_dict()))
    # status: the last run's tokens and every run's, summed
    (corpus / "more.txt").write_text(list(CORPUS.values())[2], encoding="utf-8")
    llm.reset()
    second = index_paths([str(corpus)], settings, progress=None)
    assert second.docs_new == 1 and second.llm_prompt_tokens == llm.sent_tokens()[0] > 0
    shown = workspace_status(settings.workspace)["last_sync"]
    assert shown["llm"] == {"llm_prompt_tokens": second.llm_prompt_tokens, "llm_completion_tokens":
                            second.llm_completion_tokens, "llm_unmetered_requests": 0, "llm_cost": second.llm_cost}
    total = shown["llm_total"]
    assert (total["llm_prompt_tokens"], total["llm_completion_tokens"]) == (
        report.llm_prompt_tokens + second.llm_prompt_tokens, report.llm_completion_tokens + second.llm_completion_tokens)
    assert total["llm_cost"] == pytest.approx(report.llm_cost + second.llm_cost)
    _print({"last_sync": shown}, as_json=False)
    assert (f"LLM tokens: last run {second.llm_prompt_tokens} prompt, {second.llm_completion_tokens} completion, "
            f"estimated cost {second.llm_cost:.4g}; all runs {total['llm_prompt_tokens']} prompt") in capsys.readouterr().out


def test_unknown_index_tokens_then_answers_report_the_servers_usage_whole_and_streamed(
        ray_cluster, llm, make_settings, tmp_path):
    settings = make_settings("answers", metrics={"prices": {"default": {"prompt": 1.0}}})
    llm.usage = False
    unmetered = index_paths([str(_corpus(tmp_path))], settings, progress=None)
    assert unmetered.llm_unmetered_requests == unmetered.llm_requests > 0 and unmetered.llm_cost is None
    assert "LLM tokens: unknown" in "\n".join(_index_summary(unmetered.to_dict()))
    llm.usage = True
    with LocalSession(settings) as session:
        llm.reset()
        result = session.query(QUESTION)
        assert (result.usage.prompt_tokens, result.usage.completion_tokens) == llm.sent_tokens("keywords", "answer")
        assert not result.usage.estimated and result.to_dict()["usage"]["total_tokens"] == result.usage.total_tokens

        async def streamed(param: QueryParam) -> tuple[str, Any]:
            answer = session.engine.stream(QUESTION, param)
            text = "".join([piece async for piece in answer])
            return text, answer.usage(text)

        llm.reset()
        text, usage = session.run(streamed(QueryParam()))
        assert text and (usage.prompt_tokens, usage.completion_tokens) == llm.sent_tokens() and not usage.estimated
        llm.usage = False
        _, guessed = session.run(streamed(QueryParam()))
        assert guessed.estimated and guessed.prompt_tokens > 0 and guessed.completion_tokens > 0
