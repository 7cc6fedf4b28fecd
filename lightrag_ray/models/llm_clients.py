"""The LLM client for a configuration (the backends: openai_http, transformers_local) and a
batch caller that runs one over rows from synchronous code."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from lightrag_ray.config import LLMConfig
from lightrag_ray.models.llm import LLMClient

R = TypeVar("R")
T = TypeVar("T")


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


class BatchCaller:
    """An LLM client with its own event loop, for synchronous batch stages: ``each`` runs one
    coroutine per row concurrently (the client bounds the requests in flight).

    ``close`` closes the client's connections and the loop. A caller dropped without it keeps
    both: an unclosed uvloop loop (Serve's) is never freed, so a long-lived process that makes
    a caller per insert job loses file descriptors (an io_uring, an epoll, pipes) and memory
    with every job."""

    def __init__(self, config: LLMConfig) -> None:
        self.client = make_llm_client(config)
        # A Runner, not a bare loop: Ctrl-C in the main thread cancels the batch's tasks and
        # raises KeyboardInterrupt once they ended. On a bare loop the interrupt could land
        # inside a task, which kept it and printed its traceback when collected.
        self.runner = asyncio.Runner()

    def each(self, work: Callable[[R], Awaitable[T]], rows: list[R]) -> list[T]:
        """``work(row)`` for every row, concurrently; results in row order."""
        async def gather() -> list[T]:
            return list(await asyncio.gather(*(work(row) for row in rows)))

        return self.runner.run(gather())

    def close(self) -> None:
        """Close the client's connections, then the event loop."""
        try:
            self.runner.run(self.client.aclose())
        finally:
            self.runner.close()
