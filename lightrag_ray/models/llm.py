"""The one small interface every LLM backend implements (models.llm_clients picks one)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from lightrag_ray.models.usage import LLMCall

Messages = list[dict[str, str]]


class LLMError(RuntimeError):
    """An LLM call failed for good (after retries, or on a non-retryable answer)."""


@runtime_checkable
class LLMClient(Protocol):
    """Chat completion: send messages, get text back. ``call`` (models.usage) says what the call
    is for; the client records its metrics there and adds its token usage (none: unrecorded)."""

    async def complete(self, messages: Messages, *, max_tokens: int | None = None,
                       call: LLMCall | None = None) -> str:
        """The whole answer to ``messages``; raises LLMError when it cannot be had."""
        ...

    def stream(self, messages: Messages, *, max_tokens: int | None = None,
               call: LLMCall | None = None) -> AsyncIterator[str]:
        """The answer as it is generated, piece by piece (its usage added once it ended)."""
        ...

    async def aclose(self) -> None:
        """Release connections / models."""
        ...
