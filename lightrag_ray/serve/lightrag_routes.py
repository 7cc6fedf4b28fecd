"""The routes LightRAG 1.5's WebUI calls beyond the REST core, and its CORS policy:
``/auth-status``, ``/login``, ``/documents/paginated``, ``/documents/pipeline_status``,
``/documents/status_counts``, ``/graph/label/popular``, ``/graph/label/search`` and
``/graph/entity/exists``; and its document management: ``DELETE /documents`` (clear),
``/documents/clear_cache``, ``/documents/reprocess_failed``, ``/documents/cancel_pipeline``
and ``/documents/scan`` (the input folder).

``LightRAGRoutes`` is mixed into the Serve ingress (which supplies the workspace handle);
``install`` puts its routes and the CORS middleware on the app.

There are no user accounts, so like LightRAG Server without ``AUTH_ACCOUNTS`` both
``/auth-status`` and ``/login`` hand out a guest token (``auth_mode: disabled``). The token
is never checked: without an API key every request passes; with one, the key stays
required on every route (X-API-Key), as in LightRAG 1.5, where a guest token
authenticates nothing once an API key is set.
"""

# No `from __future__ import annotations`: FastAPI must see the real types of the route parameters.
import base64
import importlib.metadata
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from fastapi.security import OAuth2PasswordRequestForm

from lightrag_ray.serve.api_models import (
    CancelPipelineResponse,
    ClearCacheRequest,
    ClearCacheResponse,
    ClearDocumentsResponse,
    DocumentsRequest,
    ReprocessResponse,
    ScanResponse,
)

router = APIRouter()
VERSION = importlib.metadata.version("lightrag-ray")
DEFAULT_CORS_ORIGINS = ("*",)  # LightRAG Server's default (CORS_ORIGINS unset)
_SORT_KEYS = {"created_at": "updated", "updated_at": "updated", "id": "doc_id", "file_path": "file_path"}


def _b64(value: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(value, separators=(",", ":")).encode()).decode()


# JWT-shaped so the WebUI can read its subject and role; unsigned, since nothing checks it.
GUEST_TOKEN = f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64({'sub': 'guest', 'role': 'guest', 'metadata': {'auth_mode': 'disabled'}})}."


def guest_login(request: Request) -> dict[str, Any]:
    """LightRAG's guest login answer (``/login``; ``/auth-status`` adds ``auth_configured``)."""
    message = "Authentication is disabled. Using guest access."
    if request.app.state.lightrag_settings()["api_key"]:
        message += " This server requires its API key (X-API-Key) on every other route: set it in the WebUI's settings."
    return {"access_token": GUEST_TOKEN, "token_type": "bearer", "auth_mode": "disabled", "message": message,
            "core_version": VERSION, "api_version": VERSION, "webui_title": "lightrag-ray",
            "webui_description": "LightRAG on Ray"}


def doc_view(row: dict[str, Any]) -> dict[str, Any]:
    """One document in LightRAG's DocStatusResponse shape; the text itself is not stored,
    so ``content_summary`` is empty, and the last update stands for the creation time."""
    return {"id": row["doc_id"], "content_summary": "", "content_length": 0, "status": row["status"],
            "created_at": row.get("updated") or "", "updated_at": row.get("updated") or "",
            "track_id": row.get("track_id"), "chunks_count": row.get("chunks"), "error_msg": row.get("error") or None,
            "metadata": {}, "file_path": row.get("file_path") or ""}


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


