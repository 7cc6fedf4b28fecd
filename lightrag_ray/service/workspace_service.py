"""The writable side of a served workspace: its one writer.

The graph shards must see one writer and a Milvus Lite file admits one process, so the Serve
app keeps exactly one WorkspaceService (in its Workspace deployment). It opens the workspace as
its writer (service.opening: detached shard actors that query replicas read directly, the
Milvus store whose Lite lookups it answers), runs insert jobs (service.jobs), deletes
documents or all of them, edits the graph, drops the LLM cache, retries failed documents and
queues the new files of the input folder; every write holds the one write lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import pyarrow.fs as pafs

from lightrag_ray.config import Settings
from lightrag_ray.core.manual_edits import GraphEditError
from lightrag_ray.index.documents import input_filesystem, parse_file
from lightrag_ray.index.embedding_pool import KeptEmbeddingPool
from lightrag_ray.models.embedding import Embedder
from lightrag_ray.ray_runtime import quiet_ray_data
from lightrag_ray.service import status
from lightrag_ray.service.deletion import delete_documents
from lightrag_ray.service.indexing import preview_paths
from lightrag_ray.service.graph_edits import GraphEditor
from lightrag_ray.service.jobs import PROCESSING, InsertJobs, InsertRejected, new_track_id, now
from lightrag_ray.service.opening import open_workspace
from lightrag_ray.storage import doc_status, extraction_cache
from lightrag_ray.storage.vector_owner import ActorVectorWriter


class WriteBusy(RuntimeError):
    """A write that cannot start now: an insert job holds the workspace."""

    def __init__(self, message: str, track_id: str = "") -> None:
        super().__init__(message)
        self.track_id = track_id


class WorkspaceService(InsertJobs):
    """Insert jobs, deletion, graph edits, document management and status over one workspace."""

    QUEUEING = ("submit", "scan", "reprocess_failed")  # they return a job the caller must have run
    REFUSALS = (WriteBusy, InsertRejected, GraphEditError)  # expected refusals (HTTP 400/404/409), not faults

    def __init__(self, settings: Settings, embedder: Embedder, embedding_pool: KeptEmbeddingPool | None = None) -> None:
        """``embedding_pool``: the insert jobs' embedding workers, shared with other workspaces
        (the caller closes it); None: this service's own, closed with it."""
        self.opened = open_workspace(settings, "writer", keep_alive=True, embedding_dim=embedder.dim)
        self.owns_pool = embedding_pool is None
        super().__init__(self.opened, embedding_pool or KeptEmbeddingPool(settings.embedding, settings.metrics))
        self.vectors = self.opened.vector_store()  # deletes and graph edits write, and Lite lookups read, through it
        self.embedder = embedder  # deletes and graph edits; insert jobs embed with ``embedding_pool``
        quiet_ray_data(not settings.ray.verbose)  # job progress goes to LOG, not Ray Data's bars

    @contextlib.contextmanager
    def _exclusive(self, action: str, idle: bool = False) -> Iterator[None]:
        """Hold the write lock for ``action`` ("delete", ...); raises WriteBusy at once while an
        insert job runs, or with ``idle`` also while one is queued."""
        if not self.write_lock.acquire(blocking=False):
            running = next((t for t, job in self.jobs.items() if job["status"] == PROCESSING), "")
            raise WriteBusy(f"an insert job is running ({running}); {action} again once it has finished "
                            f"(GET /documents/track_status/{running})", running)
        try:
            queued = self.unfinished_jobs() if idle else []
            if queued:
                raise WriteBusy(f"{len(queued)} insert job(s) queued ({', '.join(queued)}); {action} again once they "
                                f"have run, or cancel them (POST /documents/cancel_pipeline)", queued[0])
            yield
        finally:
            self.write_lock.release()

    def delete(self, doc_ids: list[str]) -> dict[str, Any]:
        """Delete documents; only the entities and relations they touched are re-derived.
        Raises WriteBusy at once while an insert job holds the workspace."""
        with self._exclusive("delete"):
            return delete_documents(self.workspace, self.graph, self.vectors, self.embedder, doc_ids, self.settings)

    # ---- LightRAG's document management: clear, cache, reprocess, cancel all, scan ---------
    def clear(self) -> dict[str, Any]:
        """Delete every document (status, chunks, graph, vectors) and the inbox copies; the
        extraction cache and job records stay. Returns the deletion's counts and ``files``
        (inbox files removed). Raises WriteBusy while an insert job runs or is queued."""
        with self._exclusive("clear the documents", idle=True):
            result = delete_documents(self.workspace, self.graph, self.vectors, self.embedder,
                                      sorted(doc_status.load(self.workspace)))
            inbox = self.workspace.path("inbox")
            listed = self.workspace.fs.get_file_info(pafs.FileSelector(inbox, recursive=True, allow_not_found=True))
            self.workspace.fs.delete_dir_contents(inbox, missing_dir_ok=True)
        return {**result, "files": sum(1 for info in listed if info.type == pafs.FileType.File)}

    def clear_cache(self) -> int:
        """Drop the LLM cache (cached chunk extractions); returns how many there were.
        Raises WriteBusy while an insert job runs (it writes the cache)."""
        with self._exclusive("clear the cache"):
            return extraction_cache.clear(self.workspace)

    def reprocess_failed(self) -> dict[str, Any] | None:
        """Queue the failed documents again as one insert job, from the inbox copies of the
        jobs that brought them. Returns the job with ``missing``: failed documents without a
        copy to retry (unreadable files); None when no failed document has one."""
        failed = {d for d, row in doc_status.load(self.workspace).items() if row["status"] == doc_status.FAILED}
        found: set[str] = set()
        picked: list[tuple[str, bytes, str]] = []
        for job in list(self.jobs.values()):  # any copy will do: a doc id is its text's hash
            wanted = failed.intersection(job["doc_ids"]) - found
            for stored, name, data, rows in self.inbox_files(job) if wanted else ():
                ids = {row["doc_id"] for row in rows if not row["error"]} & wanted
                if ids:
                    found |= ids
                    picked.append((name, data, PurePosixPath(stored).suffix))
        if not picked:
            return None
        job = self.submit([(name, data) for name, data, _ in picked], "reprocess", suffixes=[s for *_, s in picked])
        return {**job, "missing": len(failed - found)}

    def cancel_all(self) -> list[str]:
        """Cancel every queued or running insert job; returns their track ids."""
        unfinished = self.unfinished_jobs()
        for track_id in unfinished:
            self.cancel(track_id)
        return unfinished

    def scan(self, folder: str, prune: bool = False) -> dict[str, Any]:
        """Sync the workspace with ``folder`` (created if missing) as `index` does (index.sync):
        new and changed files are queued as one job that indexes the folder itself, named by
        their path in it (a changed file replaces its old version, a moved one is re-pointed);
        with ``prune``, documents whose file is gone from the folder are removed too. Unchanged
        files (same size and modification time) are not read. A file of a type that cannot be
        indexed is recorded as a failed document with its error. Returns the job (``processed``
        or ``failed`` when nothing was queued) with ``scan``: the files ``queued`` and
        ``skipped``, the documents newly ``failed``, and the sources ``replaced``, ``moved``,
        ``removed``. Raises WriteBusy while an insert job runs or is queued."""
        folder = folder.rstrip("/")
        with self._exclusive("scan", idle=True):
            fs, inner = input_filesystem(folder)
            fs.create_dir(inner, recursive=True)
            known = doc_status.load(self.workspace)
            try:
                changes = preview_paths([folder], self.settings, prune=prune, relative_to=folder)
            except FileNotFoundError:  # an empty folder, and nothing recorded under it
                changes = {"documents": [], "replaced": 0, "moved": 0, "removed": 0, "listed": 0, "unsupported": []}
            unsupported = [parse_file(e["file_path"], b"", e["file_path"][len(folder):].lstrip("/"))[0]
                           for e in changes["unsupported"]]
            failures = [{**{k: row[k] for k in ("doc_id", "file_path", "error")}, "status": doc_status.FAILED,
                         "chunks": 0} for row in unsupported + changes["documents"]
                        if row["error"] and known.get(row["doc_id"], {}).get("status") != doc_status.FAILED]
            if failures:
                doc_status.update(self.workspace, failures)
            new = sorted({d["doc_id"] for d in changes["documents"]
                          if not d["error"] and known.get(d["doc_id"], {}).get("status") != doc_status.PROCESSED})
            queued = {d["source"].split("#", 1)[0] for d in changes["documents"] if d["doc_id"] in new}
            errors = [{"file_path": f["file_path"], "error": f["error"]} for f in failures]
            if new or changes["replaced"] + changes["moved"] + changes["removed"]:
                job = self.submit_scan(folder, prune, new)
            else:
                job = {"track_id": new_track_id("scan"), "doc_ids": sorted(f["doc_id"] for f in failures),
                       "files": {}, "status": doc_status.FAILED if failures else doc_status.PROCESSED,
                       "created": now(), "errors": [], "report": None}
            self._save_job({**job, "errors": list({e["file_path"]: e for e in job["errors"] + errors}.values())})
        listed = changes["listed"] + len(unsupported)
        counts = {"queued": len(queued), "skipped": listed - len(queued) - len(failures), "failed": len(failures),
                  **{key: changes[key] for key in ("replaced", "moved", "removed")}}
        return {**self.jobs[job["track_id"]], "scan": counts}

    # ---- manual graph edits (LightRAG's graph-editing routes) ---------------------------
    def edit_graph(self, operation: str, *args: Any) -> Any:
        """Run one GraphEditor operation (``edit_entity``, ``merge_entities``, ...) as a write;
        raises WriteBusy at once while an insert job runs, GraphEditError for a refused edit."""
        with self._exclusive("edit the graph"):
            return getattr(GraphEditor(self.workspace, self.graph, self.vectors, self.embedder, self.settings), operation)(*args)

    def health(self) -> dict[str, Any]:
        """Graph version, counts, models and whether a write is running."""
        found = status.counts(self.workspace)
        return {
            "status": "healthy",
            "workspace": self.settings.workspace,
            **{key: found[key] for key in ("graph_version", "documents", "entities", "relations")},
            "shards": self.settings.graph.num_shards,
            "pipeline_busy": self.write_lock.locked(),
            "queued_jobs": len(self.unfinished_jobs()),
            "embedding_model": f"{self.settings.embedding.backend}:{self.settings.embedding.model}",
            "embedding_dim": self.embedder.dim,
            "llm_model": None if self.settings.llm.backend == "none" else self.settings.llm.model,
            "extraction_mode": self.settings.extraction.mode,
        }

    def memory_bytes(self) -> int:
        """Resident memory of the actors that hold this workspace open: its graph shards and,
        with Milvus Lite, the file's owner."""
        lite_owner = self.vectors.memory_bytes() if isinstance(self.vectors, ActorVectorWriter) else 0
        return self.graph.memory_bytes() + lite_owner

    def close(self) -> None:
        """Stop the shard actors and the embedding workers (its own), and release Milvus."""
        if self.owns_pool:
            self.embedding_pool.close()
        self.opened.close()
