"""What a query reads, as one small async protocol each, and adapters for in-process
blocking backends.

QueryEngine depends only on these protocols. Implementations: ``ShardReader`` (graph shard
actors, storage.graph.reader, for the graph contract's reads), the adapters below (a MilvusStore or a local embedding model
in this process, run in a worker thread), the Serve app's deployment-handle adapters
(serve.deployments), and in-memory stores in the tests.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import numpy as np

from lightrag_ray.storage.vectors import visible_at

Rows = list[dict[str, Any]]


class TextEmbedder(Protocol):
    """Texts -> L2-normalised vectors, one row per text."""

    async def embed(self, texts: list[str]) -> np.ndarray: ...


class VectorIndex(Protocol):
    """Nearest-neighbour search and lookup by id in the three collections
    (``entities``, ``relations``, ``chunks``)."""

    async def search(self, kind: str, vectors: np.ndarray, top_k: int, output_fields: list[str],
                     version: int | None = None) -> list[Rows]:
        """For each query vector, hits (``id``, ``score`` and the fields asked), best first;
        ``version``: only rows a reader of that graph version sees (storage.vectors.visible_at)."""
        ...

    async def get(self, kind: str, ids: list[str], output_fields: list[str]) -> Rows:
        """Stored rows by id, in any order; unknown ids are left out."""
        ...


# The graph's reads are the READ operations of the graph contract (core.graph.contract:
# neighborhood, fetch, passage_entities, labels, export), awaited: a ShardReader, or the
# tests' in-memory MemoryGraph.
GraphLookup = Any


class ThreadedEmbedder:
    """TextEmbedder over a blocking in-process embedder (models.embedding.Embedder)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    async def embed(self, texts: list[str]) -> np.ndarray:
        return await asyncio.to_thread(self.embedder.embed, texts)


class ThreadedVectorIndex:
    """VectorIndex over a blocking MilvusStore client in this process."""

    def __init__(self, store: Any) -> None:
        self.store = store

    async def search(self, kind: str, vectors: np.ndarray, top_k: int, output_fields: list[str],
                     version: int | None = None) -> list[Rows]:
        where = "" if version is None else visible_at(version)
        return await asyncio.to_thread(self.store.search, kind, vectors, top_k, where, output_fields)

    async def get(self, kind: str, ids: list[str], output_fields: list[str]) -> Rows:
        return await asyncio.to_thread(self.store.get, kind, ids, output_fields)
