"""The graph shard actor: a thin Ray wrapper around ShardGraph with snapshots."""

from __future__ import annotations

import uuid
from typing import Any

import ray

from lightrag_ray.core.merge import ShardGraph
from lightrag_ray.core.tokenizer import count_tokens
from lightrag_ray.storage.graph_snapshot import load_snapshot, save_snapshot
from lightrag_ray.storage.workspace import Workspace


@ray.remote
class GraphShard:
    """Owns the entities whose key hashes to ``shard``; reloads its snapshot on (re)start."""

    def __init__(self, workspace_uri: str, shard: int, num_shards: int, max_source_ids: int) -> None:
        self.workspace = Workspace(workspace_uri)
        self.graph = ShardGraph(shard, num_shards, max_source_ids)
        load_snapshot(self.workspace, self.graph)
        self.incarnation = uuid.uuid4().hex  # changes when Ray restarts the actor

    # Every method answers (incarnation, result) so the router can tell that the actor
    # was restarted from its snapshot and replay what it sent since then.
    def ping(self) -> tuple[str, None]:
        return self.incarnation, None

    def apply(self, entities: list[dict[str, Any]], relations: list[dict[str, Any]]) -> tuple[str, None]:
        self.graph.apply(entities, relations)
        return self.incarnation, None

    def remove_chunks(self, chunk_ids: list[str]) -> tuple[str, None]:
        self.graph.remove_chunks(set(chunk_ids))
        return self.incarnation, None

    def drop(self, keys: list[str], pairs: list[tuple[str, str]]) -> tuple[str, None]:
        self.graph.drop(keys, pairs)
        return self.incarnation, None

    def mention_rows(self, keys: list[str]) -> tuple[str, dict[str, list[Any]]]:
        """The live mention rows of the owned entities ``keys`` and their relations."""
        return self.incarnation, self.graph.mention_rows(keys)

    def add_summaries(self, summaries: dict[str, str]) -> tuple[str, None]:
        self.graph.add_summaries(summaries)
        return self.incarnation, None

    def pending_summaries(self, max_fragments: int, max_tokens: int) -> tuple[str, list[dict[str, Any]]]:
        return self.incarnation, self.graph.pending_summaries(max_fragments, max_tokens, count_tokens)

    def take_changes(self) -> tuple[str, dict[str, list[Any]]]:
        return self.incarnation, self.graph.take_changes()

    def begin(self) -> tuple[str, None]:
        """Open a write job: readers keep the published graph until publish or rollback."""
        self.graph.begin()
        return self.incarnation, None

    def publish(self) -> tuple[str, None]:
        self.graph.publish()
        return self.incarnation, None

    def rollback(self) -> tuple[str, None]:
        self.graph.rollback()
        return self.incarnation, None

    def save(self) -> tuple[str, None]:
        save_snapshot(self.workspace, self.graph)
        return self.incarnation, None

    def counts(self) -> tuple[str, dict[str, int]]:
        return self.incarnation, self.graph.counts()

    def export(self) -> tuple[str, dict[str, list[dict[str, Any]]]]:
        return self.incarnation, self.graph.export()

    # Reads for readers answer from the published graph (ShardGraph), the others from the live one.
    def labels(self) -> tuple[str, list[str]]:
        """Display names of the owned entities."""
        return self.incarnation, self.graph.labels()

    def fetch(self, keys: list[str], pairs: list[tuple[str, str]]) -> tuple[str, dict[str, list[dict[str, Any]]]]:
        """Merged views of the owned entities ``keys`` and owned relations ``pairs``."""
        return self.incarnation, self.graph.fetch(keys, pairs)

    def neighborhood(self, keys: list[str], max_relations: int | None = None) -> tuple[str, dict[str, list[dict[str, Any]]]]:
        """Owned entities among ``keys`` and their incident relations, the best
        ``max_relations`` of them when given (see ShardGraph.neighborhood)."""
        return self.incarnation, self.graph.neighborhood(keys, max_relations)

    def passage_entities(self, chunk_ids: list[str], keys: list[str], max_chunks: int) -> tuple[str, list[dict[str, Any]]]:
        """Owned entities of ``keys`` or of the passages ``chunk_ids``, with their passages."""
        return self.incarnation, self.graph.passage_entities(chunk_ids, keys, max_chunks)
