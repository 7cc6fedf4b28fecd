"""A write-only Milvus Lite store (the indexing run's owner actor) upserts and deletes without
loading the vector indexes, and a later reader searches what it wrote; chunk rows seen by graph
version (real Milvus Lite)."""

from __future__ import annotations

import numpy as np
from pymilvus.client.types import LoadState

from lightrag_ray.storage.vectors import (
    KINDS, TEXT_SUFFIX, MilvusStore, chunk_vector_item, graph_vector_items, retire_vectors, vector_rows,
)

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

    def matched(version: int | None) -> set[str]:  # by BM25: every passage has the word
        return {hit["id"] for hit in store.text_search("chunks", ["Passage"], 10, ["id"], version)[0]}

    wait(lambda: seen(None) == {"c0", "c1", "c2", "c3"} and seen(3) == {"c2", "c3"})
    assert seen(2) == {"c0", "c1", "c3"} and seen(3) == {"c2", "c3"} and seen(4) == {"c2", "c3"}
    assert seen(1) == {"c0", "c3"}  # c1 was published at 2
    if "chunks" in store.text_kinds():
        assert [matched(v) for v in (None, 1, 2, 3)] == [seen(v) for v in (None, 1, 2, 3)]
        assert [h["id"] for h in store.text_search("chunks", ["passage 2"], 10, ["id"])[0]][0] == "c2"
    else:  # a server without BM25: no text hits
        assert matched(None) == set()
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


def old_collections(uri: str, prefix: str = "lightrag") -> None:
    """Dense-only collections as a workspace indexed before BM25 has them: a chunk row with its
    text, an entity and a relation row without."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri)
    vectors = np.eye(DIM, dtype=np.float32).tolist()
    for kind in KINDS:
        client.create_collection(f"{prefix}_{kind}", dimension=DIM, primary_field_name="id", id_type="string",
                                 max_length=64, vector_field_name="vector", metric_type="COSINE", auto_id=False,
                                 enable_dynamic_field=True)
    client.insert(f"{prefix}_chunks", [{"id": "c0", "vector": vectors[0], "text": "The zeppelin landed in Lakehurst."},
                                       {"id": "c1", "vector": vectors[1], "text": "A quiet harbour town."}])
    client.insert(f"{prefix}_entities", [{"id": "ent-0", "vector": vectors[2], "key": "HINDENBURG", "name": "Hindenburg"},
                                         {"id": "ent-1", "vector": vectors[3], "key": "LAKEHURST", "name": "Lakehurst"}])
    client.insert(f"{prefix}_relations", [{"id": "rel-0", "vector": vectors[4], "source_key": "HINDENBURG"}])
    client.close()


def test_an_old_workspace_searches_dense_only_until_its_collections_get_text_search(tmp_path):
    uri = str(tmp_path / "milvus.db")
    old_collections(uri)
    store = MilvusStore(uri, DIM)
    try:
        assert store.text_kinds() == [] and store.text_search("chunks", ["zeppelin"], 5) == [[]]
        assert store.search("chunks", np.eye(DIM)[:1], 1, ["id"])[0][0]["id"] == "c0"
        texts = {item["id"]: item["text"] for item in graph_vector_items({
            "entities": [{"id": "ent-0", "name": "Hindenburg", "description": "An airship that burned.", "key": "HINDENBURG",
                          "type": "object"}], "relations": []})}
        assert store.add_text_search("entities", texts) == 2 and store.add_text_search("chunks", {}) == 2
        assert store.add_text_search("chunks", {}) == 0  # done already
        assert store.text_kinds() == ["chunks", "entities"]
        assert [h["id"] for h in store.text_search("chunks", ["zeppelin"], 5, ["id"])[0]] == ["c0"]
        [[hit]] = store.text_search("entities", ["airship"], 5, ["id", "key", "vector"])
        assert hit["id"] == "ent-0" and hit["key"] == "HINDENBURG"
        assert store.search("entities", np.eye(DIM)[2:3], 1, ["id"])[0][0]["id"] == "ent-0"  # vectors kept
        assert store.get("entities", ["ent-1"], ["key", "name"])[0]["name"] == "Lakehurst"
        assert not store.client.has_collection("lightrag_chunks") and store.client.has_collection(f"lightrag_chunks{TEXT_SUFFIX}")
    finally:
        store.close()
    reopened = MilvusStore(uri, DIM)
    try:
        assert reopened.text_kinds() == ["chunks", "entities"]
        assert reopened.text_search("chunks", ["harbour"], 5, ["id"])[0][0]["id"] == "c1"
    finally:
        reopened.close()


def test_an_upgrade_cut_short_reads_the_old_collection_and_starts_again(tmp_path):
    uri = str(tmp_path / "milvus.db")
    old_collections(uri)
    from pymilvus import MilvusClient

    client = MilvusClient(uri)  # a half-copied collection beside the old one
    client.create_collection(f"lightrag_chunks{TEXT_SUFFIX}", dimension=DIM, primary_field_name="id", id_type="string",
                             max_length=64, vector_field_name="vector", auto_id=False, enable_dynamic_field=True)
    client.close()
    store = MilvusStore(uri, DIM)
    try:
        assert "chunks" not in store.text_kinds() and store.count("chunks") == 2
        assert store.add_text_search("chunks", {}) == 2 and store.count("chunks") == 2
        assert store.text_search("chunks", ["zeppelin"], 5, ["id"])[0][0]["id"] == "c0"
    finally:
        store.close()


def test_new_collections_search_text_and_keep_it_through_upserts(tmp_path):
    store = MilvusStore(str(tmp_path / "milvus.db"), DIM)
    try:
        assert store.text_kinds() == sorted(KINDS)
        items = graph_vector_items({"entities": [
            {"id": "ent-0", "name": "Obscurium", "description": "A rare metal.", "key": "OBSCURIUM", "type": "object"},
            {"id": "ent-1", "name": "Iron", "description": "A common metal.", "key": "IRON", "type": "object"}],
            "relations": []})
        store.upsert("entities", vector_rows(items, np.eye(DIM)[:2])["entities"])
        store.upsert("entities", [{"id": "ent-2", "vector": np.eye(DIM)[2], "key": "NO TEXT"}])  # a row without text
        assert [h["id"] for h in store.text_search("entities", ["obscurium metal"], 5, ["id"])[0]] == ["ent-0", "ent-1"]
        assert retire_vectors(store, "entities", ["ent-0"], 4) == 1  # read back whole and written again
        assert store.text_search("entities", ["obscurium"], 5, ["id"], 3)[0][0]["id"] == "ent-0"
        assert store.text_search("entities", ["obscurium"], 5, ["id"], 4) == [[]]
    finally:
        store.close()
