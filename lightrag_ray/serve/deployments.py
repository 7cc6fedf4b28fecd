"""The back-end Serve deployments: embedder (request batching), LLM and cross-encoder
reranker, and the adapters through which the ingress's QueryEngine awaits them (the workspace
owner: serve.owner).

The FastAPI ingress (``serve.app``) runs the QueryEngine. It reads the graph shards (and a
Milvus server) directly; it reaches the embedder, the LLM, a cross-encoder reranker and, for
a Milvus Lite file (one process only), the owner's vector lookups through deployment handles,
awaited on its event loop; an HTTP reranker's server it calls itself (``ingress_reranker``).
Resources are fractional so the whole app fits on 2 cores; the options here are defaults
that ``serve_config.yaml`` may override.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from ray import serve

from lightrag_ray.config import EmbeddingConfig, LLMConfig, MetricsConfig, RerankConfig
from lightrag_ray.metrics.client import metrics
from lightrag_ray.models.embedding import make_query_embedder
from lightrag_ray.models.llm import LLMClient, LLMError, Messages
from lightrag_ray.models.llm_clients import make_llm_client
from lightrag_ray.models.rerank import CrossEncoderReranker, Reranker, make_reranker
from lightrag_ray.models.usage import LLMCall, TokenUsage
from lightrag_ray.ray_runtime import SERVING_NICENESS, niceness_options

# Every replica (and the graph shards the workspace owner starts) runs at niceness 0, an
# insert job's driver thread, tasks and actors at 19 (below Serve's proxy at Ray's default
# 15), so on nodes that do both the queries come first (scripts/bench_serve.py --during-insert).
SERVING = niceness_options(SERVING_NICENESS)
# A stopping replica checks for requests still running every this many seconds (Serve's
# default, 2 s, made stopping the app's three tiers take 6 s with nothing running).
STOPPING = {"graceful_shutdown_wait_loop_s": 0.25}


class HandleEmbedder:
    """TextEmbedder (query.stores) over the Embedder deployment, awaited."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(await self.handle.embed.remote(list(texts)))


class BlockingHandleEmbedder:
    """The blocking Embedder protocol over the Embedder deployment, for the owner's
    write path (deletes re-embed what they changed, in a worker thread)."""

    def __init__(self, handle: Any, dim: int) -> None:
        self.handle = handle
        self.dim = dim

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.handle.embed.remote(list(texts)).result())


@serve.deployment(
    ray_actor_options={"num_cpus": 0.5, **SERVING},
    autoscaling_config={"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 16},
    max_ongoing_requests=128,
    **STOPPING,
)
class EmbedderDeployment:
    """The embedding model; concurrent single texts are embedded together in one batch."""

    def __init__(self, config: dict[str, Any], max_batch_size: int = 64, batch_wait_timeout_s: float = 0.01,
                 metrics_config: dict[str, Any] | None = None) -> None:
        metrics().configure(MetricsConfig.model_validate(metrics_config or {}))
        self.embedder = make_query_embedder(EmbeddingConfig.model_validate(config))
        self.embed_one.set_max_batch_size(max_batch_size)
        self.embed_one.set_batch_wait_timeout_s(batch_wait_timeout_s)

    @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.01)
    async def embed_one(self, texts: list[str]) -> list[np.ndarray]:
        return list(await asyncio.to_thread(self.embedder.embed, texts))

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts``, each batched with other callers' texts."""
        return np.stack(await asyncio.gather(*(self.embed_one(t) for t in texts)))

    def dimension(self) -> int:
        return int(self.embedder.dim)


def cause_message(exc: BaseException) -> str:
    """The message of an exception raised in another deployment, without Ray's remote traceback."""
    return str(getattr(exc, "cause", None) or exc)


def llm_failure(exc: BaseException) -> str:
    """What a client is told when the LLM deployment failed."""
    return f"the LLM failed: {cause_message(exc)}"


