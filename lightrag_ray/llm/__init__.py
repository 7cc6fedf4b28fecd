"""LLM backends behind one small protocol (see ``base.LLMClient``)."""

from __future__ import annotations

from lightrag_ray.config import LLMConfig
from lightrag_ray.llm.base import LLMClient, LLMError, Messages

__all__ = ["LLMClient", "LLMError", "Messages", "make_llm_client"]


def make_llm_client(config: LLMConfig) -> LLMClient:
    """The client for ``config.backend`` (openai or transformers)."""
    if config.backend == "openai":
        from lightrag_ray.llm.openai_http import OpenAICompatibleClient

        return OpenAICompatibleClient(config)
    if config.backend == "transformers":
        from lightrag_ray.llm.transformers_local import TransformersClient

        return TransformersClient(config)
    if config.backend == "vllm":
        raise ValueError(
            "llm.backend=vllm is not a client: vLLM runs as a ray.data.llm processor stage "
            "inside the extraction pipeline; use backend=openai to call a vLLM server over HTTP"
        )
    if config.backend == "none":
        raise ValueError(
            "no LLM configured: set llm.backend (openai or transformers) and its model, "
            "or use extraction.mode=fast"
        )
    raise ValueError(f"unknown llm.backend {config.backend!r}")