def pipeline_status(statuses: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """LightRAG's pipeline status from the insert queue: the running job (its documents are
    the ``processing`` ones) is the pipeline's one batch; queued jobs are a pending request."""
    running = statuses.get("processing", [])
    queued = {row["track_id"] for row in statuses.get("pending", [])}
    track = running[0]["track_id"] if running else ""
    messages = [f"indexing {len(running)} document(s) of insert job {track}"] if running else []
    messages += [f"{len(queued)} insert job(s) queued"] if queued else []
    return {
        "autoscanned": False, "busy": bool(running or queued), "job_name": f"insert {track}" if track else "",
        "job_start": running[0].get("updated") if running else None, "docs": len(running),
        "batchs": int(bool(running)), "cur_batch": int(bool(running)), "request_pending": bool(queued),
        "cancellation_requested": False, "latest_message": messages[-1] if messages else "no insert job is running",
        "history_messages": messages, "update_status": {},
    }


def search_labels(labels: list[str], query: str, limit: int) -> list[str]:
    """Names holding ``query`` (any case): the exact name first, then names starting with it,
    then the others; shorter names first within each group."""
    needle = query.strip().lower()
    hits = [name for name in labels if needle and needle in name.lower()]
    hits.sort(key=lambda name: (name.lower() != needle, not name.lower().startswith(needle), len(name), name))
    return hits[:limit]


async def workspace_write(call: Awaitable[Any]) -> tuple[Any, Any]:
    """Await a write of the workspace deployment: ``(result, None)``, or ``(None, the
    WriteBusy)`` when an insert job holds the workspace."""
    from lightrag_ray.serve.workspace_service import WriteBusy  # the write path loads in the owner, not here

    try:
        return await call, None
    except WriteBusy as exc:
        return None, getattr(exc, "cause", None) or exc  # Ray's wrapper holds the raised one as ``cause``


def busy_response(busy: Any) -> JSONResponse:
    """409 for a write held off by an insert job: what to wait for, its track id, Retry-After."""
    return JSONResponse({"detail": str(busy), "track_id": busy.track_id}, status_code=409, headers={"Retry-After": "5"})


class LightRAGRoutes:
    """The WebUI's routes, as methods of the Serve ingress class that inherits them."""

    workspace: Any  # the workspace deployment's handle
    input_dir: str  # the folder /documents/scan indexes

    if TYPE_CHECKING:  # provided by the ingress
        def _check_inserts(self) -> None: ...

    @router.get("/auth-status")
    async def auth_status(self, request: Request) -> dict[str, Any]:
        """Whether logging in is needed (never: there are no accounts) and a guest token; no key needed."""
        return {"auth_configured": False, **guest_login(request)}

    @router.post("/login")
    async def login(self, request: Request, form: OAuth2PasswordRequestForm = Depends()) -> dict[str, Any]:
        """LightRAG's login form; without accounts any name and password get the guest token."""
        return guest_login(request)

    @router.get("/auth/verify")
    async def verify_credentials(self) -> dict[str, str]:
        """200 once the guard has let the key through; the WebUI's key dialog reads the 403's
        ``API Key required`` / ``Invalid API Key`` otherwise."""
        return {"status": "ok"}

    @router.post("/documents/paginated")
    async def documents_paginated(self, request: DocumentsRequest) -> dict[str, Any]:
        """A page of documents (status filter, sorting) with pagination info and status counts."""
        return paginate((await self.workspace.documents.remote())["statuses"], request)

    @router.get("/documents/status_counts")
    async def documents_status_counts(self) -> dict[str, Any]:
        """Documents per status, plus ``all``."""
        return {"status_counts": status_counts((await self.workspace.documents.remote())["statuses"])}

    @router.get("/documents/pipeline_status")
    async def documents_pipeline_status(self) -> dict[str, Any]:
        """The insert queue in LightRAG's pipeline-status shape."""
        return pipeline_status((await self.workspace.documents.remote())["statuses"])

    @router.get("/graph/label/popular")
    async def popular_labels(self, limit: int = Query(300, ge=1, le=1000)) -> list[str]:
        """The best-connected entity names, most relations first."""
        graph = await self.workspace.subgraph.remote("*", 1, limit)
        return [node["id"] for node in graph["nodes"]]

    @router.get("/graph/label/search")
    async def label_search(self, q: str = Query(...), limit: int = Query(50, ge=1, le=100)) -> list[str]:
        """Entity names holding ``q`` (any case), best matches first."""
        return search_labels(await self.workspace.labels.remote(), q, limit)

    @router.get("/graph/entity/exists")
    async def entity_exists(self, name: str = Query(..., min_length=1)) -> dict[str, bool]:
        """Whether an entity has exactly this name."""
        return {"exists": name in set(await self.workspace.labels.remote())}


    # ---- document management ------------------------------------------------------------
    @router.delete("/documents")
    async def clear_documents(self) -> ClearDocumentsResponse:
        """Delete every document with its graph, vectors and uploaded copy; ``busy`` while an
        insert job runs or is queued. Files in the input folder and cached extractions stay."""
        result, busy = await workspace_write(self.workspace.clear.remote())
        if busy is not None:
            return ClearDocumentsResponse(status="busy", message=str(busy))
        return ClearDocumentsResponse(status="success", message=(
            f"All documents cleared successfully. Deleted {len(result['deleted'])} documents "
            f"({result['entities_removed']} entities, {result['relations_removed']} relations) and {result['files']} files."))

    @router.post("/documents/clear_cache")
    async def clear_cache(self, body: ClearCacheRequest | None = None) -> ClearCacheResponse:
        """Empty the LLM cache (the cached chunk extractions); 409 while an insert job runs."""
        count, busy = await workspace_write(self.workspace.clear_cache.remote())
        if busy is not None:
            return busy_response(busy)
        return ClearCacheResponse(status="success", message=(
            f"Successfully cleared all cache: {count} cached chunk extractions (the next insert of their documents "
            "asks the LLM again); answers are not cached, entity summaries are part of the graph and stay."))

    @router.post("/documents/reprocess_failed")
    async def reprocess_failed(self) -> ReprocessResponse:
        """Queue the failed documents again as one insert job, from their uploaded copies."""
        self._check_inserts()
        job = await self.workspace.reprocess_failed.remote()
        if job is None:
            return ReprocessResponse(status="reprocessing_started", message=(
                "No failed document with an uploaded copy to reprocess (a file that could not be read is retried "
                "by uploading or scanning it again once fixed)."))
        missing = f"; {job['missing']} failed documents have no uploaded copy to retry" if job["missing"] else ""
        return ReprocessResponse(status="reprocessing_started", track_id=job["track_id"], message=(
            f"Reprocessing of {len(job['doc_ids'])} documents has been queued; follow them at "
            f"/documents/track_status/{job['track_id']}{missing}."))

    @router.post("/documents/cancel_pipeline")
    async def cancel_pipeline(self) -> CancelPipelineResponse:
        """Cancel every queued and running insert job (``not_busy`` when there is none)."""
        cancelled = await self.workspace.cancel_all.remote()
        if not cancelled:
            return CancelPipelineResponse(status="not_busy", message="Pipeline is not currently running. No cancellation needed.")
        return CancelPipelineResponse(status="cancellation_requested", message=(
            f"Pipeline cancellation has been requested for {len(cancelled)} insert job(s) ({', '.join(cancelled)}): "
            "queued ones will not run, the running one stops after its current extraction batch. Its documents "
            "will be marked as FAILED."))

    @router.post("/documents/scan")
    async def scan(self) -> ScanResponse:
        """Index the input folder's new files as one insert job; files already processed are
        skipped, unreadable ones become failed documents. Skipped while an insert job runs or is queued."""
        self._check_inserts()
        job, busy = await workspace_write(self.workspace.scan.remote(self.input_dir))
        if busy is not None:
            return ScanResponse(status="scanning_skipped_pipeline_busy", message=str(busy), track_id=busy.track_id)
        counts = job["scan"]
        return ScanResponse(status="scanning_started", track_id=job["track_id"], message=(
            f"Scanning {self.input_dir}: {counts['queued']} new files queued, {counts['skipped']} known files skipped, "
            f"{counts['failed']} documents that cannot be read (listed as failed); follow them at "
            f"/documents/track_status/{job['track_id']}"))


class LazyCORS:
    """CORS with LightRAG's policy for the origins the app is configured with, built on the
    first request (the Serve replica sets its settings after this module is imported)."""

    def __init__(self, app: Any, origins: Callable[[], list[str]]) -> None:
        self.app = app
        self.origins = origins
        self.cors: CORSMiddleware | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.cors is None:
            origins = list(self.origins())
            # credentials only for an explicit origin list: "*" with credentials is not allowed by browsers
            self.cors = CORSMiddleware(self.app, allow_origins=origins, allow_credentials=bool(origins) and "*" not in origins,
                                       allow_methods=["*"], allow_headers=["*"], expose_headers=["X-New-Token"])
        await self.cors(scope, receive, send)


def install(api: FastAPI, settings: Callable[[], dict[str, Any]]) -> None:
    """Serve the WebUI routes on ``api`` (for an ingress class inheriting LightRAGRoutes) and
    CORS for ``settings()["cors_origins"]``; ``settings()["api_key"]`` tells whether a key is
    required. Call it after adding the other middleware: CORS must be the outermost, so that
    preflights need no key and error answers carry its headers."""
    api.state.lightrag_settings = settings  # the app's own: Serve may hand the replica a copy of the app module's state
    api.include_router(router)
    api.add_middleware(LazyCORS, origins=lambda: settings()["cors_origins"])
