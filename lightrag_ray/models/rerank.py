"""Rerankers: a relevance score for each passage of a question, from a Cohere/Jina-compatible
``/rerank`` server (vLLM, Jina, Cohere v2) or a local sentence-transformers CrossEncoder;
``make_reranker`` picks the one a configuration names."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

from lightrag_ray.config import RerankConfig
from lightrag_ray.models.model_http import LoopClient, RetryingSender


class RerankError(RuntimeError):
    """A rerank call failed for good (after retries, or on an answer that is not a ranking)."""


@runtime_checkable
class Reranker(Protocol):
    """Scores documents by their relevance to a query; ``model`` names it in query metadata."""

    model: str

    async def scores(self, query: str, documents: list[str]) -> list[float]:
        """One relevance score per document, in the documents' order (higher: more relevant)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def result_scores(body: Any, count: int) -> list[float]:
    """The scores of ``count`` documents, in their order, from a rerank answer
    ``{"results": [{"index": i, "relevance_score": s}, ...]}``; RerankError saying what is wrong."""
    results = body.get("results") if isinstance(body, dict) else None
    if not isinstance(results, list):
        raise RerankError(f"rerank answer has no results list: {str(body)[:200]}")
    scores: dict[int, float] = {}
    for item in results:
        index = item.get("index") if isinstance(item, dict) else None
        score = item.get("relevance_score") if isinstance(item, dict) else None
        if (type(index) is not int or not 0 <= index < count
                or isinstance(score, bool) or not isinstance(score, (int, float))):
            raise RerankError(f"rerank answer has a bad result (wanted an index below {count} and a numeric "
                              f"relevance_score): {str(item)[:200]}")
        scores[index] = float(score)
    if len(scores) < count:
        missing = [i for i in range(count) if i not in scores]
        raise RerankError(f"rerank answer scores {len(scores)} of {count} documents (missing: {missing[:10]})")
    return [scores[i] for i in range(count)]


class HttpReranker:
    """POSTs ``{model, query, documents, top_n}`` to ``{base_url}/rerank``, with the same retries
    and backoff as the LLM client (models.model_http)."""

    def __init__(self, config: RerankConfig) -> None:
        self.config = config
        self.model = config.model
        self.url = config.base_url.rstrip("/") + "/rerank"
        self._sender = RetryingSender(self.url, config, "rerank", RerankError)
        self._http = LoopClient(config.timeout_s, config.api_key)

    async def scores(self, query: str, documents: list[str]) -> list[float]:
        if not documents:
            return []
        client = self._http.get()
        payload = {"model": self.model, "query": query, "documents": list(documents), "top_n": len(documents)}
        response = await self._sender.send(
            lambda: asyncio.wait_for(client.post(self.url, json=payload), self.config.timeout_s))
        try:
            return result_scores(response.json(), len(documents))
        except ValueError:
            raise self._sender.fail(f"rerank answer from {self.url} is not JSON: {response.text[:200]!r}") from None
        except RerankError as exc:
            raise self._sender.fail(f"{exc} (from {self.url})") from None

    async def aclose(self) -> None:
        await self._http.aclose()


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder (local path, offline, or HF id) on ``config.device``;
    its blocking ``predict`` runs in one worker thread (its tokenizer is not shared between threads)."""

    def __init__(self, config: RerankConfig) -> None:
        from sentence_transformers import CrossEncoder

        if os.path.isdir(config.model):
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.model = config.model
        self.encoder = CrossEncoder(config.model, device=config.device)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="rerank")

    def predict(self, query: str, documents: list[str]) -> list[float]:
        """The scores, computed in the calling thread."""
        if not documents:
            return []
        found = self.encoder.predict([(query, document) for document in documents], show_progress_bar=False)
        return [float(score) for score in found]

    async def scores(self, query: str, documents: list[str]) -> list[float]:
        return await asyncio.get_running_loop().run_in_executor(self._thread, self.predict, query, list(documents))

    async def aclose(self) -> None:
        return None


def make_reranker(config: RerankConfig) -> Reranker | None:
    """The reranker ``config`` names; None for backend none."""
    if config.backend == "http":
        return HttpReranker(config)
    if config.backend == "cross-encoder":
        return CrossEncoderReranker(config)
    return None
