"""The one small interface every LLM backend implements, and the factory that picks one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol, runtime_checkable

from lightrag_ray.config import LLMConfig

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


def make_llm_client(config: LLMConfig) -> LLMClient:
    """The client for ``config.backend``: openai (and openai-batch, whose server answers
    queries through this client; only indexing batches it) or transformers."""
    if config.backend in ("openai", "openai-batch"):
        from lightrag_ray.models.openai_http import OpenAICompatibleClient

        return OpenAICompatibleClient(config)
    if config.backend == "transformers":
        from lightrag_ray.models.transformers_local import TransformersClient

        return TransformersClient(config)
    if config.backend == "vllm":
        raise ValueError(
            "llm.backend=vllm is not a client: vLLM runs as a ray.data.llm processor stage "
            "inside the indexing pipeline; use backend=openai to call a vLLM server over HTTP"
        )
    if config.backend == "none":
        raise ValueError(
            "no LLM configured: set llm.backend (openai or transformers) and its model, "
            "or use extraction.mode=fast"
        )
    raise ValueError(f"unknown llm.backend {config.backend!r}")
