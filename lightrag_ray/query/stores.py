"""What a query reads, as one small async protocol each, and adapters for in-process
blocking backends.

QueryEngine depends only on these. Implementations: ``ShardReader`` (graph shard actors,
storage.graph.reader, for the graph contract's reads), the adapters below (a MilvusStore or a
local embedding model in this process, run in a worker thread), the Serve app's handle adapters
(serve.owner, serve.deployments), and in-memory stores in the tests.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import numpy as np

from lightrag_ray.core.graph.contract import AwaitedGraph
from lightrag_ray.core.transport import Remote
from lightrag_ray.storage.vector_contract import AwaitedVectorReads, VectorStore

Rows = list[dict[str, Any]]


class TextEmbedder(Protocol):
    """Texts -> L2-normalised vectors, one row per text."""

    async def embed(self, texts: list[str]) -> np.ndarray: ...


# What a query searches: the reads of the vector store contract, awaited; and what it asks
# the graph: the READ operations of the graph contract, awaited (a ShardReader).
VectorIndex = AwaitedVectorReads
GraphLookup = AwaitedGraph


class ThreadedEmbedder:
    """TextEmbedder over a blocking in-process embedder (models.embedding.Embedder)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self.embedder.embed, texts)


class ThreadedVectorIndex(AwaitedVectorReads):
    """The vector reads of a blocking VectorStore in this process (a MilvusStore), in a worker thread."""

    def __init__(self, store: VectorStore) -> None:
        self.store = store

    async def run(self, method: Remote[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(getattr(self.store, method.name), *args)
