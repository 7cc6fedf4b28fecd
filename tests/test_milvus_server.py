"""Milvus in server mode: the same store code against http://host:port, written by several
Ray actors at once, as the workers of a cluster do (issue 6)."""

from __future__ import annotations

import numpy as np
import ray

from lightrag_ray.storage.vectors import MilvusStore

DIM = 8
WRITERS = 3
ROWS_EACH = 200


def _vector(seed: int) -> list[float]:
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return (vector / np.linalg.norm(vector)).tolist()


@ray.remote(num_cpus=0.1)
class Writer:
    """One process with its own client on the server."""

    def __init__(self, uri: str) -> None:
        self.store = MilvusStore(uri, DIM, prefix="writers")

    def write(self, first: int, count: int, batch: int = 25) -> int:
        written = 0
        for start in range(first, first + count, batch):
            rows = [{"id": f"ent-{i}", "vector": _vector(i), "entity_name": f"E{i}"}
                    for i in range(start, min(start + batch, first + count))]
            written += self.store.upsert("entities", rows)
        return written


def test_actors_write_one_server_concurrently_and_upserts_replace(ray_cluster, milvus_server):
    writers = [Writer.remote(milvus_server) for _ in range(WRITERS)]
    # Each writer owns a range, and the ranges overlap by 50 ids: those are upserted twice.
    step = ROWS_EACH - 50
    written = ray.get([w.write.remote(n * step, ROWS_EACH) for n, w in enumerate(writers)])
    assert written == [ROWS_EACH] * WRITERS

    store = MilvusStore(milvus_server, DIM, prefix="writers")
    try:
        distinct = step * (WRITERS - 1) + ROWS_EACH
        assert store.count("entities") == distinct
        probe = 2 * step + 7  # written by the last writer only
        [hits] = store.search("entities", [_vector(probe)], top_k=1, output_fields=["entity_name"])
        assert hits[0]["id"] == f"ent-{probe}" and hits[0]["entity_name"] == f"E{probe}"
        assert hits[0]["score"] > 0.999
        overlapped = store.get("entities", [f"ent-{step + 3}"], output_fields=["entity_name"])
        assert [row["entity_name"] for row in overlapped] == [f"E{step + 3}"]
    finally:
        store.close()
        for writer in writers:
            ray.kill(writer)
