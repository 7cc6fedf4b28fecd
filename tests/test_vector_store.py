"""A write-only Milvus Lite store (the indexing run's owner actor) upserts and deletes without
loading the vector indexes, and a later reader searches what it wrote (real Milvus Lite)."""

from __future__ import annotations

import numpy as np
from pymilvus.client.types import LoadState

from lightrag_ray.storage.vectors import MilvusStore

DIM = 8


def rows(n: int, seed: int, start: int = 0) -> list[dict]:
    vectors = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [{"id": f"ent-{start + i}", "vector": vectors[i], "key": f"name {start + i}"} for i in range(n)]


def test_write_only_store_leaves_indexes_unloaded_and_a_reader_finds_its_writes(tmp_path):
    uri = str(tmp_path / "milvus.db")
    first = MilvusStore(uri, DIM)
    first.upsert("entities", rows(60, seed=1))
    first.close()  # flushed into an indexed segment

    writer = MilvusStore(uri, DIM, searchable=False)
    try:
        assert all(writer.client.get_load_state(name)["state"] == LoadState.NotLoad for name in writer.names.values())
        replaced = {**rows(1, seed=7)[0], "id": "ent-0", "key": "renamed"}
        writer.upsert("entities", rows(20, seed=2, start=60) + [replaced])
        writer.delete("entities", ["ent-1"])
    finally:
        writer.close()

    reader = MilvusStore(uri, DIM)
    try:
        assert reader.count("entities") == 79
        assert reader.get("entities", ["ent-1"]) == []
        [[hit]] = reader.search("entities", [replaced["vector"]], 1)
        assert hit["id"] == "ent-0" and hit["key"] == "renamed" and hit["score"] > 0.99
        new = rows(20, seed=2, start=60)[5]
        assert reader.search("entities", [new["vector"]], 1)[0][0]["id"] == "ent-65"
    finally:
        reader.close()
