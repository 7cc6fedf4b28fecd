"""Stage ``commit``: the graph's new version, then the run's documents.

1. ``commit_graph``: every shard writes what the run changed as a delta, then the manifest
   moves to the next graph version (the commit point: a run killed before it leaves the graph
   as it was, and its documents unprocessed, so running it again finishes it).
2. ``finish_documents`` (a Ray task for a large run): the statuses of the run's documents from
   its scratch tables (processed, or failed with the first of their chunks' errors), its chunk
   rows moved into the chunks table, the extraction cache compacted, the scratch folder removed.
"""

from __future__ import annotations

from typing import Any

import pyarrow.compute as pc

from lightrag_ray.storage import doc_status, extraction_cache
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph.writer import GraphRouter
from lightrag_ray.storage.run_files import DOCUMENTS_SCHEMA, OUTCOMES_SCHEMA, RunFiles
from lightrag_ray.storage.workspace import Workspace

MAX_REPORTED_ERRORS = 100  # documents named in a run's report (every one is in the status table)


def commit_graph(router: GraphRouter, workspace: Workspace, manifest: manifests.Manifest) -> manifests.Manifest:
    """The shards' deltas, then the manifest's new graph version and counts."""
    return router.commit(workspace, manifest)


def finish_documents(run: RunFiles, cancelled: str = "") -> dict[str, Any]:
    """Record the statuses of the run's documents and tidy the run away; returns
    ``docs_failed`` (documents whose chunks failed, or all of them when ``cancelled`` gives the
    reason), ``errors`` (at most MAX_REPORTED_ERRORS) and ``errors_total``."""
    documents = run.read("documents", DOCUMENTS_SCHEMA)
    outcomes = run.read("outcomes", OUTCOMES_SCHEMA)
    failed = outcomes.filter(pc.not_equal(outcomes["error"], "")).sort_by([("doc_id", "ascending"),
                                                                           ("chunk_id", "ascending")])
    chunk_errors: dict[str, list[str]] = {}
    for doc, error in zip(failed["doc_id"].to_pylist(), failed["error"].to_pylist()):
        chunk_errors.setdefault(doc, []).append(error)
    changes: dict[str, dict[str, Any]] = {}
    errors = []
    newly_failed = 0
    for row in documents.to_pylist():
        if row["doc_id"] in changes:  # the same document twice in one run
            continue
        error = row["error"]
        if not error and cancelled:
            error = cancelled
        elif not error and row["doc_id"] in chunk_errors:
            reasons = chunk_errors[row["doc_id"]]
            error = (f"{len(reasons)} of {row['chunks']} chunks failed (first: {reasons[0]}); "
                     "index the document again to retry them (the chunks that succeeded are cached)")
        if error and not row["error"]:
            newly_failed += 1
            errors.append({"file_path": row["file_path"], "error": error})
        changes[row["doc_id"]] = {"doc_id": row["doc_id"], "file_path": row["file_path"], "chunks": row["chunks"],
                                  "status": doc_status.FAILED if error else doc_status.PROCESSED, "error": error,
                                  "content_summary": row["content_summary"] or "", "content_length": row["content_length"] or 0}
    run.adopt_chunks()  # before the statuses: a run killed between them leaves rows to re-chunk, never documents without rows
    if changes:
        doc_status.update(run.workspace, list(changes.values()))
    extraction_cache.compact(run.workspace)
    run.remove()
    return {"docs_failed": newly_failed, "errors": errors[:MAX_REPORTED_ERRORS], "errors_total": len(errors)}
