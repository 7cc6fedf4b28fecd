"""Stage ``embed``: texts -> vectors -> Milvus, by the run's embedding actors, which store the
vectors themselves (storage.vector_owner.VectorSink: a Milvus server, or the actor owning a
Milvus Lite file), so no vector passes through the driver.

- ``EmbedChunks`` (a batch stage, before extraction): the chunks' texts.
- ``embed_graph_changes`` (after the merge and the summaries): each shard's change feed, a page
  at a time by a task per shard; changed entities and relations are embedded and stored,
  removed ones deleted (or returned, for a write job with readers to delete once published).

Chunk vectors are stamped with the graph version that publishes them (``ChunkStamp``), so that
readers of the version before find only the passages of theirs (storage.vectors.visible_at).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray

from lightrag_ray.core.graph.contract import GraphOperations
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


@dataclass(frozen=True)
class ChunkStamp:
    """The graph version from which readers see a run's chunk vectors (``since``; None: at every
    version), but for the chunks of documents moved to another path (``moved_docs``): their text
    is the one readers already see, so they stay visible while their path changes."""

    since: int | None = None
    moved_docs: frozenset[str] = frozenset()

    def item(self, row: Row) -> Row:
        """The vector item (storage.vectors.chunk_vector_item) of one chunk row."""
        return chunk_vector_item(row, None if row["doc_id"] in self.moved_docs else self.since)


class EmbedChunks:
    """Chunk rows -> [count row] (``vectors``), once the chunks' vectors are stored by the
    embedding actors."""

    def __init__(self, workers: list[Any], sink: VectorSink, batch_size: int, stamp: ChunkStamp = ChunkStamp()) -> None:
        self.workers, self.sink, self.batch_size, self.stamp = workers, sink, batch_size, stamp

    def __call__(self, chunks: list[Row]) -> list[Row]:
        return [{"vectors": store_items(self.workers, self.sink, [self.stamp.item(c) for c in chunks],
                                        self.batch_size)}]


@ray.remote
def _embed_shard_page(shards: ShardHandles, shard: int, workers: list[Any], sink: VectorSink,
                      batch_size: int, delete: bool) -> tuple[int, list[str]]:
    """One page of one shard's change feed embedded and stored, its removed items' vectors
    deleted (``delete``) or not; returns (items stored, ids removed), (0, []) once the feed is empty."""
    changes = shards.on_shard(shard, GraphOperations.take_changes, CHANGES_PAGE)
    stored = store_items(workers, sink, graph_vector_items(changes), batch_size)
    if changes["removed"] and delete:
        with sink.writing() as writer:
            delete_graph_vectors(writer, changes["removed"])
    return stored, changes["removed"]


@dataclass
class GraphVectorCounts:
    """What ``embed_graph_changes`` did: vectors stored, and the removed items' ids."""

    vectors: int = 0
    removed: list[str] = field(default_factory=list)


def embed_graph_changes(shards: ShardHandles, workers: list[Any], sink: VectorSink, batch_size: int,
                        task_options: dict[str, Any], progress: Callable[[int], None],
                        delete: bool = True) -> GraphVectorCounts:
    """Every shard's changed entities and relations embedded and stored, removed ones deleted
    (``delete=False``: left to the caller, whose readers still find them until its job is
    published): one task per shard at a time, page after page until its feed is empty
    (``progress`` hears of every page's items)."""
    def page(shard: int) -> Any:
        return _embed_shard_page.options(**task_options).remote(shards, shard, workers, sink, batch_size, delete)

    running = {page(i): i for i in range(shards.num_shards)}
    totals = GraphVectorCounts()
    while running:
        [ready], _ = ray.wait(list(running), num_returns=1)
        shard = running.pop(ready)
        stored, removed = ray.get(ready)
        totals.vectors += stored
        totals.removed += removed
        if stored or removed:
            progress(stored + len(removed))
            running[page(shard)] = shard
    return totals
