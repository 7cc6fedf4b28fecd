"""HTTP to a model server, shared by the LLM client (models.openai_http) and the HTTP
reranker (models.rerank): a connection pool per event loop, and requests sent again when
another try may pass (429, 5xx, timeouts, connection errors) after a doubling backoff or the
server's ``Retry-After``."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Protocol

import httpx

from lightrag_ray.models.usage import Cause, Metering

MAX_RETRY_AFTER_S = 30.0


class RetrySettings(Protocol):
    """What a retrying caller reads of its configuration (LLMConfig, RerankConfig)."""

    @property
    def timeout_s(self) -> float: ...

    @property
    def max_retries(self) -> int: ...

    @property
    def backoff_s(self) -> float: ...


def server_message(response: httpx.Response) -> str:
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


class LoopClient:
    """An ``httpx.AsyncClient`` for the running event loop, made on first use and anew when the
    loop changed (a client's connections belong to the loop that opened them)."""

    def __init__(self, timeout_s: float, api_key: str, limits: httpx.Limits | None = None) -> None:
        self.timeout_s = timeout_s
        self.headers = {"Authorization": f"Bearer {api_key}"}
        self.limits = limits or httpx.Limits()
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop of the current client
        self._http: httpx.AsyncClient | None = None

    def get(self) -> httpx.AsyncClient:
        """The client of the running loop."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._http.is_closed or self.loop is not loop:
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), limits=self.limits,
                                           headers=self.headers)
            self.loop = loop
        return self._http

    async def aclose(self) -> None:
        """Close the connections (those made on another event loop went with that loop)."""
        if self._http is not None and not self._http.is_closed and self.loop is asyncio.get_running_loop():
            await self._http.aclose()


class RetryingSender:
    """Sends the requests of one client to ``url``; its failures are ``error`` exceptions whose
    messages name ``what`` (e.g. "LLM"). ``stats`` counts calls (``requests``), repeated attempts
    (``retries``) and calls that failed for good (``failures``)."""

    def __init__(self, url: str, settings: RetrySettings, what: str, error: Callable[[str], Exception]) -> None:
        self.url = url
        self.settings = settings
        self.what = what
        self.error = error
        self.stats: dict[str, int] = {"requests": 0, "retries": 0, "failures": 0}

    def fail(self, message: str) -> Exception:
        """The exception of a call that failed for good (counted)."""
        self.stats["failures"] += 1
        return self.error(message)

    async def send(self, attempt: Callable[[], Awaitable[httpx.Response]],
                   meter: Metering | None = None) -> httpx.Response:
        """Run ``attempt`` until it gives a 2xx response; retry 429/5xx/timeouts/connection errors.
        ``meter`` hears of the retries and of the cause when the call fails for good."""
        self.stats["requests"] += 1
        meter = meter or Metering()
        attempts = self.settings.max_retries + 1
        last = ""
        cause: Cause = "error"
        for number in range(attempts):
            delay = self.settings.backoff_s * 2**number * (1 + random.uniform(0, 0.1))
            try:
                response = await attempt()
            except (httpx.TimeoutException, asyncio.TimeoutError):
                last, cause = f"timed out after {self.settings.timeout_s:g} s", "timeout"
            except httpx.UnsupportedProtocol as exc:
                raise self.fail(f"{self.what} request to {self.url} impossible: {exc}") from exc
            except httpx.TransportError as exc:
                last, cause = f"connection error to {self.url}: {type(exc).__name__}: {exc}", "error"
            else:
                status = response.status_code
                if status < 400:
                    return response
                await response.aread()
                await response.aclose()
                last, cause = f"HTTP {status}: {server_message(response)}", "429" if status == 429 else "error"
                if status != 429 and status < 500:
                    raise self.fail(f"{self.what} request rejected by {self.url}: {last}")
                retry_after = _retry_after(response)
                if retry_after is not None:
                    delay = retry_after
            if number + 1 < attempts:
                self.stats["retries"] += 1
                meter.retries += 1
                await asyncio.sleep(delay)
        meter.cause = cause
        raise self.fail(f"{self.what} request failed after {attempts} attempts: {last}")
