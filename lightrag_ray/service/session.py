"""A workspace opened for queries in this process: its shards, Milvus, the embedder, the LLM,
the reranker."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from lightrag_ray.config import Settings
from lightrag_ray.core.context import QueryContext
from lightrag_ray.metrics.client import metrics
from lightrag_ray.models.embedding import make_query_embedder
from lightrag_ray.models.llm_clients import make_llm_client
from lightrag_ray.models.rerank import make_reranker
from lightrag_ray.query.engine import QueryEngine, QueryParam, QueryResult
from lightrag_ray.query.stores import ThreadedEmbedder, ThreadedVectorIndex
from lightrag_ray.service.opening import open_workspace
from lightrag_ray.storage import manifest as manifests

T = TypeVar("T")


class LocalSession:
    """A QueryEngine over a workspace opened as a one-process ``session``
    (service.opening), with everything it opened closed on exit.

    Its queries run on one event loop for the session's lifetime, so the LLM client keeps one
    connection pool (a loop per query left an unclosed HTTP client behind each time)."""

    def __init__(self, settings: Settings) -> None:
        metrics().configure(settings.metrics)
        self.opened = open_workspace(settings, "session")  # fails at once on a workspace with no index
        try:
            self.embedder = make_query_embedder(settings.embedding)
            manifests.check_embedding_dim(self.opened.manifest, self.embedder.dim, settings.embedding.model)
            self.reranker = make_reranker(settings.rerank)  # a cross-encoder loads here
        except BaseException:
            self.opened.close()
            raise
        self.settings = self.opened.settings
        self.graph = self.opened.graph_writer()  # the writer's handle: the process owns the shard actors
        self.vectors = self.opened.vector_store()
        self.llm = make_llm_client(settings.llm) if settings.llm.backend != "none" else None
        self.engine = QueryEngine(self.settings, ThreadedEmbedder(self.embedder), ThreadedVectorIndex(self.vectors),
                                  self.opened.graph_reader(), self.llm, self.reranker)
        self.runner = asyncio.Runner()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine of ``self.engine`` on the session's event loop, from synchronous code."""
        return self.runner.run(work)

    def retrieve(self, question: str, param: QueryParam | None = None) -> QueryContext:
        """The context for ``question`` (no generation), from synchronous code."""
        context, _, _ = self.run(self.engine.retrieve(question, param or QueryParam()))
        return context

    def query(self, question: str, param: QueryParam | None = None) -> QueryResult:
        """Retrieve and generate an answer, from synchronous code."""
        return self.run(self.engine.query(question, param))

    def __enter__(self) -> "LocalSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the LLM and reranker clients and the event loop, stop the shard actors and release
        the Milvus file."""
        try:
            for client in (self.llm, self.reranker):
                if client is not None:
                    self.run(client.aclose())
        finally:
            self.runner.close()
            self.opened.close()
