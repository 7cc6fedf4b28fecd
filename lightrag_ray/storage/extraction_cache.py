"""The LLM cache: one row per extracted chunk in ``extractions/`` (never sent again)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pyarrow as pa
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
    """chunk_id -> cache row for the current fingerprint."""
    return {r["chunk_id"]: r for r in workspace.read_rows(TABLE) if r["fingerprint"] == fingerprint}


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
    """Merge many small part files into one (rows deduplicated by chunk and fingerprint)."""
    parts = workspace.list_files(TABLE)
    if len(parts) <= COMPACT_AFTER_PARTS:
        return
    rows = {(r["chunk_id"], r["fingerprint"]): r for r in workspace.read_rows(TABLE)}
    workspace.append_rows(list(rows.values()), TABLE, schema=SCHEMA)
    for part in parts:
        workspace.delete_file(part)
