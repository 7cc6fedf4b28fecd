"""Embedding actors for indexing runs.

A Ray Data actor pool lives for one dataset, but a run has texts to embed at two moments:
the chunks as soon as they are cut, the entities and relations once they are merged and
summarised. So the embedders are actors started at the beginning of the run: the model
loads while the LLM works, chunk vectors are computed during extraction, and the graph
texts go out sorted by length (little padding) the moment the graph is final. A caller that
runs many inserts (the Serve app) keeps one pool open and gives each run a ``lease`` of it,
so the model loads once.
"""

from __future__ import annotations

import copy
import logging
import threading
from typing import Any

import numpy as np
import ray

from lightrag_ray.config import EmbeddingConfig, MetricsConfig
from lightrag_ray.metrics.client import metrics
from lightrag_ray.models.embedding import MeteredEmbedder, make_embedder
from lightrag_ray.ray_runtime import niceness_options
from lightrag_ray.storage.vector_owner import VectorSink
from lightrag_ray.storage.vector_contract import VectorStore
from lightrag_ray.storage.vectors import vector_rows

Item = dict[str, Any]  # kind, id, text, meta (JSON)
LOG = logging.getLogger("ray.serve")  # KeptEmbeddingPool's users are Serve replicas: their log


@ray.remote
class EmbedWorker:
    """One embedding model in one actor; it stores what it embeds itself (``embed_and_store``),
    so vectors never pass through the caller."""

    def __init__(self, config: dict[str, Any], metrics_config: dict[str, Any]) -> None:
        metrics().configure(MetricsConfig.model_validate(metrics_config))
        self.embedder = make_embedder(EmbeddingConfig.model_validate(config))
        self.stored = MeteredEmbedder(self.embedder, "index")  # what is stored counts; a warm-up does not
        self.writers: dict[VectorSink, VectorStore] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        return self.embedder.embed(texts)

    def embed_and_store(self, items: list[Item], sink: VectorSink) -> int:
        """Embed ``items`` (kind, id, text, meta) and upsert their vectors into ``sink``;
        returns how many were stored."""
        if not items:
            return 0
        vectors = self.stored.embed([str(item["text"]) for item in items])
        writer = self.writers.get(sink)
        if writer is None:
            writer = self.writers[sink] = sink.open()
        for kind, rows in vector_rows(items, list(vectors)).items():
            writer.upsert(kind, rows)
        metrics().flush()  # the run's end kills its workers
        return len(items)


class EmbeddingPool:
    """``config.actors`` EmbedWorkers, which the run's stages give batches to embed and store
    (``index.stages.embed.store_items``).

    A worker that dies is restarted by Ray and its pending batches are retried there.
    ``niceness``: the workers' niceness (None: Ray's default; see ``niceness_options``).
    ``owner``: whether ``close`` kills the workers (False for a ``lease``). ``metrics``: the
    workers' metrics settings.
    """

    def __init__(self, config: EmbeddingConfig, niceness: int | None = None,
                 metrics: MetricsConfig | None = None) -> None:
        options: dict[str, Any] = {"num_cpus": config.num_cpus, "max_restarts": 3, "max_task_retries": -1,
                                   **niceness_options(niceness)}
        if config.num_gpus:
            options["num_gpus"] = config.num_gpus
        self.options, self.config = options, config.model_dump()
        self.metrics_config = (metrics or MetricsConfig()).model_dump()
        self.workers = [self._start_worker() for _ in range(config.actors)]
        self.batch_size = config.batch_size * 4
        self.owner = True

    def lease(self) -> EmbeddingPool:
        """A view of this pool for one run: the same workers, which closing it leaves up."""
        view = copy.copy(self)
        view.owner = False
        return view

    def _start_worker(self) -> Any:
        return EmbedWorker.options(**self.options).remote(self.config, self.metrics_config)  # type: ignore[attr-defined]  # (Ray adds it)

    def revive(self) -> int:
        """Replace the workers that are dead for good (Ray restarts a worker at most 3 times;
        a long-lived pool, the Serve app's, outlives that); returns how many were replaced.
        A worker that is restarting is waited for."""
        replaced = 0
        for number, worker in enumerate(self.workers):
            try:
                ray.get(worker.__ray_ready__.remote())
            except ray.exceptions.RayActorError:
                self.workers[number] = self._start_worker()
                replaced += 1
        return replaced

    def warm_up(self) -> int:
        """Wait until every worker has loaded its model (each embeds one short text); returns
        the vectors' dimension."""
        vectors = ray.get([worker.embed.remote(["warm up"]) for worker in self.workers])
        return int(vectors[0].shape[1])

    def close(self) -> None:
        """Kill the workers (a lease: leave them up); the pool cannot be used after."""
        if self.owner:
            for worker in self.workers:
                ray.kill(worker)
        self.workers = []


class KeptEmbeddingPool:
    """The embedding workers of a long-lived writer (the Serve app's workspace owner), shared
    by the insert jobs of all its workspaces: started by the first job at its niceness and kept
    until ``close``, so the model loads once; a worker that died for good (an earlier job's) is
    replaced, so one job's failures do not fail the later ones. Thread-safe: jobs of different
    workspaces run in threads of their own."""

    def __init__(self, config: EmbeddingConfig, metrics: MetricsConfig | None = None) -> None:
        self.config, self.metrics = config, metrics
        self.pool: EmbeddingPool | None = None
        self.lock = threading.Lock()

    def get(self, niceness: int | None) -> EmbeddingPool:
        """The open pool (a job leases it)."""
        with self.lock:
            if self.pool is None:
                self.pool = EmbeddingPool(self.config, niceness, self.metrics)
            elif replaced := self.pool.revive():
                LOG.warning("replaced %d embedding worker(s) that had died for good", replaced)
            return self.pool

    def close(self) -> None:
        with self.lock:
            if self.pool is not None:
                self.pool.close()
                self.pool = None
