"""Milvus in server mode: the same store code against http://host:port, written by several
Ray actors at once, as the workers of a cluster do (issue 6)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import ray

from lightrag_ray.storage.vectors import KINDS, MilvusStore
from tests.test_milvus_standalone import _eventually as wait_until
from tests.test_vector_store import check_passages_by_graph_version, old_collections

ROOT = Path(__file__).resolve().parents[1]
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


IDLE_SCRIPT = """
import sys, time
import numpy as np
from lightrag_ray.storage.vectors import KINDS, MilvusStore
from tests.test_milvus_standalone import _eventually as wait_until
from tests.test_vector_store import check_passages_by_graph_version, old_collections
uri = sys.argv[1]
first = MilvusStore(uri, 8, prefix="idle")
first.upsert("entities", [{"id": "ent-1", "vector": np.ones(8, dtype=np.float32), "entity_name": "E1"}])
time.sleep(2)  # the ping gRPC sends with the last response (bandwidth probe) is not an idle one
print("IDLE-START", file=sys.stderr, flush=True)
time.sleep(25)  # pymilvus's idle pings would come at 10 s and 20 s
print("IDLE-END", file=sys.stderr, flush=True)
second = MilvusStore(uri, 8, prefix="idle")
[hits] = second.search("entities", [np.ones(8, dtype=np.float32)], top_k=1, output_fields=["entity_name"])
print(hits[0]["entity_name"])
"""


def test_an_idle_connection_sends_no_pings_the_server_would_count_as_strikes(milvus_server):
    """pymilvus pings idle channels every 10 s; a gRPC server on default settings (milvus-lite's)
    counts each idle ping as a strike and answers the third with GOAWAY "too many pings", which
    broke the next store opened after a quiet minute (the multinode scenario, CI 2026-12-02). The
    gRPC core's own trace shows whether the client pinged while nothing was in flight."""
    env = {**os.environ, "GRPC_VERBOSITY": "debug", "GRPC_TRACE": "http_keepalive", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", IDLE_SCRIPT, milvus_server], env=env, capture_output=True,
                          text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "E1"
    idle = done.stderr.split("IDLE-START", 1)[1].split("IDLE-END", 1)[0]
    assert "Ping" not in idle and "goaway" not in idle.lower(), idle[-2000:]


def test_milvus_lites_server_searches_text_by_graph_version(milvus_server):
    """BM25 beside the vectors on a server that has it (milvus-lite's gRPC server, as Milvus 2.5+)."""
    store = MilvusStore(milvus_server, DIM, prefix="bm25")
    try:
        assert store.text_kinds() == sorted(KINDS)
        check_passages_by_graph_version(store, wait_until)
    finally:
        store.close()


def test_a_reader_sees_the_collections_another_process_gave_text_search(milvus_server):
    """A server's collections upgraded by another process (an index run, `lightrag-ray upgrade`):
    a reader opened before finds the new collections by itself, its old one being gone."""
    old_collections(milvus_server, prefix="upgraded")
    reader = MilvusStore(milvus_server, DIM, prefix="upgraded")
    writer = MilvusStore(milvus_server, DIM, prefix="upgraded", searchable=False)
    try:
        assert reader.text_kinds() == []
        wait_until(lambda: writer.add_text_search("chunks", {}) == 2)
        assert reader.text_kinds() == ["chunks"]
        wait_until(lambda: [h["id"] for h in reader.text_search("chunks", ["zeppelin"], 5, ["id"])[0]] == ["c0"])
        assert reader.get("chunks", ["c1"], ["text"])[0]["text"] == "A quiet harbour town."
    finally:
        reader.close()
        writer.close()
