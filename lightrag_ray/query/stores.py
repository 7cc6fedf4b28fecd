"""What a query reads, as one small async protocol each, and adapters for in-process
blocking backends.

QueryEngine depends only on these protocols. Implementations: ``ShardReader`` (graph shard
actors, storage.graph_reader), the adapters below (a MilvusStore or a local embedding model
in this process, run in a worker thread), the Serve app's deployment-handle adapters
(serve.deployments), and in-memory stores in the tests.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import numpy as np

Rows = list[dict[str, Any]]


class TextEmbedder(Protocol):
    """Texts -> L2-normalised vectors, one row per text."""

    async def embed(self, texts: list[str]) -> np.ndarray: ...


class VectorIndex(Protocol):
    """Nearest-neighbour search and lookup by id in the three collections
    (``entities``, ``relations``, ``chunks``)."""

    async def search(self, kind: str, vectors: np.ndarray, top_k: int, output_fields: list[str]) -> list[Rows]:
        """For each query vector, hits (``id``, ``score`` and the fields asked), best first."""
        ...

    async def get(self, kind: str, ids: list[str], output_fields: list[str]) -> Rows:
        """Stored rows by id, in any order; unknown ids are left out."""
        ...


class GraphLookup(Protocol):
    """Merged entity and relation views of the knowledge graph."""

    async def neighborhood(self, keys: list[str], max_relations: int | None = None) -> dict[str, Rows]:
        """``{"entities", "relations"}``: the entities ``keys`` (best first) and their incident
        relations: all, or at least the best ``max_relations`` in ``local_relation_order``."""
        ...

    async def fetch(self, keys: list[str], pairs: list[tuple[str, str]]) -> dict[str, Rows]:
        """``{"entities", "relations"}``: entities by key, relations by endpoint pair, in order."""
        ...

    async def passage_entities(self, chunk_ids: list[str], keys: list[str], max_chunks: int) -> Rows:
        """One hop of a walk: rows (``key``, ``n_chunks``, ``chunks``) of the entities ``keys``
        and of those the passages ``chunk_ids`` mention, ``chunks`` being the passages that
        mention the entity (empty for hubs mentioned by more than ``max_chunks``)."""
        ...


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

    async def search(self, kind: str, vectors: np.ndarray, top_k: int, output_fields: list[str]) -> list[Rows]:
        return await asyncio.to_thread(self.store.search, kind, vectors, top_k, "", output_fields)

    async def get(self, kind: str, ids: list[str], output_fields: list[str]) -> Rows:
        return await asyncio.to_thread(self.store.get, kind, ids, output_fields)
