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
from lightrag_ray.storage.vectors import open_store
from tests.test_index_pipeline import DOC_A, DOC_B

TEXTS = [f"Passage {i}: Ebenezer Scrooge counts coins {'again ' * (i % 7)}in London." for i in range(40)]


def _items(texts: list[str]) -> list[dict]:
    return [{"kind": "chunks", "id": f"c{i}", "text": t, "meta": "{}"} for i, t in enumerate(texts)]


def _collect(pool: EmbeddingPool) -> dict[str, np.ndarray]:
    return {item["id"]: vector for items, vectors in pool.completed() for item, vector in zip(items, vectors)}


def test_pool_returns_every_item_with_the_models_vector(ray_cluster):
    pool = EmbeddingPool(EmbeddingConfig(batch_size=4, num_cpus=0.1))  # batches of 16 texts
    try:
        pool.submit(_items(TEXTS))
        assert len(pool.pending) == 3
        got = _collect(pool)
    finally:
        pool.close()
    assert sorted(got) == sorted(f"c{i}" for i in range(len(TEXTS)))
    local = SentenceTransformerEmbedder(EmbeddingConfig()).embed([TEXTS[5], TEXTS[33]])
    np.testing.assert_allclose(got["c5"], local[0], atol=1e-5)
    np.testing.assert_allclose(got["c33"], local[1], atol=1e-5)


def test_pool_retries_batches_of_a_worker_that_died(ray_cluster):
    pool = EmbeddingPool(EmbeddingConfig(batch_size=4, num_cpus=0.1))
    try:
        pool.submit(_items(TEXTS[:4]))
        assert len(_collect(pool)) == 4  # the worker is up
        pid = ray.get(pool.workers[0].__ray_call__.remote(lambda self: os.getpid()))
        pool.submit(_items(TEXTS))
        os.kill(pid, signal.SIGKILL)
        got = _collect(pool)
    finally:
        pool.close()
    assert len(got) == len(TEXTS)
    assert all(np.isclose(np.linalg.norm(v), 1.0, atol=1e-4) for v in got.values())


def _worker_niceness(niceness: int | None) -> int:
    pool = EmbeddingPool(EmbeddingConfig(batch_size=4, num_cpus=0.1), niceness=niceness)
    try:
        pool.submit(_items(TEXTS[:4]))
        assert len(_collect(pool)) == 4
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
        assert _worker_identity(pool) == loaded and not pool.pending  # same actor, process and model
        pool.submit(_items([DOC_A, DOC_B]))  # still up for the caller
        vectors = _collect(pool)
    finally:
        pool.close()  # the caller's job: the runs left it open
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(_items(["too late"]))
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
        pool.submit(_items(TEXTS))
        got = _collect(pool)
    finally:
        pool.close()
    assert len(got) == len(TEXTS)
