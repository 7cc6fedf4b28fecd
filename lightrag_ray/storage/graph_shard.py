"""The graph shard actor: a thin Ray wrapper around ShardGraph with its files (a base and
one delta per committed job, storage/graph_snapshot.py)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import ray

from lightrag_ray.core.alias_rules import NameRow
from lightrag_ray.core.merge import ShardGraph
from lightrag_ray.core.tokenizer import count_tokens
from lightrag_ray.storage.graph_snapshot import load_snapshot, save_snapshot, snapshot_folder, tidy
from lightrag_ray.storage.workspace import Workspace


@ray.remote
class GraphShard:
    """Owns the entities whose key hashes to ``shard``; reloads its committed state on (re)start.

    ``compaction_ratio``: a job's changes are saved as a delta; once the deltas outgrow this
    share of the base, a thread folds them into a new base (and a job that changed this share of
    the shard's items saves a whole base at once)."""

    def __init__(self, workspace_uri: str, shard: int, num_shards: int, max_source_ids: int,
                 compaction_ratio: float = 0.5) -> None:
        self.workspace = Workspace(workspace_uri)
        self.graph = ShardGraph(shard, num_shards, max_source_ids)
        self.folder = snapshot_folder(shard, num_shards)
        self.compaction_ratio = compaction_ratio
        load_snapshot(self.workspace, self.graph)
        self.tidying: threading.Thread | None = None
        self.incarnation = uuid.uuid4().hex  # changes when Ray restarts the actor

    # Every method answers (incarnation, result) so the router can tell that the actor
    # was restarted from its committed files and replay what it sent since then.
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

    def new_names(self) -> tuple[str, list[NameRow]]:
        """(key, name) of the owned entities created since the last call (the alias pass)."""
        return self.incarnation, self.graph.new_names()

    def block_members(self, blocks: list[str], limit: int) -> tuple[str, dict[str, list[NameRow]]]:
        """Per alias block key, the owned entities in it as (key, name), at most ``limit + 1``."""
        return self.incarnation, self.graph.block_members(blocks, limit)

    def relink_all(self) -> tuple[str, None]:
        """Every owned entity counts as new for the next alias pass."""
        self.graph.relink_all()
        return self.incarnation, None

    def set_aliases(self, verdicts: list[tuple[str, str, str | None]]) -> tuple[str, int]:
        """Link (reason) or unlink (None) pairs of entity keys at the owned ends."""
        return self.incarnation, self.graph.set_aliases(verdicts)

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

    def save(self, version: int) -> tuple[str, str]:
        """Write the changes since the last commit as graph version ``version`` ("delta",
        "base" or "none"); they count once the manifest says ``version``."""
        return self.incarnation, save_snapshot(self.workspace, self.graph, version, self.compaction_ratio)

    def committed(self, version: int) -> tuple[str, None]:
        """``version`` is committed: start a new change set, and compact or remove replaced
        files in a background thread (at most one at a time)."""
        self.graph.mark_saved()
        if self.tidying is None or not self.tidying.is_alive():
            self.tidying = threading.Thread(target=tidy, args=(self.workspace, self.folder, version, self.compaction_ratio),
                                            name="graph-compaction", daemon=True)
            self.tidying.start()
        return self.incarnation, None

    def mark_saved(self) -> tuple[str, None]:
        """Start a new change set (a replica: the first copy writes the files)."""
        self.graph.mark_saved()
        return self.incarnation, None

    def wait_tidy(self) -> tuple[str, None]:
        """Wait for a running compaction (before the actor is stopped)."""
        if self.tidying is not None:
            self.tidying.join()
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
