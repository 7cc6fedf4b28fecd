# mypy: disable-error-code="empty-body"
# (each method of VectorStore is declared by its signature and docstring)
"""The vector store contract, declared once: ``VectorStore`` (what Milvus Lite and a Milvus
server implement: storage.vectors.MilvusStore; the tests' in-memory fake) and its transports,
which get every method from it (core.transport): ``VectorCalls`` blocking (the actor that owns
a Lite file: storage.vector_owner) and ``AwaitedVectorReads`` for queries (a store in a worker
thread: query.stores; the Serve owner's handle: serve.owner).

Collections also answer BM25 text searches (``text_search``) where they carry a text field;
``text_kinds`` says which do, ``add_text_search`` upgrades one that does not.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol

import numpy as np

from lightrag_ray.core.transport import Awaited, Remote

Rows = list[dict[str, Any]]
Vectors = np.ndarray | list[list[float]]


class VectorStore(Protocol):
    """Three collections (``entities``, ``relations``, ``chunks``) of rows with a string ``id``,
    a ``vector`` and scalar fields."""

    def upsert(self, kind: str, rows: Rows) -> int:
        """Insert or replace rows (each with ``id``, ``vector`` and scalar fields); how many."""

    def delete(self, kind: str, ids: list[str]) -> None:
        """Delete rows by id (unknown ids are ignored)."""

    def search(self, kind: str, vectors: Vectors, top_k: int, output_fields: list[str] | None = None,
               version: int | None = None) -> list[Rows]:
        """For each query vector, hits (``id``, ``score`` and the fields asked, all by default),
        best first; ``version``: only rows a reader of that graph version sees
        (storage.vectors.visible_at)."""

    def text_search(self, kind: str, texts: list[str], top_k: int, output_fields: list[str] | None = None,
                    version: int | None = None) -> list[Rows]:
        """For each text, BM25 hits over the rows' ``text`` (``id``, ``score`` and the fields
        asked), best first; no hits from a collection without text search (``text_kinds``)."""

    def text_kinds(self) -> list[str]:
        """The kinds whose collection answers ``text_search``."""

    def add_text_search(self, kind: str, texts: dict[str, str]) -> int:
        """Give ``kind``'s collection text search, each row with its text (``texts`` by id, else
        the row's own ``text``), keeping its vectors; the rows copied (0: it had it already)."""

    def get(self, kind: str, ids: list[str], output_fields: list[str] | None = None) -> Rows:
        """Stored rows by id (without vectors unless asked), in any order; unknown ids left out."""

    def flush(self) -> None:
        """Make the rows written so far searchable through the index."""

    def close(self) -> None:
        """Release the connection (the transport's own resources)."""


class VectorCalls(ABC):
    """VectorStore over a blocking transport: ``run(method, *args)``."""

    upsert = Remote.of(VectorStore.upsert)
    delete = Remote.of(VectorStore.delete)
    search = Remote.of(VectorStore.search)
    text_search = Remote.of(VectorStore.text_search)
    text_kinds = Remote.of(VectorStore.text_kinds)
    add_text_search = Remote.of(VectorStore.add_text_search)
    get = Remote.of(VectorStore.get)
    flush = Remote.of(VectorStore.flush)

    @abstractmethod
    def run(self, method: Remote[..., Any], *args: Any) -> Any:
        """Call ``method`` of the store behind the transport."""


class AwaitedVectorReads(Awaited, ABC):
    """The reads of a VectorStore (``search``, ``text_search``, ``text_kinds``, ``get``),
    awaited: what a query uses."""

    search = Remote.of(VectorStore.search)
    text_search = Remote.of(VectorStore.text_search)
    text_kinds = Remote.of(VectorStore.text_kinds)
    get = Remote.of(VectorStore.get)

    @abstractmethod
    async def run(self, method: Remote[..., Any], *args: Any) -> Any:
        """Call ``method`` of the store behind the transport, awaited."""


def methods_of(transport: type) -> frozenset[str]:
    """Names of the VectorStore methods a transport class carries (what its far end may run)."""
    return frozenset(name for name in dir(transport) if isinstance(getattr(transport, name, None), Remote))


READ_METHODS = methods_of(AwaitedVectorReads)
