"""The one small interface every LLM backend implements (models.llm_clients picks one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

Messages = list[dict[str, str]]


class LLMError(RuntimeError):
    """An LLM call failed for good (after retries, or on a non-retryable answer)."""


@runtime_checkable
class LLMClient(Protocol):
    """Chat completion: send messages, get text back."""

    async def complete(self, messages: Messages, *, max_tokens: int | None = None) -> str:
        """The whole answer to ``messages``; raises LLMError when it cannot be had."""
        ...

    def stream(self, messages: Messages, *, max_tokens: int | None = None) -> AsyncIterator[str]:
        """The answer as it is generated, piece by piece."""
        ...

    async def aclose(self) -> None:
        """Release connections / models."""
        ...
