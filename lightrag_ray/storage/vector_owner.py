"""The actor that owns a Milvus Lite file while indexing (one process may open it), and
the VectorWriter that reaches it. A Milvus server is written directly instead."""

from __future__ import annotations

from typing import Any

import ray

from lightrag_ray.storage.vectors import MilvusStore


@ray.remote
class VectorStoreActor:
    """The single owner of a Milvus Lite file while indexing (a server is written directly)."""

    def __init__(self, uri: str, dim: int, prefix: str = "lightrag", token: str = "", db_name: str = "default"):
        self.store = MilvusStore(uri, dim, prefix, token, db_name, searchable=False)  # it only writes

    def upsert(self, kind: str, rows: list[dict[str, Any]]) -> int:
        return self.store.upsert(kind, rows)

    def delete(self, kind: str, ids: list[str]) -> None:
        self.store.delete(kind, ids)

    def close(self) -> None:
        self.store.close()


class ActorVectorWriter:
    """VectorWriter over a VectorStoreActor (blocking calls; stops the actor on close)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def upsert(self, kind: str, rows: list[dict[str, Any]]) -> int:
        return ray.get(self.actor.upsert.remote(kind, rows))

    def delete(self, kind: str, ids: list[str]) -> None:
        ray.get(self.actor.delete.remote(kind, ids))

    def close(self) -> None:
        ray.get(self.actor.close.remote())
        ray.kill(self.actor)
