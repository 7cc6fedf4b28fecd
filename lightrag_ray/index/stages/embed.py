"""Stage ``embed``: texts -> vectors -> Milvus, by the run's embedding actors, which store the
vectors themselves (storage.vector_owner.VectorSink: a Milvus server, or the actor owning a
Milvus Lite file), so no vector passes through the driver.

- ``EmbedChunks`` (a batch stage, before extraction): the chunks' texts.
- ``embed_graph_changes`` (after the merge and the summaries): each shard's change feed, a page
  at a time by a task per shard; changed entities and relations are embedded and stored,
  removed ones deleted.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import ray

from lightrag_ray.core.graph.contract import operation
from lightrag_ray.storage.graph.handles import ShardHandles
from lightrag_ray.storage.vector_owner import VectorSink
from lightrag_ray.storage.vectors import chunk_vector_item, delete_graph_vectors, graph_vector_items

Row = dict[str, Any]
CHANGES_PAGE = 2048  # changed items a task takes from its shard at a time


def store_items(workers: list[Any], sink: VectorSink, items: list[Row], batch_size: int) -> int:
    """Embed and store ``items`` (kind, id, text, meta) over the ``workers`` (EmbedWorker
    actors), shortest texts together (little padding); returns how many were stored."""
    ordered = sorted(items, key=lambda item: len(item["text"]))
    turn = itertools.cycle(workers)
    refs = [next(turn).embed_and_store.remote(ordered[start : start + batch_size], sink)
            for start in range(0, len(ordered), batch_size)]
    return sum(ray.get(refs))


class EmbedChunks:
    """Chunk rows -> [count row] (``vectors``), once the chunks' vectors are stored by the
    embedding actors."""

    def __init__(self, workers: list[Any], sink: VectorSink, batch_size: int) -> None:
        self.workers, self.sink, self.batch_size = workers, sink, batch_size

    def __call__(self, chunks: list[Row]) -> list[Row]:
        return [{"vectors": store_items(self.workers, self.sink, [chunk_vector_item(c) for c in chunks],
                                        self.batch_size)}]


@ray.remote
def _embed_shard_page(shards: ShardHandles, shard: int, workers: list[Any], sink: VectorSink,
                      batch_size: int) -> tuple[int, int]:
    """One page of one shard's change feed embedded and stored, its removed items' vectors
    deleted; returns (items stored, items removed), (0, 0) once the feed is empty."""
    changes = shards.on_shard(shard, operation("take_changes"), CHANGES_PAGE)
    stored = store_items(workers, sink, graph_vector_items(changes), batch_size)
    if changes["removed"]:
        writer = sink.open()
        try:
            delete_graph_vectors(writer, changes["removed"])
        finally:
            writer.close()
    return stored, len(changes["removed"])


def embed_graph_changes(shards: ShardHandles, workers: list[Any], sink: VectorSink, batch_size: int,
                        task_options: dict[str, Any], progress: Callable[[int], None]) -> dict[str, int]:
    """Every shard's changed entities and relations embedded and stored, removed ones deleted:
    one task per shard at a time, page after page until its feed is empty (``progress`` hears
    of every page's items); returns the counts (``vectors``, ``removed``)."""
    def page(shard: int) -> Any:
        return _embed_shard_page.options(**task_options).remote(shards, shard, workers, sink, batch_size)

    running = {page(i): i for i in range(shards.num_shards)}
    totals = {"vectors": 0, "removed": 0}
    while running:
        [ready], _ = ray.wait(list(running), num_returns=1)
        shard = running.pop(ready)
        stored, removed = ray.get(ready)
        totals["vectors"] += stored
        totals["removed"] += removed
        if stored or removed:
            progress(stored + removed)
            running[page(shard)] = shard
    return totals
