"""A write-only Milvus Lite store (the indexing run's owner actor) upserts and deletes without
loading the vector indexes, and a later reader searches what it wrote; chunk rows seen by graph
version (real Milvus Lite)."""

from __future__ import annotations

import numpy as np
from pymilvus.client.types import LoadState

from lightrag_ray.storage.vectors import MilvusStore, chunk_vector_item, retire_vectors, vector_rows

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


def check_passages_by_graph_version(store: MilvusStore, wait=lambda check: None) -> None:
    """Chunk rows stamped with the graph version that publishes them (``since``) and retired at
    the one that removes them (``until``): a reader of each version finds exactly its passages
    (``visible_at``), rows without the fields at every version. ``wait(check)``: until a server
    shows the writes."""
    def chunk(i: int, since: int | None) -> dict:
        item = chunk_vector_item({"chunk_id": f"c{i}", "doc_id": f"d{i}", "file_path": "f.txt", "order": 0,
                                  "text": f"passage {i}"}, since)
        return vector_rows([item], [np.eye(DIM, dtype=np.float32)[0] + 0.01 * i])["chunks"][0]

    store.upsert("chunks", [chunk(0, None), chunk(1, 2), chunk(2, 3), chunk(3, None)])  # c2: the new version
    wait(lambda: len(store.get("chunks", ["c0", "c1"], ["id"])) == 2)  # rows a job retires are of earlier ones
    assert retire_vectors(store, "chunks", ["c0", "c1", "missing"], 3) == 2  # c0, c1: the old one

    def seen(version: int | None) -> set[str]:
        return {hit["id"] for hit in store.search("chunks", np.eye(DIM)[:1], 10, ["id"], version)[0]}

    wait(lambda: seen(None) == {"c0", "c1", "c2", "c3"} and seen(3) == {"c2", "c3"})
    assert seen(2) == {"c0", "c1", "c3"} and seen(3) == {"c2", "c3"} and seen(4) == {"c2", "c3"}
    assert seen(1) == {"c0", "c3"}  # c1 was published at 2
    [kept] = store.get("chunks", ["c0"], ["*", "vector"])
    assert kept["until"] == 3 and kept["text"] == "passage 0" and len(kept["vector"]) == DIM  # retired whole
    assert retire_vectors(store, "chunks", ["c0"], None) == 1  # the job that retired it was undone
    wait(lambda: seen(3) == {"c0", "c2", "c3"})
    assert seen(3) == {"c0", "c2", "c3"} and seen(10**6) == {"c0", "c2", "c3"}


def test_a_reader_of_each_graph_version_finds_its_passages_in_milvus_lite(tmp_path):
    store = MilvusStore(str(tmp_path / "milvus.db"), DIM)
    try:
        check_passages_by_graph_version(store)
    finally:
        store.close()
