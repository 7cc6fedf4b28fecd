"""LLM client for any OpenAI-compatible chat-completions server (vLLM, llama.cpp, OpenAI, ...)."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from lightrag_ray.config import LLMConfig
from lightrag_ray.models.llm import LLMError, Messages

MAX_RETRY_AFTER_S = 30.0


def _server_message(response: httpx.Response) -> str:
    """The error message a server put in its answer, shortened."""
    try:
        body = response.json()
        error = body.get("error", body.get("detail", body)) if isinstance(body, dict) else body
        if isinstance(error, dict):
            error = error.get("message", error)
        text = str(error)
    except ValueError:
        text = response.text
    return " ".join(text.split())[:300] or response.reason_phrase


def _retry_after(response: httpx.Response) -> float | None:
    """The ``Retry-After`` header in seconds (capped), or None when absent or not a number."""
    try:
        return min(max(float(response.headers["retry-after"]), 0.0), MAX_RETRY_AFTER_S)
    except (KeyError, ValueError):
        return None


def chat_payload(config: LLMConfig, messages: Messages, *, max_tokens: int | None = None,
                 stream: bool = False) -> dict[str, Any]:
    """The JSON body of a ``/chat/completions`` request."""
    return {
        "model": config.model,
        "messages": messages,
        "temperature": config.temperature,
        "max_tokens": max_tokens or config.max_tokens,
        "stream": stream,
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
        self.stats: dict[str, int] = {"requests": 0, "retries": 0, "failures": 0}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._http: httpx.AsyncClient | None = None
        self._semaphore = asyncio.Semaphore(config.max_concurrency)

    def _client(self) -> httpx.AsyncClient:
        """The HTTP client of the running event loop (made anew if the loop changed)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._http.is_closed or self._loop is not loop:
            limits = httpx.Limits(
                max_connections=max(100, self.config.max_concurrency),
                max_keepalive_connections=max(20, self.config.max_concurrency),
            )
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(self.config.timeout_s),
                limits=limits,
                headers={"Authorization": f"Bearer {self.config.api_key}"},
            )
            if self._loop is not None and self._loop is not loop:
                self._semaphore = asyncio.Semaphore(self.config.max_concurrency)
            self._loop = loop
        return self._http


    def _fail(self, message: str) -> LLMError:
        self.stats["failures"] += 1
        return LLMError(message)

    async def _send(self, attempt: Callable[[], Awaitable[httpx.Response]]) -> httpx.Response:
        """Run ``attempt`` until it gives a 2xx response; retry 429/5xx/timeouts/connection errors."""
        self.stats["requests"] += 1
        attempts = self.config.max_retries + 1
        last = ""
        for number in range(attempts):
            delay = self.config.backoff_s * 2**number * (1 + random.uniform(0, 0.1))
            try:
                response = await attempt()
            except (httpx.TimeoutException, asyncio.TimeoutError):
                last = f"timed out after {self.config.timeout_s:g} s"
            except httpx.UnsupportedProtocol as exc:
                raise self._fail(f"LLM request to {self.url} impossible: {exc}") from exc
            except httpx.TransportError as exc:
                last = f"connection error to {self.url}: {type(exc).__name__}: {exc}"
            else:
                status = response.status_code
                if status < 400:
                    return response
                await response.aread()
                await response.aclose()
                last = f"HTTP {status}: {_server_message(response)}"
                if status != 429 and status < 500:
                    raise self._fail(f"LLM request rejected by {self.url}: {last}")
                retry_after = _retry_after(response)
                if retry_after is not None:
                    delay = retry_after
            if number + 1 < attempts:
                self.stats["retries"] += 1
                await asyncio.sleep(delay)
        raise self._fail(f"LLM request failed after {attempts} attempts: {last}")

    async def complete(self, messages: Messages, *, max_tokens: int | None = None) -> str:
        """The whole answer; raises LLMError when it cannot be had."""
        client = self._client()
        payload = chat_payload(self.config, messages, max_tokens=max_tokens)
        async with self._semaphore:
            response = await self._send(
                lambda: asyncio.wait_for(client.post(self.url, json=payload), self.config.timeout_s)
            )
        try:
            body = response.json()
        except ValueError as exc:
            raise self._fail(f"LLM answer is not JSON: {response.text[:200]!r}") from exc
        try:
            return completion_text(body)
        except LLMError as exc:
            raise self._fail(str(exc)) from None

    async def stream(self, messages: Messages, *, max_tokens: int | None = None) -> AsyncIterator[str]:
        """The answer piece by piece, from the server's SSE stream."""
        client = self._client()
        payload = chat_payload(self.config, messages, max_tokens=max_tokens, stream=True)
        async with self._semaphore:
            response = await self._send(
                lambda: client.send(client.build_request("POST", self.url, json=payload), stream=True)
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
                        raise self._fail(f"LLM stream sent a bad chunk: {data[:200]!r}") from exc
                    if "error" in chunk:
                        raise self._fail(f"LLM stream error: {str(chunk['error'])[:300]}")
                    for choice in chunk.get("choices") or []:
                        piece = (choice.get("delta") or {}).get("content")
                        if piece:
                            got_any = True
                            yield piece
            except httpx.HTTPError as exc:
                raise self._fail(f"LLM stream broke: {type(exc).__name__}: {exc}") from exc
            finally:
                await response.aclose()
            if not got_any:
                raise self._fail("LLM stream ended without content")

    async def aclose(self) -> None:
        """Close the HTTP connections (those made on another event loop went with that loop)."""
        if self._http is not None and not self._http.is_closed and self._loop is asyncio.get_running_loop():
            await self._http.aclose()
