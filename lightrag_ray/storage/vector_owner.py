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
from lightrag_ray.core.transport import Remote
from lightrag_ray.storage.vector_contract import VectorCalls, VectorStore
from lightrag_ray.storage.vectors import MilvusStore, is_server_uri

LITE_OWNER_CPUS = 0.1  # the actor that owns a Milvus Lite file: mostly idle between upserts and lookups


@ray.remote
class VectorStoreActor(MilvusStore):
    """The single owner of a Milvus Lite file (a server is written directly): a MilvusStore in
    its own process, whose VectorStore methods ActorVectorWriters call."""

    def memory(self) -> int:
        """This actor process's resident memory, in bytes."""
        return psutil.Process().memory_info().rss


class ActorVectorWriter(VectorCalls):
    """A VectorStore over a VectorStoreActor; ``close`` stops the actor when this writer owns it."""

    def __init__(self, actor: Any, owner: bool = True) -> None:
        self.actor = actor
        self.owner = owner

    def run(self, method: Remote[..., Any], *args: Any) -> Any:
        return ray.get(getattr(self.actor, method.name).remote(*args))

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
    analyzer: str
    owner: Any = None

    @classmethod
    def of(cls, settings: Settings, dim: int, owner: Any = None) -> "VectorSink":
        """The sink of ``settings``' vector store (``owner``: the actor owning its Lite file)."""
        vec = settings.vectors
        return cls(settings.milvus_uri(), dim, vec.collection_prefix, vec.token, vec.db_name, vec.text_analyzer, owner)

    def store(self, searchable: bool) -> MilvusStore:
        """A MilvusStore of this sink's collections in this process."""
        return MilvusStore(self.uri, self.dim, self.prefix, self.token, self.db_name, searchable, self.analyzer)

    def open(self) -> VectorStore:
        """A writer in this process (the owner's stays up when it is closed)."""
        if self.owner is not None:
            return ActorVectorWriter(self.owner, owner=False)
        return self.store(searchable=False)

    @contextlib.contextmanager
    def writing(self) -> Iterator[VectorStore]:
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
            ActorVectorWriter(self.owner, owner=False).flush()


def open_vector_sink(settings: Settings, dim: int, searchable: bool = False,
                     actor_options: dict[str, Any] | None = None) -> tuple[VectorSink, VectorStore]:
    """The sink of ``settings``' vector store and a writer for this process: a server's client, or a
    new VectorStoreActor owning the Lite file (``searchable``: it also answers searches;
    ``actor_options``: Ray options of that actor, e.g. a name and a detached lifetime)."""
    sink = VectorSink.of(settings, dim)
    if is_server_uri(sink.uri):
        return sink, sink.open()
    actor = VectorStoreActor.options(num_cpus=LITE_OWNER_CPUS, **(actor_options or {})).remote(  # type: ignore[attr-defined]  # (Ray adds it)
        sink.uri, dim, sink.prefix, sink.token, sink.db_name, searchable, sink.analyzer)
    return VectorSink.of(settings, dim, actor), ActorVectorWriter(actor)
