"""Shard snapshots: the mention rows, cached summaries and summary bases of one ShardGraph
as Parquet (a snapshot without summary bases loads with none: items are then summarised
from all their fragments the next time they change)."""

from __future__ import annotations

from lightrag_ray.core.merge import ShardGraph
from lightrag_ray.core.summary_bases import SummaryBase
from lightrag_ray.storage.workspace import Workspace


def snapshot_folder(shard: int, num_shards: int) -> str:
    return f"shard-{shard:04d}-of-{num_shards:04d}"


def save_snapshot(workspace: Workspace, shard: ShardGraph) -> None:
    """Write the shard's mentions, summaries and summary bases (each file atomically)."""
    folder = snapshot_folder(shard.shard, shard.num_shards)
    entity_rows = [
        {"key": key, "chunk_id": chunk, **m._asdict()}
        for key, data in shard.graph.nodes(data=True)
        for chunk, mentions in data["mentions"].items()
        for m in mentions
    ]
    relation_rows = [
        {"key_a": a, "key_b": b, "chunk_id": chunk, **m._asdict()}
        for a, b in (sorted(edge) for edge in shard.graph.edges)
        for chunk, mentions in shard.graph.edges[a, b]["mentions"].items()
        for m in mentions
    ]
    summary_rows = [{"hash": h, "summary": s} for h, s in shard.summaries.items()]
    base_rows = [{"item": item, **base._asdict()} for item, base in shard.summary_bases.items()]
    workspace.write_rows(entity_rows, "graph", folder, "entities.parquet")
    workspace.write_rows(relation_rows, "graph", folder, "relations.parquet")
    workspace.write_rows(summary_rows, "graph", folder, "summaries.parquet")
    workspace.write_rows(base_rows, "graph", folder, "summary_bases.parquet")


def load_snapshot(workspace: Workspace, shard: ShardGraph) -> None:
    """Fill an empty shard from its last snapshot, if any."""
    folder = snapshot_folder(shard.shard, shard.num_shards)
    entities = [
        row for row in workspace.read_rows("graph", folder, "entities.parquet")
    ]
    relations = [
        {
            "source_key": row["key_a"], "target_key": row["key_b"], "source": row["name_a"],
            "target": row["name_b"], **{k: row[k] for k in ("chunk_id", "keywords", "description", "weight", "file_path")},
        }
        for row in workspace.read_rows("graph", folder, "relations.parquet")
    ]
    shard.apply(entities, relations)
    shard.dirty_nodes.clear()
    shard.dirty_edges.clear()
    shard.add_summaries({r["hash"]: r["summary"] for r in workspace.read_rows("graph", folder, "summaries.parquet")})
    shard.summary_bases.update(
        (r["item"], SummaryBase(r["digest"], tuple(r["covered"])))
        for r in workspace.read_rows("graph", folder, "summary_bases.parquet")
    )
