"""Open a workspace for queries in this process: Ray graph shards, Milvus, embedder, LLM."""

from __future__ import annotations

import asyncio

from lightrag_ray.config import Settings
from lightrag_ray.core.context import QueryContext
from lightrag_ray.models.embedding import make_query_embedder
from lightrag_ray.models.llm import make_llm_client
from lightrag_ray.query.engine import QueryEngine, QueryParam, QueryResult
from lightrag_ray.query.stores import ThreadedEmbedder, ThreadedVectorIndex
from lightrag_ray.ray_runtime import ensure_ray
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph_reader import ShardReader
from lightrag_ray.storage.graph_router import GraphRouter
from lightrag_ray.storage.vectors import open_store
from lightrag_ray.storage.workspace import Workspace


class LocalSession:
    """A QueryEngine over a workspace, with everything it opened closed on exit."""

    def __init__(self, settings: Settings) -> None:
        workspace = Workspace(settings.workspace)
        manifest = manifests.load(workspace)
        if not manifest.is_indexed():
            raise FileNotFoundError(f"{settings.workspace} holds no index yet; run `lightrag-ray index` first")
        ensure_ray(settings)
        self.embedder = make_query_embedder(settings.embedding)
        manifests.check_embedding_dim(manifest, self.embedder.dim, settings.embedding.model)
        self.vectors = open_store(settings, self.embedder.dim)
        graph = settings.graph.model_copy(update={"num_shards": manifest.num_shards})
        self.graph = GraphRouter(settings.workspace, graph, settings.ray.namespace)  # owns the shard actors
        reader = ShardReader.for_settings(settings, graph.num_shards)
        self.llm = make_llm_client(settings.llm) if settings.llm.backend != "none" else None
        self.engine = QueryEngine(settings, ThreadedEmbedder(self.embedder), ThreadedVectorIndex(self.vectors),
                                  reader, self.llm)

    def retrieve(self, question: str, param: QueryParam | None = None) -> QueryContext:
        """The context for ``question`` (no generation), from synchronous code."""
        context, _, _ = asyncio.run(self.engine.retrieve(question, param or QueryParam()))
        return context

    def query(self, question: str, param: QueryParam | None = None) -> QueryResult:
        """Retrieve and generate an answer, from synchronous code."""
        return asyncio.run(self.engine.query(question, param))

    def __enter__(self) -> "LocalSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the shard actors and release the Milvus file."""
        self.graph.close()
        self.vectors.close()
