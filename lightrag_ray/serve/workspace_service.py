"""The writable side of a served workspace: one owner of Milvus and the graph shards.

A Milvus Lite file may be opened by one process only, and the graph shards must see
one writer, so the Serve app keeps exactly one WorkspaceService (in its Workspace
deployment). It owns the shard actors (query replicas read them directly), answers the
vector lookups of a Milvus Lite file, runs insert jobs through the same indexing
pipeline as the CLI (one at a time, in the background, with embedding workers it keeps
between jobs so that the model loads once), deletes documents (or all of them)
and queues the new files of the input folder. Insert jobs are recorded under ``tracks/`` in the workspace, so
a job cut short by a restart is run again when the service comes back.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import re
import threading
import traceback
import uuid
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

import pyarrow.fs as pafs

from lightrag_ray.config import Settings
from lightrag_ray.core.errors import short_error
from lightrag_ray.core.subgraph import subgraph
from lightrag_ray.index.deletion import delete_documents
from lightrag_ray.index.documents import input_filesystem, list_input_files, parse_file, read_input
from lightrag_ray.index.embedding_pool import EmbeddingPool
from lightrag_ray.index.graph_editor import GraphEditor
from lightrag_ray.index.pipeline import IndexCancelled, index_paths
from lightrag_ray.models.embedding import Embedder
from lightrag_ray.ray_runtime import quiet_ray_data
from lightrag_ray.storage import doc_status, extraction_cache
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph_router import GraphRouter
from lightrag_ray.storage.vectors import open_store
from lightrag_ray.storage.workspace import Workspace

PENDING, PROCESSING, DUPLICATED, CANCELLED = "pending", "processing", "duplicated", "cancelled"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
LOG = logging.getLogger("ray.serve")  # the replica's log; job progress at most every few seconds


class InsertRejected(ValueError):
    """Nothing in the request can become a document; the message says why."""


class WriteBusy(RuntimeError):
    """A write that cannot start now: an insert job holds the workspace."""

    def __init__(self, message: str, track_id: str = "") -> None:
        super().__init__(message)
        self.track_id = track_id


def inbox_name(number: int, name: str, suffix: str) -> str:
    """The name under which the ``number``-th file of a job, given as ``name``, is stored:
    unique in its folder, ASCII, no directories or dot names, ending in ``suffix`` (its type)."""
    stem = _UNSAFE.sub("_", PurePosixPath(name.replace("\\", "/")).stem).strip("._")[:100]
    return f"{number:04d}-{stem or 'document'}{_UNSAFE.sub('_', suffix)}"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _track_id(prefix: str) -> str:
    return f"{prefix}_{dt.datetime.now(dt.timezone.utc):%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"


class WorkspaceService:
    """Lookups, insert jobs, deletion and status over one workspace."""

    def __init__(self, settings: Settings, embedder: Embedder) -> None:
        self.workspace = Workspace(settings.workspace)
        shards = manifests.load(self.workspace).num_shards or settings.graph.num_shards
        self.settings = settings.model_copy(
            update={"graph": settings.graph.model_copy(update={"num_shards": shards})}
        )
        self.embedder = embedder  # deletes and graph edits; insert jobs embed with ``embedding_pool``
        self.embedding_pool: EmbeddingPool | None = None  # started by the first insert job, kept until close
        self.vectors = open_store(settings, embedder.dim)
        self.graph = GraphRouter(self.settings.workspace, self.settings.graph, self.settings.ray.namespace,
                                 keep_alive=True)
        self.write_lock = threading.Lock()
        self.stop = threading.Event()  # set to cancel the running job
        quiet_ray_data(not settings.ray.verbose)  # job progress goes to LOG, not Ray Data's bars
        self.jobs: dict[str, dict[str, Any]] = {
            job["track_id"]: job for job in map(json.loads, self._track_files())
        }

    # ---- graph views for the graph routes ------------------------------------------------
    def subgraph(self, label: str, max_depth: int, max_nodes: int) -> dict[str, Any]:
        return subgraph(self.graph, label, max_depth, max_nodes)

    def labels(self) -> list[str]:
        return self.graph.labels()

    # ---- inserts -----------------------------------------------------------------------
    def _track_files(self) -> list[bytes]:
        files = self.workspace.list_files("tracks", suffix=".json")
        return [self.workspace.fs.open_input_stream(p).read() for p in files]

    def _save_job(self, job: dict[str, Any]) -> None:
        job["updated"] = _now()
        self.jobs[job["track_id"]] = job
        self.workspace.write_bytes(json.dumps(job).encode(), "tracks", f"{job['track_id']}.json")

    def submit(self, files: list[tuple[str, bytes]], prefix: str = "insert", as_text: bool = False,
               suffixes: list[str] | None = None) -> dict[str, Any]:
        """Store ``(file name, bytes)`` in the workspace inbox and queue one insert job.

        Documents keep the names given (URLs, any script) in their status and references;
        the type comes from the name's suffix, or is plain text for every file if ``as_text``,
        or is the file's entry in ``suffixes`` (one per file) when given.
        Returns the job (``track_id``, ``doc_ids``, ``status``); ``status`` is
        ``duplicated`` when every document is already processed (no job is queued).
        Raises InsertRejected when no file holds a readable document.
        """
        track_id = _track_id(prefix)
        rows, errors = [], []
        types = suffixes or [".txt" if as_text else PurePosixPath(name).suffix.lower() for name, _ in files]
        stored = [inbox_name(number, name, suffix) for number, ((name, _), suffix) in enumerate(zip(files, types))]
        for path, (name, data) in zip(stored, files):
            for row in parse_file(path, data, name):
                (errors if row["error"] else rows).append(row)
        if not rows:
            reasons = "; ".join(f"{e['file_path']}: {e['error']}" for e in errors) or "no files"
            raise InsertRejected(f"nothing to index: {reasons}")
        doc_ids = sorted({row["doc_id"] for row in rows})
        known = doc_status.load(self.workspace)
        job = {
            "track_id": track_id, "status": PENDING, "doc_ids": doc_ids, "files": {},
            "created": _now(), "errors": [{"file_path": e["file_path"], "error": e["error"]} for e in errors],
            "report": None,
        }
        if all(known.get(d, {}).get("status") == doc_status.PROCESSED for d in doc_ids):
            self._save_job({**job, "status": DUPLICATED})
            return self.jobs[track_id]
        for path, (name, data) in zip(stored, files):
            self.workspace.write_bytes(data, "inbox", track_id, path)
            job["files"][path] = name
        self._save_job(job)
        return job

    def unfinished_jobs(self) -> list[str]:
        """Track ids of jobs not yet run to the end (queued, or cut short by a restart)."""
        return sorted(t for t, job in self.jobs.items() if job["status"] in (PENDING, PROCESSING))

    def run_job(self, track_id: str, niceness: int | None = None) -> dict[str, Any]:
        """Index one job's inbox folder (blocking; one writer at a time); its Ray tasks
        and actors run at ``niceness`` (None: Ray's default)."""
        with self.write_lock:
            job = self.jobs[track_id]
            if job["status"] == CANCELLED:
                return job
            self.stop.clear()
            self._save_job({**job, "status": PROCESSING})
            try:
                report = index_paths(
                    [f"{self.workspace.uri}/inbox/{track_id}"], self.settings,
                    progress=lambda message: LOG.info("%s: %s", track_id, message),
                    router=self.graph, vectors=self.vectors, embedding_pool=self._embedding_pool(niceness),
                    display_names=job["files"], niceness=niceness, stop=self.stop,
                )
            except IndexCancelled:
                job = {**self.jobs[track_id], "status": CANCELLED, "error": "cancelled while running: its "
                       "documents are marked failed; insert them again to finish, or delete them"}
            except Exception as exc:  # the job fails, the service stays up
                job = {**self.jobs[track_id], "status": doc_status.FAILED, "error": self._job_error(track_id, exc)}
            else:
                status = doc_status.FAILED if report.docs_failed else doc_status.PROCESSED
                job = {**self.jobs[track_id], "status": status, "report": report.to_dict()}
            self._save_job(job)
        return job

    def _embedding_pool(self, niceness: int | None) -> EmbeddingPool:
        """The insert jobs' embedding workers: started by the first job at its ``niceness`` and
        kept for the service's lifetime, so the model loads once."""
        if self.embedding_pool is None:
            self.embedding_pool = EmbeddingPool(self.settings.embedding, niceness)
        return self.embedding_pool

    def _job_error(self, track_id: str, exc: Exception) -> str:
        """One line for the job's status, paths relative to the workspace (clients do not see
        the server's disk); the traceback goes to ``logs/<track_id>.log``."""
        log = ("logs", f"{track_id}.log")
        self.workspace.write_bytes("".join(traceback.format_exception(exc)).encode(), *log)
        cause = short_error(exc).replace(f"{self.workspace.uri.rstrip('/')}/", "")
        return f"the insert failed: {cause} (details in {'/'.join(log)} in the workspace)"

    def cancel(self, track_id: str) -> dict[str, Any] | None:
        """Cancel a job: a pending one never runs, a running one stops after its current
        extraction batch. Returns the job (None for an unknown id)."""
        job = self.jobs.get(track_id)
        if job is not None and job["status"] == PENDING:
            self._save_job({**job, "status": CANCELLED, "error": "cancelled before it ran"})
        elif job is not None and job["status"] == PROCESSING:
            self.stop.set()
        return self.jobs.get(track_id)

    def track_status(self, track_id: str) -> dict[str, Any] | None:
        """The job and the status of each of its documents, or None for an unknown id."""
        job = self.jobs.get(track_id)
        if job is None:
            return None
        known = doc_status.load(self.workspace)
        documents = []
        for doc in job["doc_ids"]:
            row = known.get(doc)
            if row is None or job["status"] in (PENDING, PROCESSING):
                row = {"doc_id": doc, "file_path": "", "status": job["status"], "error": "", "chunks": 0}
            documents.append({**row, "track_id": track_id})
        summary: dict[str, int] = {}
        for d in documents:
            summary[d["status"]] = summary.get(d["status"], 0) + 1
        return {
            "track_id": track_id, "job_status": job["status"], "documents": documents,
            "total_count": len(documents), "status_summary": summary, "errors": job["errors"],
            "error": job.get("error"), "queue_position": self.queue_position(track_id),
        }

    def queue_position(self, track_id: str) -> int | None:
        """A pending job's place in the queue (1: it runs next), None when not pending. Jobs
        run in the order they were submitted, which is the order of ``self.jobs``."""
        if self.jobs[track_id]["status"] != PENDING:
            return None
        pending = [t for t, job in self.jobs.items() if job["status"] == PENDING]
        return pending.index(track_id) + 1

    # ---- documents ---------------------------------------------------------------------
    def documents(self) -> dict[str, Any]:
        """Documents grouped by status, with those of queued jobs as pending/processing."""
        known = doc_status.load(self.workspace)
        statuses: dict[str, list[dict[str, Any]]] = {}
        for row in known.values():
            statuses.setdefault(row["status"], []).append(row)
        for job in self.jobs.values():
            if job["status"] in (PENDING, PROCESSING):
                for doc in job["doc_ids"]:
                    if doc not in known or known[doc]["status"] != doc_status.PROCESSED:
                        statuses.setdefault(job["status"], []).append(
                            {"doc_id": doc, "file_path": "", "status": job["status"], "error": "",
                             "chunks": 0, "updated": job["updated"], "track_id": job["track_id"]})
        return {"statuses": statuses, "status_counts": {s: len(rows) for s, rows in statuses.items()}}

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
            for stored, name in job["files"].items() if wanted else ():
                data = self.workspace.read_bytes("inbox", job["track_id"], stored) or b""  # gone after a clear
                ids = {row["doc_id"] for row in parse_file(stored, data, name) if not row["error"]} & wanted
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

    def scan(self, folder: str) -> dict[str, Any]:
        """Queue the files of ``folder`` (created if missing) that hold documents not yet
        processed as one insert job, named by their path in the folder. A file that cannot
        become a document is recorded as a failed document with its error; files whose
        documents are all known are skipped. Returns the job (``processed`` or ``failed`` when
        nothing was queued) with ``scan``: the files ``queued`` and ``skipped``, the documents
        newly ``failed``.
        Raises WriteBusy while an insert job runs or is queued."""
        folder = folder.rstrip("/")
        with self._exclusive("scan", idle=True):
            fs, inner = input_filesystem(folder)
            fs.create_dir(inner, recursive=True)
            found = list_input_files([folder], exclude=self.settings.workspace)
            known = doc_status.load(self.workspace)
            new: list[tuple[str, bytes]] = []
            failures: list[dict[str, Any]] = []
            skipped = 0
            for path in sorted(found.files + [e["file_path"] for e in found.errors]):
                name = path[len(folder):].lstrip("/")
                data = read_input(path) if path in found.files else b""  # an unsupported type is not read
                rows = parse_file(path, data, name)
                status = [known.get(row["doc_id"], {}).get("status") for row in rows]
                unread = [row for row, seen in zip(rows, status) if row["error"] and seen != doc_status.FAILED]
                failures += [{**{k: row[k] for k in ("doc_id", "file_path", "error")}, "status": doc_status.FAILED,
                              "chunks": 0} for row in unread]
                if any(not row["error"] and seen != doc_status.PROCESSED for row, seen in zip(rows, status)):
                    new.append((name, data))
                elif not unread:
                    skipped += 1
            if failures:
                doc_status.update(self.workspace, failures)
            errors = [{"file_path": f["file_path"], "error": f["error"]} for f in failures]
            job = self.submit(new, "scan") if new else {
                "track_id": _track_id("scan"), "doc_ids": sorted(f["doc_id"] for f in failures), "files": {},
                "status": doc_status.FAILED if failures else doc_status.PROCESSED, "created": _now(), "errors": [],
                "report": None}
            self._save_job({**job, "errors": list({e["file_path"]: e for e in job["errors"] + errors}.values())})
        counts = {"queued": len(new), "skipped": skipped, "failed": len(failures)}
        return {**self.jobs[job["track_id"]], "scan": counts}

    # ---- manual graph edits (LightRAG's graph-editing routes) ---------------------------
    def edit_graph(self, operation: str, *args: Any) -> Any:
        """Run one GraphEditor operation (``edit_entity``, ``merge_entities``, ...) as a write;
        raises WriteBusy at once while an insert job runs, GraphEditError for a refused edit."""
        with self._exclusive("edit the graph"):
            return getattr(GraphEditor(self.workspace, self.graph, self.vectors, self.embedder, self.settings), operation)(*args)

    def health(self) -> dict[str, Any]:
        """Graph version, counts, models and whether a write is running."""
        manifest = manifests.load(self.workspace)
        return {
            "status": "healthy",
            "workspace": self.settings.workspace,
            "graph_version": manifest.graph_version,
            "documents": doc_status.counts(doc_status.load(self.workspace)),
            "entities": manifest.entities,
            "relations": manifest.relations,
            "shards": self.settings.graph.num_shards,
            "pipeline_busy": self.write_lock.locked(),
            "queued_jobs": len(self.unfinished_jobs()),
            "embedding_model": f"{self.settings.embedding.backend}:{self.settings.embedding.model}",
            "embedding_dim": self.embedder.dim,
            "llm_model": None if self.settings.llm.backend == "none" else self.settings.llm.model,
            "extraction_mode": self.settings.extraction.mode,
        }

    def close(self) -> None:
        """Stop the shard actors and the embedding workers, and release Milvus."""
        self.graph.close()
        if self.embedding_pool is not None:
            self.embedding_pool.close()
        self.vectors.close()
