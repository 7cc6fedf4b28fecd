"""The sources table (``sources/sources.parquet``): which file, record or upload names which
document, with the size and modification time it had when read (core.sources); and what the
last sync did, with its LLM tokens and those of every run before (``sources/last_sync.json``,
shown by ``status``)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow as pa

from lightrag_ray.core.sources import FILE, UNKNOWN, normalise_source, under
from lightrag_ray.models.usage import USAGE_COLUMNS
from lightrag_ray.storage.workspace import Workspace

TABLE = ("sources", "sources.parquet")
LAST_SYNC = ("sources", "last_sync.json")
SCHEMA = pa.schema([
    ("source", pa.string()),  # normalised path or URI (#record for a record file's record; upload:NAME)
    ("kind", pa.string()),  # core.sources FILE | UPLOAD | TEXT: one kind never prunes another
    ("file", pa.string()),  # the file it was read from (normalised): what listings are compared by
    ("size", pa.int64()),
    ("mtime_ns", pa.int64()),
    ("doc_id", pa.string()),
    ("file_path", pa.string()),  # the name shown for it (as given to `index`, or the upload's name)
])
Row = dict[str, Any]


def load(workspace: Workspace) -> list[Row]:
    """Every source row ([] in a workspace that has none yet)."""
    return workspace.read_rows(*TABLE)


def save(workspace: Workspace, rows: list[Row]) -> None:
    """Replace the table (atomically)."""
    workspace.write_rows([{name: row.get(name) for name in SCHEMA.names} for row in rows], *TABLE, schema=SCHEMA)


def forget_documents(workspace: Workspace, doc_ids: set[str]) -> None:
    """Drop the sources naming deleted documents (a file indexed again is then new)."""
    rows = load(workspace)
    kept = [row for row in rows if row["doc_id"] not in doc_ids]
    if len(kept) != len(rows):
        save(workspace, kept)


def adopted(docs: dict[str, Row], known: list[Row], roots: list[str]) -> list[Row]:
    """Source rows for documents indexed before sources were recorded, whose file path lies under
    one of ``roots``: each becomes a file source of unknown size, so the next sync reads it once
    and, its content unchanged, only records its size (no extraction)."""
    named = {row["doc_id"] for row in known}
    rows = []
    for doc, row in docs.items():
        path = row.get("file_path") or ""
        if doc in named or not path:
            continue
        display = path.split("#", 1)[0]
        file = normalise_source(display)
        if under(file, roots):
            rows.append({"source": file + path[len(display):], "kind": FILE, "file": file, "size": UNKNOWN,
                         "mtime_ns": UNKNOWN, "doc_id": doc, "file_path": path})
    return rows


def save_last_sync(workspace: Workspace, summary: dict[str, Any], llm: dict[str, Any]) -> None:
    """Record what a sync did (its plan's summary), with the time, and its run's LLM usage
    (``llm``: its index report's ``USAGE_COLUMNS`` and ``llm_cost``), also added to the runs' before (``llm_total``)."""
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    before = (last_sync(workspace) or {}).get("llm_total")
    record = {**summary, "finished": now, "llm": llm, "llm_total": added_usage(before, llm)}
    workspace.write_bytes(json.dumps(record, ensure_ascii=False).encode(), *LAST_SYNC)


def added_usage(before: dict[str, Any] | None, run: dict[str, Any]) -> dict[str, Any]:
    """The usage fields of ``before`` plus ``run``'s; the cost is unknown (None) once a run's was."""
    if before is None:
        return dict(run)
    total = {key: before.get(key, 0) + run[key] for key in USAGE_COLUMNS}
    cost = None if before.get("llm_cost") is None or run["llm_cost"] is None else before["llm_cost"] + run["llm_cost"]
    return {**total, "llm_cost": cost}


def last_sync(workspace: Workspace) -> dict[str, Any] | None:
    """What the last sync did, or None."""
    data = workspace.read_bytes(*LAST_SYNC)
    return None if data is None else json.loads(data)
