"""LightRAG Server's document routes, done by the workspace deployment (the one writer):
inserts (``/documents/text``, ``/texts``, ``/upload``, ``/scan``, ``/reprocess_failed``) run
as background jobs followed at ``/documents/track_status/{id}`` and cancelled at
``/documents/cancel/{id}`` or ``/documents/cancel_pipeline``; listings (``GET /documents``,
``/documents/paginated``, ``/status_counts``, ``/pipeline_status``); deletes and clearing
(``/documents/delete_document``, ``DELETE /documents``, ``/documents/clear_cache``); the file
types uploads accept. A write an insert job holds off answers 409 (LightRAG's busy statuses
where it has them). ``/documents/delete_entity`` and ``/documents/delete_relation`` delete
graph items: they are in routes.graph.
"""

# No `from __future__ import annotations`: FastAPI must see the real types of the route parameters.
from collections.abc import Awaitable
from typing import Any

from fastapi import APIRouter, File, HTTPException, UploadFile
from fastapi.responses import JSONResponse

from lightrag_ray.index.documents import SUPPORTED_SUFFIXES
from lightrag_ray.serve.api_models import (
    CancelPipelineResponse,
    ClearCacheRequest,
    ClearCacheResponse,
    ClearDocumentsResponse,
    DeleteDocRequest,
    DocumentsRequest,
    InsertResponse,
    InsertTextRequest,
    InsertTextsRequest,
    ReprocessResponse,
    ScanRequest,
    ScanResponse,
)
from lightrag_ray.serve.deployments import cause_message
from lightrag_ray.serve.document_views import documents_by_status, paginate, pipeline_status, status_counts
from lightrag_ray.serve.routes.replica import NewSpaceDep, Space, SpaceDep

router = APIRouter(tags=["documents"])


def _check_inserts(space: Space) -> None:
    """409 when insert jobs could only fail: no LLM for the ``llm`` extraction mode."""
    if space.settings.llm.backend == "none" and space.settings.extraction.mode == "llm":
        raise HTTPException(409, "inserts are off: this server has no LLM for extraction. Restart it with "
                                 "--llm-base-url http://HOST:PORT/v1, or with --extraction-mode fast (no LLM)")


def _insert_response(job: dict[str, Any]) -> InsertResponse:
    if job["status"] == "duplicated":
        message = f"all {len(job['doc_ids'])} documents are already indexed"
    else:
        message = f"{len(job['doc_ids'])} document(s) queued; follow them at /documents/track_status/{job['track_id']}"
    status = "duplicated" if job["status"] == "duplicated" else "success"
    return InsertResponse(status=status, message=message, track_id=job["track_id"], doc_ids=job["doc_ids"])


async def _submit(space: Space, files: list[tuple[str, bytes]], prefix: str, as_text: bool = False) -> InsertResponse:
    from lightrag_ray.service.jobs import InsertRejected

    _check_inserts(space)
    try:
        job = await space.writer.submit(files, prefix, as_text)
    except InsertRejected as exc:
        raise HTTPException(400, cause_message(exc)) from None
    return _insert_response(job)


async def _write(call: Awaitable[Any]) -> tuple[Any, Any]:
    """Await a write of the workspace deployment: ``(result, None)``, or ``(None, the
    WriteBusy)`` when an insert job holds the workspace."""
    from lightrag_ray.service.workspace_service import WriteBusy  # the write path loads in the owner, not here

    try:
        return await call, None
    except WriteBusy as exc:
        return None, exc


def _busy_response(busy: Any) -> JSONResponse:
    """409 for a write held off by an insert job: what to wait for, its track id, Retry-After."""
    return JSONResponse({"detail": str(busy), "track_id": busy.track_id}, status_code=409, headers={"Retry-After": "5"})


# ---- inserts ---------------------------------------------------------------------------------
@router.post("/documents/text")
async def insert_text(request: InsertTextRequest, space: NewSpaceDep) -> InsertResponse:
    """Index one text in the background; returns the track id."""
    name = request.file_source or "text.txt"
    return await _submit(space, [(name, request.text.encode("utf-8"))], "insert", as_text=True)


