"""LLM client for any OpenAI-compatible chat-completions server (vLLM, llama.cpp, OpenAI, ...)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx

from lightrag_ray.config import LLMConfig
from lightrag_ray.models.llm import LLMError, Messages
from lightrag_ray.models.model_http import LoopClient, RetryingSender
from lightrag_ray.models.usage import LLMCall, Metering, TokenUsage, metered


def chat_payload(config: LLMConfig, messages: Messages, *, max_tokens: int | None = None,
                 stream: bool = False) -> dict[str, Any]:
    """The JSON body of a ``/chat/completions`` request (a stream asks for its usage in a last chunk)."""
    return {
        "model": config.model,
        "messages": messages,
        "temperature": config.temperature,
        "max_tokens": max_tokens or config.max_tokens,
        "stream": stream,
        **({"stream_options": {"include_usage": True}} if stream else {}),
    }


def completion_text(body: Any) -> str:
    """The answer in a chat-completion body; LLMError naming what is missing otherwise."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices:
        raise LLMError(f"LLM answer has no choices: {str(body)[:200]}")
    content = (choices[0].get("message") or {}).get("content")
    if not isinstance(content, str):
        raise LLMError(f"LLM answer has no content: {str(choices[0])[:200]}")
    return content


class OpenAICompatibleClient:
    """POSTs to ``{base_url}/chat/completions`` with retries, backoff and bounded concurrency.

    ``stats`` counts calls (``requests``), repeated attempts (``retries``) and calls that
    ended in LLMError (``failures``).
    """

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self._sender = RetryingSender(self.url, config, "LLM", LLMError)
        self.stats = self._sender.stats
        self._http = LoopClient(config.timeout_s, config.api_key, httpx.Limits(
            max_connections=max(100, config.max_concurrency),
            max_keepalive_connections=max(20, config.max_concurrency)))
        self._semaphore = asyncio.Semaphore(config.max_concurrency)

    def _client(self) -> httpx.AsyncClient:
        """The HTTP client of the running event loop (and a new semaphore if the loop changed)."""
        if self._http.loop not in (None, asyncio.get_running_loop()):
            self._semaphore = asyncio.Semaphore(self.config.max_concurrency)
        return self._http.get()

    async def complete(self, messages: Messages, *, max_tokens: int | None = None,
                       call: LLMCall | None = None) -> str:
        """The whole answer; raises LLMError when it cannot be had."""
        client = self._client()
        payload = chat_payload(self.config, messages, max_tokens=max_tokens)
        with metered(call) as meter:
            async with self._semaphore:
                response = await self._sender.send(
                    lambda: asyncio.wait_for(client.post(self.url, json=payload), self.config.timeout_s), meter
                )
            try:
                body = response.json()
            except ValueError as exc:
                raise self._sender.fail(f"LLM answer is not JSON: {response.text[:200]!r}") from exc
            try:
                text = completion_text(body)
            except LLMError as exc:
                raise self._sender.fail(str(exc)) from None
            meter.usage = TokenUsage.reported(body.get("usage"))
            return text

    async def stream(self, messages: Messages, *, max_tokens: int | None = None,
                     call: LLMCall | None = None) -> AsyncIterator[str]:
        """The answer piece by piece, from the server's SSE stream; its usage from the last chunk
        that carries one (``stream_options.include_usage``)."""
        client = self._client()
        payload = chat_payload(self.config, messages, max_tokens=max_tokens, stream=True)
        with metered(call) as meter:
            async with contextlib.aclosing(self._stream(client, payload, meter)) as pieces:
                async for piece in pieces:
                    yield piece

    async def _stream(self, client: httpx.AsyncClient, payload: dict[str, Any],
                      meter: Metering) -> AsyncGenerator[str, None]:
        async with self._semaphore:
            response = await self._sender.send(
                lambda: client.send(client.build_request("POST", self.url, json=payload), stream=True), meter
            )
            got_any = False
            try:
                async for line in response.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError as exc:
                        raise self._sender.fail(f"LLM stream sent a bad chunk: {data[:200]!r}") from exc
                    if "error" in chunk:
                        raise self._sender.fail(f"LLM stream error: {str(chunk['error'])[:300]}")
                    if chunk.get("usage"):
                        meter.usage = TokenUsage.reported(chunk["usage"])
                    for choice in chunk.get("choices") or []:
                        piece = (choice.get("delta") or {}).get("content")
                        if piece:
                            got_any = True
                            yield piece
            except httpx.HTTPError as exc:
                raise self._sender.fail(f"LLM stream broke: {type(exc).__name__}: {exc}") from exc
            finally:
                await response.aclose()
            if not got_any:
                raise self._sender.fail("LLM stream ended without content")

    async def aclose(self) -> None:
        """Close the HTTP connections (those made on another event loop went with that loop)."""
        await self._http.aclose()
