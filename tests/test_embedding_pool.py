"""The indexing run's embedding actors: every batch comes back, even when a worker dies."""

from __future__ import annotations

import os
import signal

import numpy as np
import ray

from lightrag_ray.config import EmbeddingConfig
from lightrag_ray.index.embedding_pool import EmbeddingPool
from lightrag_ray.models.embedding import SentenceTransformerEmbedder

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