@router.post("/documents/texts")
async def insert_texts(request: InsertTextsRequest, space: NewSpaceDep) -> InsertResponse:
    """Index several texts in the background as one job."""
    if request.file_sources and len(request.file_sources) != len(request.texts):
        raise HTTPException(422, "file_sources must be empty or as long as texts")
    sources = request.file_sources or [f"text_{i}.txt" for i in range(len(request.texts))]
    files = [(s, t.encode("utf-8")) for s, t in zip(sources, request.texts)]
    return await _submit(space, files, "insert", as_text=True)


@router.post("/documents/upload")
async def upload(space: NewSpaceDep, file: UploadFile = File(...)) -> InsertResponse:
    """Index an uploaded file (text, records, PDF, DOCX, PPTX, XLSX, HTML) in the background."""
    return await _submit(space, [(file.filename or "upload.txt", await file.read())], "upload")


@router.get("/documents/supported_file_types", include_in_schema=False)
async def supported_file_types() -> JSONResponse:
    """The file suffixes uploads accept (no parser engines to choose from); the WebUI's upload
    dialog reads it."""
    body = {"supported_extensions": sorted(SUPPORTED_SUFFIXES), "engines": {}}
    return JSONResponse(body, headers={"Cache-Control": "no-store"})


@router.post("/documents/scan")
async def scan(space: NewSpaceDep, body: ScanRequest | None = None) -> ScanResponse:
    """Sync the input folder as one insert job: new files indexed, changed ones replacing their
    old version, moved ones re-pointed, unchanged ones skipped unread, unreadable ones listed as
    failed documents; ``{"prune": true}`` also removes the documents of files gone from it.
    Skipped while an insert job runs or is queued."""
    _check_inserts(space)
    prune = body is not None and body.prune
    job, busy = await _write(space.writer.scan(space.input_dir, prune))
    if busy is not None:
        return ScanResponse(status="scanning_skipped_pipeline_busy", message=str(busy), track_id=busy.track_id)
    counts = job["scan"]
    synced = "".join(f", {counts[key]} {key}" for key in ("replaced", "moved", "removed") if counts[key])
    return ScanResponse(status="scanning_started", track_id=job["track_id"], message=(
        f"Scanning {space.input_dir}: {counts['queued']} new files queued, {counts['skipped']} known files skipped, "
        f"{counts['failed']} documents that cannot be read (listed as failed){synced}; follow them at "
        f"/documents/track_status/{job['track_id']}"))


@router.post("/documents/reprocess_failed")
async def reprocess_failed(space: SpaceDep) -> ReprocessResponse:
    """Queue the failed documents again as one insert job, from their uploaded copies."""
    _check_inserts(space)
    job = await space.writer.reprocess_failed()
    if job is None:
        return ReprocessResponse(status="reprocessing_started", message=(
            "No failed document with an uploaded copy to reprocess (a file that could not be read is retried "
            "by uploading or scanning it again once fixed)."))
    missing = f"; {job['missing']} failed documents have no uploaded copy to retry" if job["missing"] else ""
    return ReprocessResponse(status="reprocessing_started", track_id=job["track_id"], message=(
        f"Reprocessing of {len(job['doc_ids'])} documents has been queued; follow them at "
        f"/documents/track_status/{job['track_id']}{missing}."))


# ---- insert jobs -----------------------------------------------------------------------------
@router.get("/documents/track_status/{track_id}")
async def track_status(track_id: str, space: SpaceDep) -> dict[str, Any]:
    """Progress of one insert job and its documents."""
    found = await space.writer.track_status(track_id)
    if found is None:
        raise HTTPException(404, f"no insert job with track id {track_id!r}")
    return found


