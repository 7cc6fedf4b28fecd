"""The workspace's chunks table (``chunks/part-*.parquet``): finding a document's chunk rows
and removing rows by rewriting only the parts that hold them, so that a delete or a sync writes
what it changed, not the whole table."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from lightrag_ray.storage.workspace import Workspace

TABLE = "chunks"
PART = "__part"  # the column naming the part file a row was read from


def chunks_of(workspace: Workspace, doc_ids: set[str], columns: list[str] | None = None) -> list[dict[str, Any]]:
    """The chunk rows of the documents ``doc_ids`` (``columns`` of them, default all), each
    with the part file it is stored in (``PART``); a row stored twice comes once per part."""
    parts = workspace.list_files(TABLE)
    if not doc_ids or not parts:
        return []
    dataset = pads.dataset(parts, filesystem=workspace.fs, format="parquet")
    wanted = pc.field("doc_id").isin(sorted(doc_ids))
    rows = []
    for fragment in dataset.get_fragments():
        table = fragment.to_table(columns=columns, filter=wanted)
        rows += [{**row, PART: fragment.path} for row in table.to_pylist()]
    return rows


def drop_rows(workspace: Workspace, rows: list[dict[str, Any]]) -> int:
    """Remove the stored rows ``rows`` (as ``chunks_of`` returns them: chunk id and part) by
    rewriting each part that holds one (atomically; a part left empty is deleted). Returns the
    parts rewritten."""
    doomed: dict[str, set[str]] = {}
    for row in rows:
        doomed.setdefault(row[PART], set()).add(row["chunk_id"])
    for part, ids in doomed.items():
        if not workspace.fs.get_file_info(part).is_file:
            continue  # removed by an earlier, interrupted pass
        with workspace.fs.open_input_file(part) as src:
            table = pq.read_table(src)
        kept = table.filter(pc.invert(pc.is_in(table["chunk_id"], value_set=pa.array(sorted(ids), table["chunk_id"].type))))
        if kept.num_rows:
            relative = part[len(workspace.path("")):].split("/")
            workspace.write_rows(kept.to_pylist(), *relative, schema=table.schema)
        else:
            workspace.delete_file(part)
    return len(doomed)