class HandleLLM:
    """The LLMClient protocol over the LLM deployment: the deployment's client records the call's
    metrics, its usage comes back with the answer (a stream's as its last item) into ``call``."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def complete(self, messages: Messages, *, max_tokens: int | None = None,
                       call: LLMCall | None = None) -> str:
        text, usage = await self.handle.complete.remote(messages, max_tokens, call and call.fresh())
        if call is not None:
            call.usage += usage
        return text

    async def stream(self, messages: Messages, *, max_tokens: int | None = None,
                     call: LLMCall | None = None) -> AsyncIterator[str]:
        async for item in self.handle.options(stream=True).stream.remote(messages, max_tokens, call and call.fresh()):
            if isinstance(item, TokenUsage):
                if call is not None:
                    call.usage += item
            else:
                yield item

    async def aclose(self) -> None:
        return None


@serve.deployment(ray_actor_options={"num_cpus": 0.1, **SERVING}, max_ongoing_requests=256, **STOPPING)
class LLMDeployment:
    """An OpenAI-compatible upstream (or a local transformers model) for keywords and answers.

    With ``llm.backend: none`` it holds no model (the ingress then answers context only),
    so serve_config.yaml can always name this deployment.
    """

    def __init__(self, config: dict[str, Any], metrics_config: dict[str, Any] | None = None) -> None:
        metrics().configure(MetricsConfig.model_validate(metrics_config or {}))
        llm = LLMConfig.model_validate(config)
        self.client = make_llm_client(llm) if llm.backend != "none" else None

    def _client(self) -> LLMClient:
        if self.client is None:
            raise LLMError("no LLM configured (llm.backend is none)")
        return self.client

    async def complete(self, messages: Messages, max_tokens: int | None = None,
                       call: LLMCall | None = None) -> tuple[str, TokenUsage]:
        """The answer and its usage (none without a ``call``)."""
        text = await self._client().complete(messages, max_tokens=max_tokens, call=call)
        return text, call.usage if call is not None else TokenUsage()

    async def stream(self, messages: Messages, max_tokens: int | None = None,
                     call: LLMCall | None = None) -> AsyncIterator[str | TokenUsage]:
        """The answer's pieces, then its usage (none without a ``call``)."""
        async for piece in self._client().stream(messages, max_tokens=max_tokens, call=call):
            yield piece
        yield call.usage if call is not None else TokenUsage()


@serve.deployment(ray_actor_options={"num_cpus": 0.5, **SERVING}, max_ongoing_requests=64, **STOPPING)
class RerankerDeployment:
    """The cross-encoder of ``rerank.backend: cross-encoder`` (its CPUs: ``rerank.num_cpus``), so that
    ingress replicas share one copy of the model. An HTTP reranker needs none: it holds no model,
    and each ingress replica calls its server directly (one hop fewer, no CPUs reserved)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.reranker = CrossEncoderReranker(RerankConfig.model_validate(config))

    async def scores(self, query: str, documents: list[str]) -> list[float]:
        """One relevance score per document, in their order."""
        return await self.reranker.scores(query, documents)


class HandleReranker:
    """The Reranker protocol over the Reranker deployment."""

    def __init__(self, handle: Any, model: str) -> None:
        self.handle = handle
        self.model = model

    async def scores(self, query: str, documents: list[str]) -> list[float]:
        return await self.handle.scores.remote(query, list(documents))

    async def aclose(self) -> None:
        return None


def reranker_deployment(config: RerankConfig) -> Any:
    """The bound Reranker deployment of a cross-encoder configuration, None for the other backends."""
    if config.backend != "cross-encoder":
        return None
    options = {"ray_actor_options": {"num_cpus": config.num_cpus, **SERVING}}
    return RerankerDeployment.options(**options).bind(config.model_dump())  # type: ignore[attr-defined]  # (Ray adds it)


def ingress_reranker(config: RerankConfig, handle: Any) -> Reranker | None:
    """The reranker of an ingress replica's queries: the Reranker deployment's ``handle``
    (cross-encoder), an HTTP reranker it calls itself, or None."""
    if config.backend == "cross-encoder":
        return HandleReranker(handle, config.model)
    return make_reranker(config)
