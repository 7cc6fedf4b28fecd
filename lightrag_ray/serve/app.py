"""The Ray Serve application: LightRAG Server's REST routes plus OpenAI- and Ollama-compatible chat
APIs, assembled from the route modules (serve.routes: query, documents, graph, openai, ollama,
webui), the middleware (serve.http_guard) and each contract's error shapes (openai_errors,
ollama_errors).

``build_app`` is the typed builder that ``serve_config.yaml`` (and ``lightrag-ray serve``)
points at. The FastAPI ingress runs the QueryEngine (autoscaled): it reads the graph
shards and a Milvus server directly, and reaches the embedder, the LLM, the workspace
owner (writes; vector lookups of a Milvus Lite file) through awaited deployment handles.
"""

# No `from __future__ import annotations`: Serve reads build_app's annotation (AppArgs) as a
# class to validate serve_config.yaml's args; a string annotation makes it pass a plain dict.

import asyncio
import os
from pathlib import Path
from typing import Any

import ray
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from ray.serve import Application

from lightrag_ray.config import Settings, load_settings
from lightrag_ray.models.llm import LLMError
from lightrag_ray.query.engine import QueryEngine
from lightrag_ray.query.stores import ThreadedVectorIndex, VectorIndex
from lightrag_ray.serve import ollama_errors, openai_errors
from lightrag_ray.serve.deployments import (
    SERVING,
    STOPPING,
    EmbedderDeployment,
    HandleEmbedder,
    HandleLLM,
    HandleVectorIndex,
    LLMDeployment,
    WorkspaceDeployment,
    WriterHandle,
    llm_failure,
)
from lightrag_ray.serve.http_guard import DEFAULT_CORS_ORIGINS, LazyCORS, RequestGuard
from lightrag_ray.serve.routes import documents, graph, ollama, openai, query, webui
from lightrag_ray.service.opening import open_workspace
from lightrag_ray.storage.graph.reader import GraphUnavailableError

API_KEY_ENV = "LIGHTRAG_RAY_API_KEY"
APP_NAME = "lightrag"  # the Serve application `lightrag-ray serve` runs (serve_config.yaml names it too)
# The replica's guard settings: set by Ingress.__init__, read per request by the middleware, both
# through the module functions below. Serve hands the replica a pickled copy of the app and of
# the Ingress class, whose own globals are copies; named module functions are pickled by
# reference, so both reach this module's dict in the replica's process.
_GUARD: dict[str, Any] = {"api_key": None, "max_body_bytes": 50 * 1024 * 1024, "cors_origins": list(DEFAULT_CORS_ORIGINS)}


def _set_guard(api_key: str | None, max_body_bytes: int, cors_origins: list[str]) -> None:
    _GUARD.update(api_key=api_key, max_body_bytes=max_body_bytes, cors_origins=cors_origins)


def _guard_limits() -> tuple[str | None, int]:
    return _GUARD["api_key"], _GUARD["max_body_bytes"]


def _cors_origins() -> list[str]:
    return _GUARD["cors_origins"]


async def _llm_failed(request: Request, exc: LLMError) -> JSONResponse:
    return openai_errors.error_response(request, 502, llm_failure(exc))


async def _graph_unavailable(request: Request, exc: GraphUnavailableError) -> JSONResponse:
    return openai_errors.error_response(request, 503, f"the knowledge graph is unavailable: {exc}",
                                        headers={"Retry-After": "1"})


def http_app() -> FastAPI:
    """The FastAPI app: every route module's router; the guard (API key, body size; each
    contract's status and error body) inside CORS, which must be outermost so that preflights
    need no key and error answers carry its headers; OpenAI's error shape on /v1, Ollama's on
    /api (wrapping the app's own handlers, so added after them)."""
    api = FastAPI(
        title="lightrag-ray",
        description="Graph-based RAG on Ray: LightRAG Server routes and an OpenAI-compatible chat API.",
    )
    for module in (openai, ollama, graph, documents, webui, query):
        api.include_router(module.router)
    api.add_middleware(RequestGuard, settings=_guard_limits,
                       error_body=ollama_errors.ollama_error_body(openai_errors.error_body),
                       denied_status=lambda path: 401 if openai_errors.is_openai_path(path) else 403)
    openai_errors.install_error_handlers(api)
    api.add_exception_handler(LLMError, _llm_failed)
    api.add_exception_handler(GraphUnavailableError, _graph_unavailable)
    ollama_errors.install_error_handlers(api)
    api.add_middleware(LazyCORS, origins=_cors_origins)
    return api


api = http_app()


@serve.deployment(
    ray_actor_options={"num_cpus": 0.1, **SERVING},
    autoscaling_config={"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 8},
    max_ongoing_requests=64,
    **STOPPING,
)
@serve.ingress(api)
class Ingress:
    """HTTP front door; stateless, so it scales out. The routes reach it as their replica
    (serve.routes.replica.Replica)."""

    def __init__(self, settings: dict[str, Any], embedder: Any, llm: Any, workspace: Any,
                 api_key: str | None, max_body_bytes: int, cors_origins: tuple[str, ...] = DEFAULT_CORS_ORIGINS,
                 webui_dir: str | None = None, input_dir: str | None = None) -> None:
        _set_guard(api_key, max_body_bytes, list(cors_origins))
        self.api_key = api_key
        self.webui_dir = webui_dir
        self.settings = Settings.model_validate(settings)
        self.workspace = WriterHandle(workspace)  # the owner's refusals raised here, not logged there
        self.input_dir = input_dir or f"{self.settings.workspace}/inputs"
        self.embedder = embedder
        self.llm = HandleLLM(llm) if self.settings.llm.backend != "none" else None
        self.query_engine: QueryEngine | None = None
        self.opening = asyncio.Lock()
        self.node_id = ray.get_runtime_context().get_node_id()

    async def engine(self) -> QueryEngine:
        """The query engine, opened on first use as a ``reader`` (service.opening): graph reads
        go straight to the shard actors, vector reads to a Milvus server, or to the owner of a
        Milvus Lite file."""
        async with self.opening:
            if self.query_engine is None:
                dim = await self.embedder.dimension.remote()
                opened = await asyncio.to_thread(open_workspace, self.settings, "reader", embedding_dim=dim)
                vectors: VectorIndex = HandleVectorIndex(self.workspace)
                if opened.vectors is not None:  # a Milvus server: searched from here
                    vectors = ThreadedVectorIndex(opened.vectors)
                self.query_engine = QueryEngine(opened.settings, HandleEmbedder(self.embedder), vectors,
                                                opened.reader, self.llm)
        return self.query_engine


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
