"""Document status table: what was indexed, what failed and why."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pyarrow as pa

from lightrag_ray.storage.workspace import Workspace

PROCESSED, FAILED = "processed", "failed"
SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("file_path", pa.string()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("chunks", pa.int64()),
        ("updated", pa.string()),
        ("content_summary", pa.string()),  # absent in workspaces indexed before it: read as ""
        ("content_length", pa.int64()),
    ]
)
SUMMARY_CHARS = 250  # LightRAG Server shows the first 250 characters of a document


def content_summary(text: str) -> str:
    """The start of a document's text, whitespace collapsed, for document lists."""
    flat = " ".join(text.split())
    return flat if len(flat) <= SUMMARY_CHARS else flat[:SUMMARY_CHARS].rstrip() + "..."


def load(workspace: Workspace) -> dict[str, dict[str, Any]]:
    """doc_id -> status row."""
    return {row["doc_id"]: row for row in workspace.read_rows("docs", "docs.parquet")}


def update(workspace: Workspace, changes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Upsert status rows (doc_id, file_path, status, error, chunks, content_summary,
    content_length) and save."""
    rows = load(workspace)
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    for change in changes:
        rows[change["doc_id"]] = {**{f: None for f in SCHEMA.names}, **change, "updated": now}
    workspace.write_rows(list(rows.values()), "docs", "docs.parquet", schema=SCHEMA)
    return rows


def remove(workspace: Workspace, doc_ids: set[str]) -> None:
    """Forget documents (after deletion)."""
    rows = [row for doc, row in load(workspace).items() if doc not in doc_ids]
    workspace.write_rows(rows, "docs", "docs.parquet", schema=SCHEMA)


def counts(rows: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Number of documents per status."""
    return dict(Counter(row["status"] for row in rows.values()))
