"""MilvusStore on a real Milvus server (the 2.3 standalone binary, tests/milvus_standalone.py):
HNSW collections, each stored vector found first, get/delete, a second client (as a second
process would open) seeing the same rows, and chunk rows seen by graph version; no BM25 there."""

from __future__ import annotations

import logging
import time
from typing import Callable

import numpy as np
import pytest

from lightrag_ray.storage.vectors import KINDS, MilvusStore
from tests.milvus_standalone import override
from tests.test_vector_store import DIM as SMALL_DIM, check_passages_by_graph_version

DIM, ROWS, PROBES, TOP_K = 384, 3000, 100, 40


def _eventually(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Wait for ``check`` (the default Bounded consistency shows writes after a moment)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the server did not show the writes in time"
        time.sleep(0.2)


def _search_finds_each_probe_first(store: MilvusStore, vectors: np.ndarray, ids: list[str], probes: np.ndarray) -> None:
    hits = store.search("entities", vectors[probes], top_k=TOP_K, output_fields=["name"])
    assert [h[0]["id"] for h in hits] == [ids[p] for p in probes]
    assert all(len(h) == TOP_K and h[0]["score"] > 0.999 and h[0]["name"] == f"E{p}" for h, p in zip(hits, probes))


def test_store_on_a_milvus_server(milvus_standalone):
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"ent-{i:05d}" for i in range(ROWS)]
    probes = rng.choice(ROWS, PROBES, replace=False)
    store = MilvusStore(milvus_standalone, DIM, prefix="standalone")
    other = None
    try:
        name = store.names["entities"]
        index = store.client.describe_index(name, "vector")
        assert (index["index_type"], index["metric_type"], index["M"], index["efConstruction"]) == (
            "HNSW", "COSINE", "16", "200")
        for start in range(0, ROWS, 1000):
            rows = [{"id": ids[i], "vector": vectors[i], "name": f"E{i}", "rank": i} for i in range(start, start + 1000)]
            assert store.upsert("entities", rows) == 1000
        _eventually(lambda: store.count("entities") == ROWS)
        _search_finds_each_probe_first(store, vectors, ids, probes)  # growing segment

        store.client.flush(name)  # seal the segment: the server builds its HNSW index
        _eventually(lambda: store.client.describe_index(name, "vector")["indexed_rows"] == ROWS, timeout_s=60)
        _search_finds_each_probe_first(store, vectors, ids, probes)

        rows = store.get("entities", [ids[3], ids[5]], output_fields=["name", "rank"])
        assert sorted((r["id"], r["name"], r["rank"]) for r in rows) == [(ids[3], "E3", 3), (ids[5], "E5", 5)]

        other = MilvusStore(milvus_standalone, DIM, prefix="standalone")  # a second client on the same rows
        assert other.count("entities") == ROWS
        _search_finds_each_probe_first(other, vectors, ids, probes[:10])
        store.delete("entities", ids[:10])
        store.upsert("entities", [{"id": ids[20], "vector": vectors[20], "name": "renamed", "rank": 20}])
        _eventually(lambda: other.count("entities") == ROWS - 10)
        assert other.get("entities", ids[:10]) == []
        [hits] = other.search("entities", vectors[:1], top_k=5)
        assert ids[0] not in {h["id"] for h in hits}
        _eventually(lambda: [r["name"] for r in other.get("entities", [ids[20]], ["name"])] == ["renamed"])
    finally:
        for client in (other, store):
            if client is not None:
                client.close()


def test_a_reader_of_each_graph_version_finds_its_passages_on_a_2_3_server(milvus_standalone, caplog):
    """The version filter (storage.vectors.visible_at) as a Milvus 2.3 server evaluates it; the
    server has no BM25: dense collections, no text hits, one notice."""
    with caplog.at_level(logging.WARNING, logger="lightrag_ray.storage.vectors"):
        store = MilvusStore(milvus_standalone, SMALL_DIM, prefix="versions")
        MilvusStore(milvus_standalone, SMALL_DIM, prefix="versions").close()  # a second store: no second notice
    notices = [r.getMessage() for r in caplog.records if "does not do BM25" in r.getMessage()]
    assert len(notices) == 1 and "versions_*" in notices[0]
    try:
        assert store.text_kinds() == [] and sorted(store.names.values()) == [f"versions_{k}" for k in sorted(KINDS)]
        check_passages_by_graph_version(store, _eventually)
    finally:
        store.close()


def test_a_setting_the_milvus_config_lacks_fails_instead_of_doing_nothing():
    config = {"rocksmq": {"compactionInterval": 86400, "path": "/data"}, "dataNode": {"segment": {"syncPeriod": 600}}}
    override(config, {"rocksmq": {"compactionInterval": 120}, "dataNode": {"segment": {"syncPeriod": 60}}})
    assert config == {"rocksmq": {"compactionInterval": 120, "path": "/data"}, "dataNode": {"segment": {"syncPeriod": 60}}}
    with pytest.raises(KeyError, match="dataNode.segment.syncPeriodInSeconds"):
        override(config, {"dataNode": {"segment": {"syncPeriodInSeconds": 60}}})