@router.post("/documents/cancel/{track_id}")
async def cancel(track_id: str, space: SpaceDep) -> dict[str, Any]:
    """Cancel an insert job: a queued one never runs, a running one stops after its
    current extraction batch (its documents are then marked failed)."""
    job = await space.writer.cancel(track_id)
    if job is None:
        raise HTTPException(404, f"no insert job with track id {track_id!r}")
    if job["status"] not in ("pending", "processing", "cancelled"):
        raise HTTPException(409, f"job {track_id} has already ended ({job['status']})")
    stopping = job["status"] == "processing"
    return {"track_id": track_id, "status": "cancelling" if stopping else "cancelled",
            "message": f"follow it at /documents/track_status/{track_id}" if stopping else "the job will not run"}


@router.post("/documents/cancel_pipeline")
async def cancel_pipeline(space: SpaceDep) -> CancelPipelineResponse:
    """Cancel every queued and running insert job (``not_busy`` when there is none)."""
    cancelled = await space.writer.cancel_all()
    if not cancelled:
        return CancelPipelineResponse(status="not_busy", message="Pipeline is not currently running. No cancellation needed.")
    return CancelPipelineResponse(status="cancellation_requested", message=(
        f"Pipeline cancellation has been requested for {len(cancelled)} insert job(s) ({', '.join(cancelled)}): "
        "queued ones will not run, the running one stops after its current extraction batch. Its documents "
        "will be marked as FAILED."))


# ---- listings --------------------------------------------------------------------------------
@router.get("/documents")
async def documents(space: SpaceDep) -> dict[str, Any]:
    """Documents grouped by status, each in LightRAG's DocStatusResponse shape plus our fields."""
    return documents_by_status(await space.writer.documents())


@router.post("/documents/paginated")
async def documents_paginated(request: DocumentsRequest, space: SpaceDep) -> dict[str, Any]:
    """A page of documents (status filter, sorting) with pagination info and status counts."""
    return paginate((await space.writer.documents())["statuses"], request)


@router.get("/documents/status_counts")
async def documents_status_counts(space: SpaceDep) -> dict[str, Any]:
    """Documents per status, plus ``all``."""
    return {"status_counts": status_counts((await space.writer.documents())["statuses"])}


@router.get("/documents/pipeline_status")
async def documents_pipeline_status(space: SpaceDep) -> dict[str, Any]:
    """The insert queue in LightRAG's pipeline-status shape."""
    found = await space.writer.documents()
    return pipeline_status(found["statuses"], found["cancelling"])


# ---- deletes ---------------------------------------------------------------------------------
@router.delete("/documents/delete_document")
async def delete_document(request: DeleteDocRequest, space: SpaceDep) -> dict[str, Any]:
    """Delete documents; entities and relations they shared keep their other sources."""
    result, busy = await _write(space.writer.delete(request.doc_ids))
    if busy is not None:
        return _busy_response(busy)
    if not result["deleted"]:
        raise HTTPException(404, f"none of these documents exist: {', '.join(result['not_found'])}")
    return {"status": "deletion_completed",
            "message": f"deleted {len(result['deleted'])} documents{request.unsupported()}",
            "doc_id": ", ".join(result["deleted"]), **result}


@router.delete("/documents")
async def clear_documents(space: SpaceDep) -> ClearDocumentsResponse:
    """Delete every document with its graph, vectors and uploaded copy; ``busy`` while an
    insert job runs or is queued. Files in the input folder and cached extractions stay."""
    result, busy = await _write(space.writer.clear())
    if busy is not None:
        return ClearDocumentsResponse(status="busy", message=str(busy))
    return ClearDocumentsResponse(status="success", message=(
        f"All documents cleared successfully. Deleted {len(result['deleted'])} documents "
        f"({result['entities_removed']} entities, {result['relations_removed']} relations) and {result['files']} files."))


@router.post("/documents/clear_cache")
async def clear_cache(space: SpaceDep, body: ClearCacheRequest | None = None) -> ClearCacheResponse:
    """Empty the LLM cache (the cached chunk extractions); 409 while an insert job runs."""
    count, busy = await _write(space.writer.clear_cache())
    if busy is not None:
        return _busy_response(busy)
    return ClearCacheResponse(status="success", message=(
        f"Successfully cleared all cache: {count} cached chunk extractions (the next insert of their documents "
        "asks the LLM again); answers are not cached, entity summaries are part of the graph and stay."))
