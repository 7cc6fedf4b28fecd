"""Milvus vector store: three collections (entities, relations, chunks).

A local path means Milvus Lite, which one process at a time may open, so the pipeline
gives it to exactly one actor (VectorStoreActor); an ``http(s)://`` URI is a Milvus
server any process may use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import ray

KINDS = ("entities", "relations", "chunks")


def is_server_uri(uri: str) -> bool:
    return uri.startswith(("http://", "https://", "tcp://", "grpc://"))


class MilvusStore:
    """Upsert, delete and search vectors with deterministic string ids."""

    def __init__(self, uri: str, dim: int, prefix: str = "lightrag", token: str = "", db_name: str = "default"):
        from pymilvus import MilvusClient

        if not is_server_uri(uri):
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
            self.client = MilvusClient(uri)
        else:
            self.client = MilvusClient(uri=uri, token=token, db_name=db_name)
        self.dim = dim
        self.names = {kind: f"{prefix}_{kind}" for kind in KINDS}
        for name in self.names.values():
            self._ensure(name)

    def _ensure(self, name: str) -> None:
        if self.client.has_collection(name):
            fields = self.client.describe_collection(name)["fields"]
            dim = next(int(f["params"]["dim"]) for f in fields if f["name"] == "vector")
            if dim != self.dim:
                raise ValueError(
                    f"Milvus collection {name} holds {dim}-dimensional vectors but the embedding "
                    f"model gives {self.dim}; use the model the workspace was built with or a new workspace"
                )
            self.client.load_collection(name)
            return
        self.client.create_collection(
            name, dimension=self.dim, primary_field_name="id", id_type="string", max_length=64,
            vector_field_name="vector", metric_type="COSINE", auto_id=False, enable_dynamic_field=True,
        )

    def upsert(self, kind: str, rows: list[dict[str, Any]]) -> int:
        """Insert or replace rows (each with ``id``, ``vector`` and scalar fields)."""
        if not rows:
            return 0
        for row in rows:
            if isinstance(row["vector"], np.ndarray):
                row["vector"] = row["vector"].astype(np.float32).tolist()
        self.client.upsert(self.names[kind], rows)
        return len(rows)

    def delete(self, kind: str, ids: list[str]) -> None:
        if ids:
            self.client.delete(self.names[kind], ids=list(ids))

    def search(
        self, kind: str, vectors: list[list[float]] | np.ndarray, top_k: int,
        filter: str = "", output_fields: list[str] | None = None,
    ) -> list[list[dict[str, Any]]]:
        """For each query vector, hits as dicts with id, score and the requested fields."""
        data = np.asarray(vectors, dtype=np.float32).tolist()
        results = self.client.search(
            self.names[kind], data=data, limit=top_k, filter=filter,
            output_fields=output_fields or ["*"],
        )
        return [[{"id": h["id"], "score": float(h["distance"]), **h.get("entity", {})} for h in hits] for hits in results]

    def get(self, kind: str, ids: list[str], output_fields: list[str] | None = None) -> list[dict[str, Any]]:
        """Stored rows by id (without vectors unless asked), in no particular order."""
        if not ids:
            return []
        return list(self.client.get(self.names[kind], ids=list(ids), output_fields=output_fields or ["*"]))

    def existing_ids(self, kind: str, ids: list[str]) -> set[str]:
        """Which of ``ids`` are stored."""
        if not ids:
            return set()
        rows = self.client.get(self.names[kind], ids=list(ids), output_fields=["id"])
        return {row["id"] for row in rows}

    def count(self, kind: str) -> int:
        return int(self.client.query(self.names[kind], filter="", output_fields=["count(*)"])[0]["count(*)"])

    def close(self) -> None:
        self.client.close()


@ray.remote
class VectorStoreActor:
    """The single owner of a Milvus Lite file (or a shared handle on a server)."""

    def __init__(self, uri: str, dim: int, prefix: str = "lightrag", token: str = "", db_name: str = "default"):
        self.store = MilvusStore(uri, dim, prefix, token, db_name)

    def upsert(self, kind: str, rows: list[dict[str, Any]]) -> int:
        return self.store.upsert(kind, rows)

    def delete(self, kind: str, ids: list[str]) -> None:
        self.store.delete(kind, ids)

    def search(self, kind: str, vectors: Any, top_k: int, filter: str = "", output_fields: list[str] | None = None):
        return self.store.search(kind, vectors, top_k, filter, output_fields)

    def count(self, kind: str) -> int:
        return self.store.count(kind)

    def get(self, kind: str, ids: list[str], output_fields: list[str] | None = None) -> list[dict[str, Any]]:
        return self.store.get(kind, ids, output_fields)

    def close(self) -> None:
        self.store.close()
