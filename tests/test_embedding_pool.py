"""The indexing run's embedding actors: every batch comes back, even when a worker dies, and
runs given an open pool (the Serve app's) use its workers and leave them up."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import ray

from lightrag_ray.config import EmbeddingConfig
from lightrag_ray.index.embedding_pool import EmbeddingPool
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.models.embedding import SentenceTransformerEmbedder
from lightrag_ray.index.stages.embed import store_items
from lightrag_ray.storage.vector_owner import VectorSink
from lightrag_ray.storage.vectors import chunk_vector_item, open_store
from tests.test_index_pipeline import DOC_A, DOC_B

DIM = 384  # the packaged MiniLM's
TEXTS = [f"Passage {i}: Ebenezer Scrooge counts coins {'again ' * (i % 7)}in London." for i in range(40)]


def _items(texts: list[str]) -> list[dict]:
    return [chunk_vector_item({"chunk_id": f"c{i}", "doc_id": "d", "file_path": "f.txt", "order": i, "text": t})
            for i, t in enumerate(texts)]


def _stored(settings, texts: list[str]) -> dict[str, np.ndarray]:
    """The vectors of ``_items(texts)`` as stored in the settings' Milvus, by id."""
    store = open_store(settings, DIM)
    try:
        rows = store.get("chunks", [f"c{i}" for i in range(len(texts))], ["id", "vector"])
    finally:
        store.close()
    return {row["id"]: np.asarray(row["vector"], dtype=np.float32) for row in rows}


@pytest.fixture
def server_settings(make_settings, milvus_server, request):
    """Settings whose vectors go to the session's Milvus server, in collections of this test's own."""
    return make_settings(vectors={"uri": milvus_server, "collection_prefix": f"pool_{request.node.name[-20:]}"})


def test_pool_stores_every_item_with_the_models_vector(ray_cluster, server_settings):
    pool = EmbeddingPool(EmbeddingConfig(batch_size=4, num_cpus=0.1))  # batches of 16 texts
    try:
        assert store_items(pool.workers, VectorSink.of(server_settings, DIM), _items(TEXTS), pool.batch_size) == len(TEXTS)
    finally:
        pool.close()
    got = _stored(server_settings, TEXTS)
    assert sorted(got) == sorted(f"c{i}" for i in range(len(TEXTS)))
    local = SentenceTransformerEmbedder(EmbeddingConfig()).embed([TEXTS[5], TEXTS[33]])
    np.testing.assert_allclose(got["c5"], local[0], atol=1e-5)
    np.testing.assert_allclose(got["c33"], local[1], atol=1e-5)


def test_pool_retries_batches_of_a_worker_that_died(ray_cluster, server_settings):
    pool = EmbeddingPool(EmbeddingConfig(batch_size=4, num_cpus=0.1))
    sink = VectorSink.of(server_settings, DIM)
    try:
        worker = pool.workers[0]
        assert ray.get(worker.embed_and_store.remote(_items(TEXTS[:4]), sink)) == 4  # the worker is up
        pid = ray.get(worker.__ray_call__.remote(lambda self: os.getpid()))
        items = _items(TEXTS)
        refs = [worker.embed_and_store.remote(items[start : start + 8], sink) for start in range(0, len(items), 8)]
        os.kill(pid, signal.SIGKILL)
        assert sum(ray.get(refs)) == len(TEXTS)
    finally:
        pool.close()
    got = _stored(server_settings, TEXTS)
    assert len(got) == len(TEXTS)
    assert all(np.isclose(np.linalg.norm(v), 1.0, atol=1e-4) for v in got.values())


def _worker_niceness(niceness: int | None) -> int:
    pool = EmbeddingPool(EmbeddingConfig(batch_size=4, num_cpus=0.1), niceness=niceness)
    try:
        assert ray.get(pool.workers[0].embed.remote(TEXTS[:4])).shape == (4, DIM)
        return ray.get(pool.workers[0].__ray_call__.remote(lambda self: os.nice(0)))
    finally:
        pool.close()


def test_background_pool_runs_at_the_niceness_asked(ray_cluster):
    assert (_worker_niceness(None), _worker_niceness(10)) == (15, 10)  # Ray's default, then the job's


def _worker_identity(pool: EmbeddingPool) -> tuple[str, int, int]:
    """(actor id, process id, id of the loaded model object) of the pool's worker."""
    return ray.get(pool.workers[0].__ray_call__.remote(
        lambda self: (ray.get_runtime_context().get_actor_id(), os.getpid(), id(self.embedder))))


def test_runs_given_a_pool_use_its_worker_and_leave_it_up(ray_cluster, llm, make_settings, tmp_path):
    settings = make_settings()
    pool = EmbeddingPool(settings.embedding)
    try:
        dim = pool.warm_up()
        loaded = _worker_identity(pool)
        reports = []
        for name, text in (("a.txt", DOC_A), ("b.txt", DOC_B)):
            (tmp_path / name).write_text(text, encoding="utf-8")
            reports.append(index_paths([str(tmp_path / name)], settings, progress=None, embedding_pool=pool))
        assert [(r.docs_new, r.chunks_failed) for r in reports] == [(1, 0), (1, 0)]
        assert all(r.vectors_upserted > r.chunks for r in reports)  # chunks, entities and relations
        assert _worker_identity(pool) == loaded  # same actor, process and model
        vectors = dict(zip(["c0", "c1"], ray.get(pool.workers[0].embed.remote([DOC_A, DOC_B]))))  # still up
    finally:
        pool.close()  # the caller's job: the runs left it open
    assert pool.workers == []
    store = open_store(settings, dim)
    try:
        hits = store.search("chunks", [vectors["c0"], vectors["c1"]], 1, output_fields=["file_path"])
    finally:
        store.close()
    assert [h[0]["file_path"].rsplit("/", 1)[-1] for h in hits] == ["a.txt", "b.txt"]  # both runs' vectors


def test_a_worker_dead_for_good_is_replaced_so_later_runs_work(ray_cluster):
    """The Serve app keeps one pool for all insert jobs: a worker past Ray's 3 restarts stayed
    dead and failed every later job until the app restarted (issue 29)."""
    pool = EmbeddingPool(EmbeddingConfig(batch_size=4, num_cpus=0.1, actors=2))
    try:
        assert pool.revive() == 0  # all alive: nothing replaced
        dead = pool.workers[0]
        ray.kill(dead, no_restart=True)  # as after its last restart
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(dead.embed.remote(["x"]))
        assert pool.revive() == 1 and pool.workers[0] is not dead and pool.workers[1] is not None
        embedded = ray.get([worker.embed.remote(TEXTS) for worker in pool.workers])
    finally:
        pool.close()
    assert [vectors.shape for vectors in embedded] == [(len(TEXTS), DIM)] * 2
