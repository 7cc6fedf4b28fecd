"""The LLM cache: one row per extracted chunk in ``extractions/`` (never sent again).

Rows are found by the chunk's text (``text_key``), not its id: a chunk id names the document
too, so an edited or moved document's unchanged chunks would otherwise be sent again. A hit is
re-keyed for the chunk that asked (its id, document and file path in every record).
Extraction workers append one part file per batch and look cached chunks up themselves
(``CacheIndex``); compaction folds the small parts into parts of ~64 MB sorted by text key
with small row groups, so a lookup of a few chunks reads a few row groups. Parts written
before text keys existed are given theirs once (``migrate_text_keys``), from the chunk tables.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from lightrag_ray.config import Settings
from lightrag_ray.core import prompts
from lightrag_ray.core.ids import chunk_text_key
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
        ("text_key", pa.string()),  # core.ids.chunk_text_key of the chunk's text: what lookups match
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


def to_row(chunk_id: str, doc_id: str, fingerprint: str, result: Extraction, requests: int,
           text_key: str = "") -> dict[str, Any]:
    """Cache row of one chunk's extraction (``text_key``: chunk_text_key of its text; a row
    without one is never found by a lookup)."""
    return {
        "chunk_id": chunk_id,
        "doc_id": doc_id,
        "fingerprint": fingerprint,
        "entities": json.dumps([e.to_dict() for e in result.entities], ensure_ascii=False),
        "relations": json.dumps([r.to_dict() for r in result.relations], ensure_ascii=False),
        "dropped": result.dropped,
        "requests": requests,
        "text_key": text_key,
    }


def rekeyed(row: dict[str, Any], chunk: dict[str, Any]) -> dict[str, Any]:
    """A cache row found by its text, as the extraction of ``chunk`` (a chunk row): its id,
    document and file path in the row and in every record."""
    file_path = str(chunk.get("file_path") or "")

    def records(encoded: str) -> str:
        return json.dumps([{**record, "chunk_id": chunk["chunk_id"], "file_path": file_path}
                           for record in json.loads(encoded)], ensure_ascii=False)

    return {**row, "chunk_id": chunk["chunk_id"], "doc_id": chunk["doc_id"], "entities": records(row["entities"]),
            "relations": records(row["relations"])}


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
    """Where the cache holds the chunk texts of one fingerprint: read once (keys only) by each
    extraction worker, which then reads the rows of its batch's cached chunks."""

    def __init__(self, workspace: Workspace, fingerprint: str) -> None:
        self.workspace = workspace
        self.where: dict[str, str] = {}  # text key -> part file
        for part in workspace.list_files(TABLE):
            with workspace.fs.open_input_file(part) as src:
                if "text_key" not in pq.read_schema(src).names:
                    continue  # written before text keys: migrate_text_keys gives it theirs
                keys = pq.read_table(src, columns=["text_key", "fingerprint"])
            mine = keys.filter(pc.equal(keys["fingerprint"], fingerprint))["text_key"].to_pylist()
            self.where.update((key, part) for key in mine if key)
        self.fingerprint = fingerprint

    def part_of(self, chunk: dict[str, Any]) -> str:
        """The part file holding ``chunk``'s text (a chunk ``lookup`` found)."""
        return self.where[chunk_text_key(str(chunk["text"]))]

    def lookup(self, chunks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """chunk id -> its cache row (re-keyed for it) of the chunk rows whose text is cached."""
        by_part: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for chunk in chunks:
            key = chunk_text_key(str(chunk["text"]))
            if key in self.where:
                by_part.setdefault(self.where[key], {}).setdefault(key, []).append(chunk)
        found: dict[str, dict[str, Any]] = {}
        for part, asking in by_part.items():
            with self.workspace.fs.open_input_file(part) as src:
                table = pq.read_table(src, filters=[("text_key", "in", list(asking)),
                                                    ("fingerprint", "=", self.fingerprint)])
            for row in table.to_pylist():
                found.update((chunk["chunk_id"], rekeyed(row, chunk)) for chunk in asking.get(row["text_key"], ()))
        return found


def _unkeyed_parts(workspace: Workspace) -> list[str]:
    parts = []
    for part in workspace.list_files(TABLE):
        with workspace.fs.open_input_file(part) as src:
            if "text_key" not in pq.read_schema(src).names:
                parts.append(part)
    return parts


def migrate_text_keys(workspace: Workspace, chunk_parts: Iterable[str]) -> int:
    """Give the cache parts written before text keys existed theirs, from the chunk tables'
    parts ``chunk_parts`` (chunk id -> text; only the keys are kept in memory); rows whose chunk
    is in none keep no key (never found again). Returns the rows migrated."""
    old = _unkeyed_parts(workspace)
    if not old:
        return 0
    keys: dict[str, str] = {}
    parts = list(chunk_parts)
    if parts:
        for batch in pads.dataset(parts, filesystem=workspace.fs, format="parquet").to_batches(columns=["chunk_id", "text"]):
            keys.update((cid, chunk_text_key(text)) for cid, text in zip(batch.column(0).to_pylist(),
                                                                        batch.column(1).to_pylist()))
    migrated = 0
    for part in old:
        with workspace.fs.open_input_file(part) as src:
            table = pq.read_table(src)
        ids = table["chunk_id"].to_pylist()
        table = table.append_column("text_key", pa.array([keys.get(cid, "") for cid in ids], pa.string()))
        write_rows(workspace, table.select(SCHEMA.names).cast(SCHEMA).to_pylist())
        workspace.delete_file(part)
        migrated += len(ids)
    return migrated


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
    COMPACTED_PART_BYTES sorted by text key (rows deduplicated by text, chunk and fingerprint, the
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
            table = pq.read_table(src)
        if "text_key" not in table.column_names:  # not migrated yet (its rows keep no key)
            table = table.append_column("text_key", pa.array([""] * table.num_rows, pa.string()))
        table = table.select(SCHEMA.names).cast(SCHEMA)
        tables.append(table.append_column("part", pa.array([order] * table.num_rows, pa.int64())))
    rows = pa.concat_tables(tables).sort_by([("text_key", "ascending"), ("chunk_id", "ascending"),
                                             ("fingerprint", "ascending"), ("part", "descending")])
    keys = pc.binary_join_element_wise(rows["text_key"], rows["chunk_id"], rows["fingerprint"], "\x1f")
    codes = keys.combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    first = np.ones(len(codes), dtype=bool)
    first[1:] = codes[1:] != codes[:-1]
    sink = pa.BufferOutputStream()
    pq.write_table(rows.filter(pa.array(first)).select(SCHEMA.names), sink, row_group_size=ROW_GROUP)
    workspace.write_bytes(sink.getvalue().to_pybytes(), TABLE, f"part-{uuid.uuid4().hex}.parquet")
    for part in parts:
        workspace.delete_file(part)
