"""The Ray Serve application: LightRAG Server's REST routes plus OpenAI- and Ollama-compatible chat
APIs (their routes and error shapes in openai_routes / openai_errors and ollama_routes).

``build_app`` is the typed builder that ``serve_config.yaml`` (and ``lightrag-ray serve``)
points at. The FastAPI ingress runs the QueryEngine (autoscaled): it reads the graph
shards and a Milvus server directly, and reaches the embedder, the LLM, the workspace
owner (writes; vector lookups of a Milvus Lite file) through awaited deployment handles.
"""

# No `from __future__ import annotations`: FastAPI must see the real types of the route
# parameters, and Serve's ingress wrapper hides this module's globals from it.
import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import ray
from fastapi import FastAPI, File, HTTPException, Query, Request, UploadFile
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from ray.serve import Application

from lightrag_ray.config import Settings, load_settings
from lightrag_ray.models.llm import LLMError
from lightrag_ray.query.engine import QueryEngine
from lightrag_ray.query.stores import ThreadedVectorIndex, VectorIndex
from lightrag_ray.serve.api_models import (
    DeleteDocRequest,
    InsertResponse,
    InsertTextRequest,
    InsertTextsRequest,
    QueryRequest,
    lightrag_data,
    processing_info,
)
from lightrag_ray.serve.deployments import (
    SERVING,
    EmbedderDeployment,
    HandleEmbedder,
    HandleLLM,
    HandleVectorIndex,
    LLMDeployment,
    WorkspaceDeployment,
    cause_message,
    llm_failure,
)
from lightrag_ray.serve.graph_edit_routes import GraphEditRoutes
from lightrag_ray.serve.graph_edit_routes import install as install_graph_edit_routes
from lightrag_ray.serve.http_guard import RequestGuard, has_key
from lightrag_ray.serve.lightrag_routes import DEFAULT_CORS_ORIGINS, LightRAGRoutes, busy_response, doc_view, workspace_write
from lightrag_ray.serve.lightrag_routes import install as install_lightrag_routes
from lightrag_ray.serve.ollama_routes import OllamaRoutes, ollama_error_body
from lightrag_ray.serve.ollama_routes import install as install_ollama_routes
from lightrag_ray.serve.openai_errors import error_body, error_response, is_openai_path
from lightrag_ray.serve.openai_routes import OpenAIRoutes
from lightrag_ray.serve.openai_routes import install as install_openai_routes
from lightrag_ray.serve.webui_routes import WebUIRoutes
from lightrag_ray.serve.webui_routes import install as install_webui_routes
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph_reader import GraphUnavailableError, ShardReader
from lightrag_ray.storage.vectors import is_server_uri, open_store
from lightrag_ray.storage.workspace import Workspace

API_KEY_ENV = "LIGHTRAG_RAY_API_KEY"
_GUARD = {"api_key": None, "max_body_bytes": 50 * 1024 * 1024, "cors_origins": list(DEFAULT_CORS_ORIGINS)}

api = FastAPI(
    title="lightrag-ray",
    description="Graph-based RAG on Ray: LightRAG Server routes and an OpenAI-compatible chat API.",
)
api.add_middleware(RequestGuard, settings=lambda: (_GUARD["api_key"], _GUARD["max_body_bytes"]),
                   error_body=ollama_error_body(error_body),  # OpenAI's error shape on /v1, Ollama's on /api
                   denied_status=lambda path: 401 if is_openai_path(path) else 403)  # each contract's status
install_openai_routes(api)


@api.exception_handler(LLMError)
async def _llm_failed(request: Request, exc: LLMError) -> JSONResponse:
    return error_response(request, 502, llm_failure(exc))


@api.exception_handler(GraphUnavailableError)
async def _graph_unavailable(request: Request, exc: GraphUnavailableError) -> JSONResponse:
    return error_response(request, 503, f"the knowledge graph is unavailable: {exc}", headers={"Retry-After": "1"})


install_ollama_routes(api)  # after the handlers above: on /api their errors take Ollama's shape
install_graph_edit_routes(api)
install_lightrag_routes(api, lambda: _GUARD)  # the WebUI's routes; its CORS wraps every other middleware
install_webui_routes(api)  # the WebUI itself, when the app is built with one


def _insert_response(job: dict[str, Any]) -> InsertResponse:
    if job["status"] == "duplicated":
        message = f"all {len(job['doc_ids'])} documents are already indexed"
    else:
        message = f"{len(job['doc_ids'])} document(s) queued; follow them at /documents/track_status/{job['track_id']}"
    status = "duplicated" if job["status"] == "duplicated" else "success"
    return InsertResponse(status=status, message=message, track_id=job["track_id"], doc_ids=job["doc_ids"])


