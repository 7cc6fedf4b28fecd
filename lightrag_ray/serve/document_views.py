"""The workspace's documents in LightRAG Server's shapes: one document (DocStatusResponse),
counts per status, a page of documents, the pipeline status of the insert queue."""

from __future__ import annotations

from typing import Any

from lightrag_ray.serve.api_models import DocumentsRequest

_SORT_KEYS = {"created_at": "updated", "updated_at": "updated", "id": "doc_id", "file_path": "file_path"}


def doc_view(row: dict[str, Any]) -> dict[str, Any]:
    """One document in LightRAG's DocStatusResponse shape (the start of its text and its
    length in characters; empty for documents indexed before they were kept, or not read
    yet); the last update stands for the creation time. ``metadata`` names the sources the
    document comes from (file, record or upload, each with its kind) and its version (the
    content hash a changed source replaces)."""
    return {"id": row["doc_id"], "content_summary": row.get("content_summary") or "",
            "content_length": row.get("content_length") or 0, "status": row["status"],
            "created_at": row.get("updated") or "", "updated_at": row.get("updated") or "",
            "track_id": row.get("track_id"), "chunks_count": row.get("chunks"), "error_msg": row.get("error") or None,
            "metadata": {"sources": row.get("sources") or [], "version": row["doc_id"].removeprefix("doc-")},
            "file_path": row.get("file_path") or ""}


def status_counts(statuses: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """Documents per status plus ``all`` (LightRAG's counts)."""
    counts = {status: len(rows) for status, rows in statuses.items()}
    return {**counts, "all": sum(counts.values())}


def paginate(statuses: dict[str, list[dict[str, Any]]], request: DocumentsRequest) -> dict[str, Any]:
    """One page of documents, filtered and sorted as asked, with LightRAG's pagination info."""
    wanted = request.statuses()
    rows = [row for status, group in statuses.items() if wanted is None or status in wanted for row in group]
    key = _SORT_KEYS[request.sort_field]
    rows.sort(key=lambda row: (row.get(key) or "", row["doc_id"]), reverse=request.sort_direction == "desc")
    total, size, page = len(rows), request.page_size, request.page
    pages = (total + size - 1) // size
    return {
        "documents": [doc_view(row) for row in rows[(page - 1) * size: page * size]],
        "pagination": {"page": page, "page_size": size, "total_count": total, "total_pages": pages,
                       "has_next": page < pages, "has_prev": page > 1},
        "status_counts": status_counts(statuses),
    }


def pipeline_status(statuses: dict[str, list[dict[str, Any]]], cancelling: bool = False) -> dict[str, Any]:
    """LightRAG's pipeline status from the insert queue: the running job (its documents are
    the ``processing`` ones) is the pipeline's one batch; queued jobs are a pending request;
    ``cancelling``: the running job was asked to stop (it stops after its extraction batch)."""
    running = statuses.get("processing", [])
    queued = {row["track_id"] for row in statuses.get("pending", [])}
    track = running[0]["track_id"] if running else ""
    cancelling = cancelling and bool(running)
    messages = [f"indexing {len(running)} document(s) of insert job {track}"] if running else []
    messages += [f"cancelling insert job {track}: it stops after its current extraction batch"] if cancelling else []
    messages += [f"{len(queued)} insert job(s) queued"] if queued else []
    return {
        "autoscanned": False, "busy": bool(running or queued), "job_name": f"insert {track}" if track else "",
        "job_start": running[0].get("updated") if running else None, "docs": len(running),
        "batchs": int(bool(running)), "cur_batch": int(bool(running)), "request_pending": bool(queued),
        "cancellation_requested": cancelling, "latest_message": messages[-1] if messages else "no insert job is running",
        "history_messages": messages, "update_status": {},
    }


def documents_by_status(found: dict[str, Any]) -> dict[str, Any]:
    """The workspace's documents answer (WorkspaceService.documents) with each document also in
    LightRAG's DocStatusResponse shape."""
    statuses = {status: [{**row, **doc_view(row)} for row in rows] for status, rows in found["statuses"].items()}
    return {**found, "statuses": statuses}
