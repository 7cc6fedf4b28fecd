"""Stage ``chunk``: document rows -> the run's chunk rows, and one count row per batch.

Documents already processed are skipped (each worker reads the status table once); the
others are cut into token windows. Their chunk rows go to the run's ``chunks`` table, where
the extraction stage reads them, and every document seen (with its chunk count, or the reason
it cannot be read) to the run's ``documents`` table, from which the commit records statuses.
Every source read, skipped documents' too, goes to the run's ``sources`` table: the sync plan
(core.sources) is made from it.
"""

from __future__ import annotations

import json
from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.core.chunking import chunk_text
from lightrag_ray.storage import doc_status, sources
from lightrag_ray.storage.run_files import DOCUMENTS_SCHEMA, RunFiles

Row = dict[str, Any]
COUNTS = ("docs_new", "docs_skipped", "docs_failed", "chunks")
PART_ROWS = 64  # chunks per part file: a part is read as one block, a few LLM batches


def document_row(doc: Row, chunks: int) -> Row:
    """A document's row for the run's ``documents`` file: its chunks, its error (if it could
    not be read) and, when it could, the start and length of its text."""
    text = "" if doc["error"] else doc["text"]
    return {"doc_id": doc["doc_id"], "file_path": doc["file_path"], "chunks": chunks, "error": doc["error"] or "",
            "content_summary": doc_status.content_summary(text), "content_length": len(text)}


class ChunkDocuments:
    """Document rows -> [count row] (``COUNTS`` plus ``errors``: JSON of the unreadable files)."""

    def __init__(self, settings: dict[str, Any], run: RunFiles) -> None:
        self.chunking = Settings.model_validate(settings).chunking
        self.run = run
        known = doc_status.load(run.workspace)
        self.processed = {doc for doc, row in known.items() if row["status"] == doc_status.PROCESSED}

    def __call__(self, docs: list[Row]) -> list[Row]:
        counts = dict.fromkeys(COUNTS, 0)
        chunks: list[Row] = []
        documents: list[Row] = []
        errors = []
        seen: set[str] = set()
        for doc in docs:
            if doc["error"]:
                counts["docs_failed"] += 1
                errors.append({"file_path": doc["file_path"], "error": doc["error"]})
                documents.append(document_row(doc, 0))
            elif doc["doc_id"] in self.processed or doc["doc_id"] in seen:
                counts["docs_skipped"] += 1
            else:
                seen.add(doc["doc_id"])
                rows = chunk_text(doc["doc_id"], doc["text"], chunk_tokens=self.chunking.chunk_tokens,
                                  overlap_tokens=self.chunking.overlap_tokens, encoding=self.chunking.encoding,
                                  file_path=doc["file_path"])
                chunks += rows
                counts["docs_new"] += 1
                documents.append(document_row(doc, len(rows)))
        counts["chunks"] = len(chunks)
        for start in range(0, len(chunks), PART_ROWS):
            self.run.append("chunks", chunks[start : start + PART_ROWS])
        self.run.append("documents", documents, DOCUMENTS_SCHEMA)
        self.run.append("sources", [{name: doc[name] for name in sources.SCHEMA.names} for doc in docs], sources.SCHEMA)
        return [{**counts, "errors": json.dumps(errors, ensure_ascii=False)}]
