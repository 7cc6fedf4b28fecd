"""Insert jobs of a served workspace: files stored under ``inbox/<track_id>/``, one record
per job under ``tracks/``, run one at a time by the indexing pipeline, so a job cut short by a
restart is run again when the service comes back."""

from __future__ import annotations

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

from lightrag_ray.config import Settings
from lightrag_ray.core.errors import short_error
from lightrag_ray.core.sources import TEXT, UPLOAD
from lightrag_ray.index.documents import parse_file
from lightrag_ray.index.embedding_pool import KeptEmbeddingPool
from lightrag_ray.index.pipeline import IndexCancelled
from lightrag_ray.index.stages.chunk import document_row
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.service.opening import OpenWorkspace
from lightrag_ray.storage import doc_status, sources

PENDING, PROCESSING, DUPLICATED, CANCELLED = "pending", "processing", "duplicated", "cancelled"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
LOG = logging.getLogger("ray.serve")  # the replica's log; job progress at most every few seconds


class InsertRejected(ValueError):
    """Nothing in the request can become a document; the message says why."""


def inbox_name(number: int, name: str, suffix: str) -> str:
    """The name under which the ``number``-th file of a job, given as ``name``, is stored:
    unique in its folder, ASCII, no directories or dot names, ending in ``suffix`` (its type)."""
    stem = _UNSAFE.sub("_", PurePosixPath(name.replace("\\", "/")).stem).strip("._")[:100]
    return f"{number:04d}-{stem or 'document'}{_UNSAFE.sub('_', suffix)}"


def now() -> str:
    """The time, as job records store it."""
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def new_track_id(prefix: str) -> str:
    """A new job's id: ``prefix``, the time, a random part."""
    return f"{prefix}_{dt.datetime.now(dt.timezone.utc):%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"


class InsertJobs:
    """The insert jobs of one workspace: queued by ``submit``, run one at a time by ``run_job``
    (holding ``write_lock``) through the indexing pipeline with the workspace's open shards,
    vector store and embedding workers."""

    def __init__(self, opened: OpenWorkspace, embedding_pool: KeptEmbeddingPool) -> None:
        """``opened``: the workspace as its writer, with a vector sink, kept open by the caller."""
        self.opened = opened
        self.settings = opened.settings
        self.workspace = opened.workspace
        self.graph = opened.graph_writer()
        self.embedding_pool = embedding_pool  # the workers, started by the first insert job
        self.write_lock = threading.Lock()
        self.stop = threading.Event()  # set to cancel the running job
        self.jobs: dict[str, dict[str, Any]] = {
            job["track_id"]: job for job in map(json.loads, self._track_files())
        }

    def _track_files(self) -> list[bytes]:
        files = self.workspace.list_files("tracks", suffix=".json")
        return [self.workspace.fs.open_input_stream(p).read() for p in files]

    def _save_job(self, job: dict[str, Any]) -> None:
        job["updated"] = now()
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
        track_id = new_track_id(prefix)
        rows: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
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
        job: dict[str, Any] = {
            "track_id": track_id, "status": PENDING, "doc_ids": doc_ids, "files": {},
            "created": now(), "errors": [{"file_path": e["file_path"], "error": e["error"]} for e in errors],
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

    def submit_scan(self, folder: str, prune: bool, doc_ids: list[str]) -> dict[str, Any]:
        """Queue one job that syncs the workspace with ``folder`` (index.sync; ``prune``: files
        gone from it are removed); ``doc_ids``: the new documents it is expected to index."""
        job = {"track_id": new_track_id("scan"), "status": PENDING, "doc_ids": doc_ids, "files": {},
               "folder": folder, "prune": prune, "created": now(), "errors": [], "report": None}
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
                inputs: dict[str, Any] = (  # a scan syncs its folder; an insert indexes its inbox copies
                    {"paths": [job["folder"]], "relative_to": job["folder"], "prune": job["prune"]} if "folder" in job
                    else {"paths": [f"{self.workspace.uri}/inbox/{track_id}"], "display_names": job["files"],
                          "display_kind": UPLOAD if track_id.startswith("upload") else TEXT})
                report = index_paths(
                    inputs.pop("paths"), self.settings, progress=lambda message: LOG.info("%s: %s", track_id, message),
                    opened=self.opened, embedding_pool=self.embedding_pool.get(niceness),
                    niceness=niceness, stop=self.stop, **inputs,
                )
            except IndexCancelled:
                job = {**self.jobs[track_id], "status": CANCELLED, "error": "cancelled while running: its "
                       "documents are marked failed; insert them again to finish, or delete them"}
            except Exception as exc:  # the job fails, the service stays up
                job = {**self.jobs[track_id], "status": doc_status.FAILED, "error": self._job_error(track_id, exc)}
                self._mark_failed(job)
            else:  # failed when one of its documents is not processed (a scan's unreadable files are not its)
                known = doc_status.load(self.workspace)
                done = all(known.get(doc, {}).get("status") == doc_status.PROCESSED for doc in job["doc_ids"])
                job = {**self.jobs[track_id], "status": doc_status.PROCESSED if done else doc_status.FAILED,
                       "report": report.to_dict()}
            self._save_job(job)
        return job

    def inbox_files(self, job: dict[str, Any]) -> Iterator[tuple[str, str, bytes, list[dict[str, Any]]]]:
        """(stored path, name, bytes, parsed document rows) of each file a job brought, from its
        inbox copy (empty once a clear removed it)."""
        for stored, name in job["files"].items():
            data = self.workspace.read_bytes("inbox", job["track_id"], stored) or b""
            yield stored, name, data, parse_file(stored, data, name)

    def _mark_failed(self, job: dict[str, Any]) -> None:
        """Record the documents of a job that raised (rolled back) as failed with its error, those
        not processed already: /documents lists them and /documents/reprocess_failed retries them,
        as it does a cancelled job's."""
        known = doc_status.load(self.workspace)
        changes = {row["doc_id"]: {**document_row(row, 0), "status": doc_status.FAILED, "error": job["error"]}
                   for *_, rows in self.inbox_files(job) for row in rows
                   if not row["error"] and known.get(row["doc_id"], {}).get("status") != doc_status.PROCESSED}
        if changes:
            doc_status.update(self.workspace, list(changes.values()))

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

    def documents(self) -> dict[str, Any]:
        """Documents grouped by status (each with its ``sources``), with those of queued jobs as
        pending/processing, and ``cancelling``: whether the running job was asked to stop."""
        known = doc_status.load(self.workspace)
        named: dict[str, list[dict[str, str]]] = {}
        for source in sources.load(self.workspace):
            named.setdefault(source["doc_id"], []).append({"source": source["source"], "kind": source["kind"]})
        statuses: dict[str, list[dict[str, Any]]] = {}
        for row in known.values():
            statuses.setdefault(row["status"], []).append({**row, "sources": named.get(row["doc_id"], [])})
        for job in self.jobs.values():
            if job["status"] in (PENDING, PROCESSING):
                for doc in job["doc_ids"]:
                    if doc not in known or known[doc]["status"] != doc_status.PROCESSED:
                        statuses.setdefault(job["status"], []).append(
                            {"doc_id": doc, "file_path": "", "status": job["status"], "error": "",
                             "chunks": 0, "updated": job["updated"], "track_id": job["track_id"]})
        running = any(job["status"] == PROCESSING for job in self.jobs.values())
        return {"statuses": statuses, "status_counts": {s: len(rows) for s, rows in statuses.items()},
                "cancelling": running and self.stop.is_set()}
