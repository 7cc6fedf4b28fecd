"""Where vectors go from the processes that compute them.

A Milvus server takes writes from any process: each embedding worker opens its own client. A
Milvus Lite file admits one process, so one ``VectorStoreActor`` owns it and every worker sends
it batched rows. ``VectorSink`` names either and is picklable, so it travels to the workers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psutil
import ray

from lightrag_ray.config import Settings
from lightrag_ray.storage.vectors import MilvusStore, VectorWriter, is_server_uri

LITE_OWNER_CPUS = 0.1  # the actor that owns a Milvus Lite file: mostly idle between upserts and lookups


@ray.remote
class VectorStoreActor:
    """The single owner of a Milvus Lite file (a server is written directly)."""

    def __init__(self, uri: str, dim: int, prefix: str = "lightrag", token: str = "", db_name: str = "default",
                 searchable: bool = False):
        self.store = MilvusStore(uri, dim, prefix, token, db_name, searchable=searchable)

    def upsert(self, kind: str, rows: list[dict[str, Any]]) -> int:
        return self.store.upsert(kind, rows)

    def delete(self, kind: str, ids: list[str]) -> None:
        self.store.delete(kind, ids)

    def flush(self) -> None:
        self.store.flush()

    def search(self, kind: str, vectors: Any, top_k: int, filter: str, output_fields: list[str]) -> list[list[dict[str, Any]]]:
        return self.store.search(kind, vectors, top_k, filter, output_fields)

    def get(self, kind: str, ids: list[str], output_fields: list[str]) -> list[dict[str, Any]]:
        return self.store.get(kind, ids, output_fields)

    def memory(self) -> int:
        """This actor process's resident memory, in bytes."""
        return psutil.Process().memory_info().rss

    def close(self) -> None:
        self.store.close()


class ActorVectorWriter:
    """VectorWriter (and blocking search/get) over a VectorStoreActor; ``close`` stops the actor
    when this writer owns it."""

    def __init__(self, actor: Any, owner: bool = True) -> None:
        self.actor = actor
        self.owner = owner

    def upsert(self, kind: str, rows: list[dict[str, Any]]) -> int:
        return ray.get(self.actor.upsert.remote(kind, rows))

    def delete(self, kind: str, ids: list[str]) -> None:
        ray.get(self.actor.delete.remote(kind, ids))

    def flush(self) -> None:
        ray.get(self.actor.flush.remote())

    def search(self, kind: str, vectors: Any, top_k: int, filter: str = "",
               output_fields: list[str] | None = None) -> list[list[dict[str, Any]]]:
        return ray.get(self.actor.search.remote(kind, vectors, top_k, filter, output_fields or ["*"]))

    def get(self, kind: str, ids: list[str], output_fields: list[str] | None = None) -> list[dict[str, Any]]:
        return ray.get(self.actor.get.remote(kind, ids, output_fields or ["*"]))

    def memory_bytes(self) -> int:
        """Resident memory of the actor owning the Lite file."""
        return ray.get(self.actor.memory.remote())

    def close(self) -> None:
        if self.owner:
            ray.get(self.actor.close.remote())
            ray.kill(self.actor)


@dataclass(frozen=True)
class VectorSink:
    """Where an embedding worker stores vectors: a Milvus server (``uri``), or the actor that
    owns a Milvus Lite file (``owner``)."""

    uri: str
    dim: int
    prefix: str
    token: str
    db_name: str
    owner: Any = None

    def open(self) -> VectorWriter:
        """A writer in this process (the owner's stays up when it is closed)."""
        if self.owner is not None:
            return ActorVectorWriter(self.owner, owner=False)
        return MilvusStore(self.uri, self.dim, self.prefix, self.token, self.db_name, searchable=False)

    @contextlib.contextmanager
    def writing(self) -> Iterator[VectorWriter]:
        """A writer in this process for the block (``open``, closed after it)."""
        writer = self.open()
        try:
            yield writer
        finally:
            writer.close()

    def delete(self, kind: str, ids: list[str]) -> None:
        """Delete the rows ``ids`` through a writer opened for it."""
        with self.writing() as writer:
            writer.delete(kind, ids)

    def flush(self) -> None:
        """Flush the rows the workers stored in a Lite file (MilvusStore.flush; a server needs none)."""
        if self.owner is not None:
            ray.get(self.owner.flush.remote())


def open_vector_sink(settings: Settings, dim: int, searchable: bool = False,
                     actor_options: dict[str, Any] | None = None) -> tuple[VectorSink, VectorWriter]:
    """The sink of ``settings``' vector store and a writer for this process: a server's client, or a
    new VectorStoreActor owning the Lite file (``searchable``: it also answers searches;
    ``actor_options``: Ray options of that actor, e.g. a name and a detached lifetime)."""
    vec, uri = settings.vectors, settings.milvus_uri()
    if is_server_uri(uri):
        sink = VectorSink(uri, dim, vec.collection_prefix, vec.token, vec.db_name)
        return sink, sink.open()
    actor = VectorStoreActor.options(num_cpus=LITE_OWNER_CPUS, **(actor_options or {})).remote(
        uri, dim, vec.collection_prefix, vec.token, vec.db_name, searchable)
    return VectorSink(uri, dim, vec.collection_prefix, vec.token, vec.db_name, actor), ActorVectorWriter(actor)