@serve.deployment(
    ray_actor_options={"num_cpus": 0.1, **SERVING},
    autoscaling_config={"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 8},
    max_ongoing_requests=64,
)
@serve.ingress(api)
class Ingress(OpenAIRoutes, OllamaRoutes, LightRAGRoutes, WebUIRoutes, GraphEditRoutes):
    """HTTP front door; stateless, so it scales out."""

    def __init__(self, settings: dict[str, Any], embedder: Any, llm: Any, workspace: Any,
                 api_key: str | None, max_body_bytes: int, cors_origins: tuple[str, ...] = DEFAULT_CORS_ORIGINS,
                 webui_dir: str | None = None, input_dir: str | None = None) -> None:
        _GUARD.update(api_key=api_key, max_body_bytes=max_body_bytes, cors_origins=list(cors_origins))
        self.webui_dir = webui_dir
        self.settings = Settings.model_validate(settings)
        self.workspace = workspace
        self.input_dir = input_dir or f"{self.settings.workspace}/inputs"
        self.embedder = embedder
        self.llm = HandleLLM(llm) if self.settings.llm.backend != "none" else None
        self.query_engine: QueryEngine | None = None
        self.opening = asyncio.Lock()
        self.node_id = ray.get_runtime_context().get_node_id()

    async def _engine(self) -> QueryEngine:
        """The query engine, opened on first use: graph reads go straight to the shard
        actors, vector reads to a Milvus server, or to the owner of a Milvus Lite file."""
        async with self.opening:
            if self.query_engine is None:
                settings = self.settings
                manifest = await asyncio.to_thread(manifests.load, Workspace(settings.workspace))
                reader = ShardReader.for_settings(settings, manifest.num_shards or settings.graph.num_shards)
                vectors: VectorIndex = HandleVectorIndex(self.workspace)
                if is_server_uri(settings.milvus_uri()):
                    dim = manifest.embedding_dim or await self.embedder.dimension.remote()
                    vectors = ThreadedVectorIndex(await asyncio.to_thread(open_store, settings, dim))
                self.query_engine = QueryEngine(settings, HandleEmbedder(self.embedder), vectors, reader, self.llm)
        return self.query_engine

    def _need_llm(self) -> None:
        if self.llm is None:
            raise HTTPException(503, "no LLM configured: set llm.backend and llm.base_url in the app's "
                                     "settings, or use /query/data for the context alone")

    # ---- queries ---------------------------------------------------------------------
    @api.post("/query")
    async def query(self, request: QueryRequest) -> dict[str, Any]:
        """Answer a question (or, with only_need_context / only_need_prompt, return the context
        text / the prompt); ``llm_generated`` says whether the LLM wrote the response."""
        started = time.perf_counter()
        param = request.param()
        engine = await self._engine()
        context, _, _ = await engine.retrieve(request.query, param)
        messages = engine.answer_messages(request.query, context, param)
        if request.only_need_context or request.only_need_prompt:
            response = context.text if request.only_need_context else "\n\n".join(m["content"] for m in messages)
        else:
            self._need_llm()
            response = await self.llm.complete(messages)
        return {"response": response, "references": request.answer_references(context),
                "response_time": round(time.perf_counter() - started, 3),
                "llm_generated": not (request.only_need_context or request.only_need_prompt)}

    @api.post("/query/stream")
    async def query_stream(self, request: QueryRequest) -> StreamingResponse:
        """The answer as newline-delimited JSON: references first, then response pieces; with
        ``stream: false`` one line holding the whole answer and the references (LightRAG's)."""
        self._need_llm()
        param = request.param()
        engine = await self._engine()
        context, _, _ = await engine.retrieve(request.query, param)

        async def lines() -> AsyncIterator[str]:
            refs = request.answer_references(context)
            try:
                if request.stream is False:
                    answer = await self.llm.complete(engine.answer_messages(request.query, context, param))
                    yield json.dumps({"response": answer, "llm_generated": True,
                                      **({"references": refs} if refs is not None else {})}) + "\n"
                    return
                if refs is not None:
                    yield json.dumps({"references": refs}) + "\n"
                async for piece in engine.generate_stream(request.query, context, param):
                    yield json.dumps({"response": piece}) + "\n"
            except LLMError as exc:
                yield json.dumps({"error": llm_failure(exc)}) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @api.post("/query/data")
    async def query_data(self, request: QueryRequest) -> dict[str, Any]:
        """Retrieval only, in LightRAG's shape: entities, relationships, chunks and per-file
        references, no generation."""
        started = time.perf_counter()
        engine = await self._engine()
        context, keywords, calls = await engine.retrieve(request.query, request.param())
        ours = {"llm_calls": calls, "seconds": round(time.perf_counter() - started, 4),
                "context_tokens_budget": request.max_total_tokens}
        return {
            "status": "success",
            "message": "Query processed successfully",
            "data": lightrag_data(context),
            "metadata": {
                "query_mode": request.mode,
                "keywords": {"high_level": keywords.high, "low_level": keywords.low},
                "processing_info": {**processing_info(context, request.mode), **ours},
            },
        }

    # ---- documents -------------------------------------------------------------------
    @api.post("/documents/text")
    async def insert_text(self, request: InsertTextRequest) -> InsertResponse:
        """Index one text in the background; returns the track id."""
        name = request.file_source or "text.txt"
        return await self._submit([(name, request.text.encode("utf-8"))], "insert", as_text=True)

    @api.post("/documents/texts")
    async def insert_texts(self, request: InsertTextsRequest) -> InsertResponse:
        """Index several texts in the background as one job."""
        if request.file_sources and len(request.file_sources) != len(request.texts):
            raise HTTPException(422, "file_sources must be empty or as long as texts")
        sources = request.file_sources or [f"text_{i}.txt" for i in range(len(request.texts))]
        files = [(s, t.encode("utf-8")) for s, t in zip(sources, request.texts)]
        return await self._submit(files, "insert", as_text=True)

    @api.post("/documents/upload")
    async def upload(self, file: UploadFile = File(...)) -> InsertResponse:
        """Index an uploaded file (text, records, PDF, DOCX, PPTX, XLSX, HTML) in the background."""
        return await self._submit([(file.filename or "upload.txt", await file.read())], "upload")

    def _check_inserts(self) -> None:
        """409 when insert jobs could only fail: no LLM for the ``llm`` extraction mode."""
        if self.settings.llm.backend == "none" and self.settings.extraction.mode == "llm":
            raise HTTPException(409, "inserts are off: this server has no LLM for extraction. Restart it with "
                                     "--llm-base-url http://HOST:PORT/v1, or with --extraction-mode fast (no LLM)")

    async def _submit(self, files: list[tuple[str, bytes]], prefix: str, as_text: bool = False) -> InsertResponse:
        from lightrag_ray.serve.workspace_service import InsertRejected

        self._check_inserts()
        try:
            job = await self.workspace.submit.remote(files, prefix, as_text)
        except InsertRejected as exc:
            raise HTTPException(400, cause_message(exc)) from None
        return _insert_response(job)

    @api.get("/documents")
    async def documents(self) -> dict[str, Any]:
        """Documents grouped by status, each in LightRAG's DocStatusResponse shape plus our fields."""
        found = await self.workspace.documents.remote()
        statuses = {status: [{**row, **doc_view(row)} for row in rows] for status, rows in found["statuses"].items()}
        return {**found, "statuses": statuses}

    @api.get("/documents/track_status/{track_id}")
    async def track_status(self, track_id: str) -> dict[str, Any]:
        """Progress of one insert job and its documents."""
        found = await self.workspace.track_status.remote(track_id)
        if found is None:
            raise HTTPException(404, f"no insert job with track id {track_id!r}")
        return found

    @api.post("/documents/cancel/{track_id}")
    async def cancel(self, track_id: str) -> dict[str, Any]:
        """Cancel an insert job: a queued one never runs, a running one stops after its
        current extraction batch (its documents are then marked failed)."""
        job = await self.workspace.cancel.remote(track_id)
        if job is None:
            raise HTTPException(404, f"no insert job with track id {track_id!r}")
        if job["status"] not in ("pending", "processing", "cancelled"):
            raise HTTPException(409, f"job {track_id} has already ended ({job['status']})")
        stopping = job["status"] == "processing"
        return {"track_id": track_id, "status": "cancelling" if stopping else "cancelled",
                "message": f"follow it at /documents/track_status/{track_id}" if stopping else "the job will not run"}

    @api.delete("/documents/delete_document")
    async def delete_document(self, request: DeleteDocRequest) -> dict[str, Any]:
        """Delete documents; entities and relations they shared keep their other sources."""
        result, busy = await workspace_write(self.workspace.delete.remote(request.doc_ids))
        if busy is not None:
            return busy_response(busy)
        if not result["deleted"]:
            raise HTTPException(404, f"none of these documents exist: {', '.join(result['not_found'])}")
        return {"status": "deletion_completed",
                "message": f"deleted {len(result['deleted'])} documents{request.unsupported()}",
                "doc_id": ", ".join(result["deleted"]), **result}

    # ---- graph -----------------------------------------------------------------------
    @api.get("/graphs")
    async def graphs(self, label: str = Query(..., min_length=1), max_depth: int = Query(3, ge=1, le=10),
                     max_nodes: int = Query(1000, ge=1, le=10000)) -> dict[str, Any]:
        """The subgraph around entity ``label`` (``*``: the best-connected entities)."""
        return await self.workspace.subgraph.remote(label, max_depth, max_nodes)

    @api.get("/graph/label/list")
    async def labels(self) -> list[str]:
        """All entity names."""
        return await self.workspace.labels.remote()

    @api.get("/health")
    async def health(self, request: Request) -> dict[str, Any]:
        """Liveness (no API key needed); with the key (or on a server without one) also the
        graph version, counts, models and the node of the ingress replica that answered."""
        if not has_key(dict(request.scope.get("headers") or []), _GUARD["api_key"]):
            return {"status": "healthy"}
        return {**await self.workspace.health.remote(), "served_by": self.node_id}


class AppArgs(BaseModel):
    """Arguments of ``build_app`` (``args:`` in serve_config.yaml); unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")

    workspace: str | None = Field(None, description="Workspace directory or URI ($LIGHTRAG_RAY__WORKSPACE wins).")
    config: str | None = Field(None, description="Settings YAML file (see docs/configuration.md).")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Settings, YAML-shaped; the config file and LIGHTRAG_RAY__* variables override them.")
    api_key: str | None = Field(None, description=f"Required key on every route but /health; default ${API_KEY_ENV}.")
    cors_origins: list[str] = Field(
        default_factory=lambda: list(DEFAULT_CORS_ORIGINS),
        description="Origins browsers may call the API from (LightRAG's CORS_ORIGINS; '*': any, without credentials).")
    webui: str | None = Field(
        None, description="Folder of LightRAG's built WebUI, served at /webui (lightrag-ray serve --webui finds or "
        "downloads it); none: no WebUI.")
    input_dir: str | None = Field(
        None, description="Folder POST /documents/scan indexes (LightRAG's INPUT_DIR); default <workspace>/inputs.")
    max_body_mb: float = Field(50.0, gt=0, description="Largest request body accepted (413 above).")
    embed_max_batch_size: int = Field(64, gt=0, description="Texts embedded together by the embedder deployment.")
    embed_batch_wait_s: float = Field(0.01, ge=0, description="How long a batch waits to fill.")
    ingress_replicas: int | None = Field(
        None, gt=0, description="A fixed number of ingress replicas instead of autoscaling (serve_config.yaml's "
        "deployments section can set the same).")
    ingress_max_replicas_per_node: int | None = Field(
        None, gt=0, description="At most this many ingress replicas on one node, so they spread over the "
        "cluster's nodes (Serve's max_replicas_per_node).")


def app_settings(args: AppArgs) -> Settings:
    """The settings the app runs with; a local workspace path becomes absolute."""
    defaults = {**args.settings, **({"workspace": args.workspace} if args.workspace else {})}
    settings = load_settings(args.config, defaults=defaults)
    if "://" not in settings.workspace:
        settings = settings.model_copy(update={"workspace": str(Path(settings.workspace).resolve())})
    if settings.llm.backend == "vllm":
        raise ValueError(
            "llm.backend=vllm is for indexing; to serve with vLLM deploy the ray.serve.llm application "
            "(lightrag_ray.serve.vllm_app:build_vllm_app, see docs/api.md) and point llm.base_url at it with backend=openai"
        )
    return settings


def build_app(args: AppArgs) -> Application:
    """The whole application: Ingress -> (Embedder, LLM, Workspace)."""
    settings = app_settings(args)
    dumped = settings.model_dump()
    embedder = EmbedderDeployment.bind(settings.embedding.model_dump(), args.embed_max_batch_size, args.embed_batch_wait_s)
    llm = LLMDeployment.bind(settings.llm.model_dump())
    workspace = WorkspaceDeployment.bind(dumped, embedder)
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    ingress = Ingress
    if args.ingress_replicas is not None:
        ingress = ingress.options(num_replicas=args.ingress_replicas, autoscaling_config=None)
    if args.ingress_max_replicas_per_node is not None:
        ingress = ingress.options(max_replicas_per_node=args.ingress_max_replicas_per_node)
    input_dir = args.input_dir if not args.input_dir or "://" in args.input_dir else str(Path(args.input_dir).resolve())
    return ingress.bind(dumped, embedder, llm, workspace, api_key, int(args.max_body_mb * 1024 * 1024), tuple(args.cors_origins),
                        args.webui, input_dir)
