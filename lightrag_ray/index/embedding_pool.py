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
from collections.abc import Iterator
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
    """``config.actors`` EmbedWorkers; ``submit`` items, then collect ``completed`` batches.

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
        self.max_in_flight = 2 * len(self.workers)  # one running and one queued per worker
        self.pending: dict[ray.ObjectRef, list[Item]] = {}
        self._turn = 0
        self.owner = True

    def lease(self) -> EmbeddingPool:
        """A view of this pool for one run (or one thread of it): the same workers, its own
        pending batches. Closing it forgets its batches and leaves the workers up, so a run that
        failed with batches in flight hands none of them to the next run."""
        view = copy.copy(self)
        view.pending, view.owner = {}, False
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

    def submit(self, items: list[Item]) -> None:
        """Queue ``items`` for embedding, shortest texts first, spread over the workers."""
        if not self.workers:
            raise RuntimeError("this embedding pool is closed: open a new EmbeddingPool, or lease an open one")
        ordered = sorted(items, key=lambda item: len(item["text"]))
        for start in range(0, len(ordered), self.batch_size):
            batch = ordered[start : start + self.batch_size]
            worker = self.workers[self._turn % len(self.workers)]
            self._turn += 1
            self.pending[worker.embed.remote([str(item["text"]) for item in batch])] = batch

    def completed(self, leave: int = 0) -> Iterator[tuple[list[Item], np.ndarray]]:
        """Submitted batches with their vectors, in order of completion, until at most
        ``leave`` are still pending."""
        while len(self.pending) > leave:
            ready, _ = ray.wait(list(self.pending), num_returns=1)
            for ref in ready:
                yield self.pending.pop(ref), ray.get(ref)

    def close(self) -> None:
        """Kill the workers (a lease: only forget its batches); the pool cannot be used after."""
        if self.owner:
            for worker in self.workers:
                ray.kill(worker)
        self.workers, self.pending = [], {}


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
