"""The LLM cache: one row per extracted chunk in ``extractions/`` (never sent again).

Extraction workers append one part file per batch and look cached chunks up themselves
(``CacheIndex``); compaction folds the small parts into parts of ~64 MB sorted by chunk id
with small row groups, so a lookup of a few chunks reads a few row groups.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lightrag_ray.config import Settings
from lightrag_ray.core import prompts
from lightrag_ray.core.records import EntityRecord, Extraction, RelationRecord
from lightrag_ray.storage.workspace import Workspace

TABLE = "extractions"
SCHEMA = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("doc_id", pa.string()),
        ("fingerprint", pa.string()),
        ("entities", pa.string()),
        ("relations", pa.string()),
        ("dropped", pa.int64()),
        ("requests", pa.int64()),
    ]
)
COMPACT_AFTER_PARTS = 256
COMPACTED_PART_BYTES = 64 * 2**20  # a compacted part's size on disk; larger parts are not rewritten
ROW_GROUP = 1024  # rows per row group of a compacted file: a lookup reads the groups holding its chunks


def extraction_fingerprint(settings: Settings) -> str:
    """Changes when the prompt, model or extraction settings change (cache key part)."""
    ex, llm = settings.extraction, settings.llm
    parts = [
        ex.mode, llm.model if ex.mode == "llm" else "", ",".join(ex.entity_types), ex.language,
        str(ex.gleaning_rounds), prompts.extraction_messages("", ex.entity_types, ex.language)[0]["content"],
    ]
    return hashlib.md5("\x1f".join(parts).encode()).hexdigest()[:16]


def to_row(chunk_id: str, doc_id: str, fingerprint: str, result: Extraction, requests: int) -> dict[str, Any]:
    """Cache row of one chunk's extraction."""
    return {
        "chunk_id": chunk_id,
        "doc_id": doc_id,
        "fingerprint": fingerprint,
        "entities": json.dumps([e.to_dict() for e in result.entities], ensure_ascii=False),
        "relations": json.dumps([r.to_dict() for r in result.relations], ensure_ascii=False),
        "dropped": result.dropped,
        "requests": requests,
    }


def from_row(row: dict[str, Any]) -> Extraction:
    """The records stored in one cache row."""
    return Extraction(
        entities=[EntityRecord(**e) for e in json.loads(row["entities"])],
        relations=[RelationRecord(**r) for r in json.loads(row["relations"])],
        dropped=int(row["dropped"]),
    )


def write_rows(workspace: Workspace, rows: list[dict[str, Any]]) -> None:
    """Persist extraction rows as a new part file (atomic)."""
    workspace.append_rows(rows, TABLE, schema=SCHEMA)


def load_cache(workspace: Workspace, fingerprint: str) -> dict[str, dict[str, Any]]:
    """chunk_id -> cache row for the current fingerprint (every row: for small workspaces and tests)."""
    return {r["chunk_id"]: r for r in workspace.read_rows(TABLE) if r["fingerprint"] == fingerprint}


def cache_parts(workspace: Workspace) -> list[str]:
    """The cache's part files now (a run takes them at its start: hits in later parts are
    its own work, e.g. a batch retried after its worker was lost)."""
    return workspace.list_files(TABLE)


class CacheIndex:
    """Where the cache holds the chunks of one fingerprint: read once (ids only) by each
    extraction worker, which then reads the rows of its batch's cached chunks."""

    def __init__(self, workspace: Workspace, fingerprint: str) -> None:
        self.workspace = workspace
        self.where: dict[str, str] = {}  # chunk id -> part file
        for part in workspace.list_files(TABLE):
            with workspace.fs.open_input_file(part) as src:
                ids = pq.read_table(src, columns=["chunk_id", "fingerprint"])
            mine = ids.filter(pc.equal(ids["fingerprint"], fingerprint))["chunk_id"].to_pylist()
            self.where.update(dict.fromkeys(mine, part))
        self.fingerprint = fingerprint

    def lookup(self, chunk_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Cache rows of the cached ones among ``chunk_ids``."""
        by_part: dict[str, list[str]] = {}
        for chunk in chunk_ids:
            if chunk in self.where:
                by_part.setdefault(self.where[chunk], []).append(chunk)
        found: dict[str, dict[str, Any]] = {}
        for part, ids in by_part.items():
            with self.workspace.fs.open_input_file(part) as src:
                table = pq.read_table(src, filters=[("chunk_id", "in", ids), ("fingerprint", "=", self.fingerprint)])
            found.update((row["chunk_id"], row) for row in table.to_pylist())
        return found


def clear(workspace: Workspace) -> int:
    """Drop every cached extraction (the next run asks the LLM again); returns how many there were."""
    parts = workspace.list_files(TABLE)
    count = 0
    for part in parts:
        with workspace.fs.open_input_file(part) as src:
            count += pq.read_metadata(src).num_rows
        workspace.delete_file(part)
    return count


def compact(workspace: Workspace) -> None:
    """Past COMPACT_AFTER_PARTS parts, merge the small ones (a batch's each) into parts of about
    COMPACTED_PART_BYTES sorted by chunk id (rows deduplicated by chunk and fingerprint, the
    last part listed winning). Parts that size are left alone, so the work and memory of a
    compaction are bounded by the parts written since the last one, not by the whole cache."""
    parts = workspace.list_files(TABLE)
    if len(parts) <= COMPACT_AFTER_PARTS:
        return
    sizes = {info.path: info.size for info in workspace.fs.get_file_info(parts)}
    group: list[str] = []
    for part in (p for p in parts if sizes[p] < COMPACTED_PART_BYTES // 2):
        group.append(part)
        if sum(sizes[p] for p in group) >= COMPACTED_PART_BYTES:
            _merge(workspace, group)
            group = []
    if len(group) > 1:
        _merge(workspace, group)


def _merge(workspace: Workspace, parts: list[str]) -> None:
    """``parts`` rewritten as one sorted, deduplicated part (written before they are deleted)."""
    tables = []
    for order, part in enumerate(parts):
        with workspace.fs.open_input_file(part) as src:
            table = pq.read_table(src).select(SCHEMA.names).cast(SCHEMA)
        tables.append(table.append_column("part", pa.array([order] * table.num_rows, pa.int64())))
    rows = pa.concat_tables(tables).sort_by([("chunk_id", "ascending"), ("fingerprint", "ascending"), ("part", "descending")])
    keys = pc.binary_join_element_wise(rows["chunk_id"], rows["fingerprint"], "\x1f")
    codes = keys.combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    first = np.ones(len(codes), dtype=bool)
    first[1:] = codes[1:] != codes[:-1]
    sink = pa.BufferOutputStream()
    pq.write_table(rows.filter(pa.array(first)).select(SCHEMA.names), sink, row_group_size=ROW_GROUP)
    workspace.write_bytes(sink.getvalue().to_pybytes(), TABLE, f"part-{uuid.uuid4().hex}.parquet")
    for part in parts:
        workspace.delete_file(part)
