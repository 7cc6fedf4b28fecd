"""Stage ``merge``: extraction rows -> one count row per batch. The batch's records go straight
to the graph shards that own them (one parallel round), and every chunk's outcome to the run's
``outcomes`` table, from which the commit records document statuses."""

from __future__ import annotations

from typing import Any

from lightrag_ray.core.records import EntityRecord, RelationRecord
from lightrag_ray.models.usage import USAGE_COLUMNS, TokenUsage
from lightrag_ray.storage import extraction_cache
from lightrag_ray.storage.graph.handles import ShardHandles
from lightrag_ray.storage.run_files import OUTCOMES_SCHEMA, RunFiles

Row = dict[str, Any]
COUNTS = ("chunks_merged", "chunks_cached", "chunks_extracted", "chunks_failed", "llm_requests", "records_dropped",
          *USAGE_COLUMNS)


def records(rows: list[Row]) -> tuple[list[EntityRecord], list[RelationRecord]]:
    """The entity and relation records of extraction rows."""
    entities: list[EntityRecord] = []
    relations: list[RelationRecord] = []
    for row in rows:
        result = extraction_cache.from_row(row)
        entities.extend(result.entities)
        relations.extend(result.relations)
    return entities, relations


class MergeIntoShards:
    """Extraction rows -> [count row (``COUNTS``)]; ``shards``: the workspace's ShardHandles
    (or any graph with the contract's ``apply``)."""

    def __init__(self, shards: ShardHandles, run: RunFiles) -> None:
        self.shards = shards
        self.run = run

    def __call__(self, rows: list[Row]) -> list[Row]:
        good = [row for row in rows if not row["error"]]
        if good:
            self.shards.apply(*records(good))
        self.run.append("outcomes", [{"chunk_id": r["chunk_id"], "doc_id": r["doc_id"], "error": r["error"]}
                                     for r in rows], OUTCOMES_SCHEMA)
        fresh = [row for row in rows if not row["cached"]]
        return [{
            "chunks_merged": len(rows),
            "chunks_cached": len(rows) - len(fresh),
            "chunks_extracted": sum(1 for row in fresh if not row["error"]),
            "chunks_failed": len(rows) - len(good),
            "llm_requests": sum(int(row["requests"]) for row in fresh),
            "records_dropped": sum(int(row["dropped"]) for row in fresh if not row["error"]),
            **sum((TokenUsage.of_row(row) for row in fresh), TokenUsage()).counts(),
        }]
