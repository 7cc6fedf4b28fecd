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

import os
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from ray.serve import Application

from lightrag_ray.config import Settings, load_settings
from lightrag_ray.metrics.client import metrics
from lightrag_ray.models.llm import LLMError
from lightrag_ray.serve import ollama_errors, openai_errors
from lightrag_ray.serve.deployments import (
    SERVING,
    STOPPING,
    EmbedderDeployment,
    HandleLLM,
    LLMDeployment,
    ingress_reranker,
    llm_failure,
    reranker_deployment,
)
from lightrag_ray.serve.http_guard import DEFAULT_CORS_ORIGINS, Access, LazyCORS, RequestGuard
from lightrag_ray.serve.owner import WorkspaceDeployment
from lightrag_ray.serve.query_metrics import QueryMetrics
from lightrag_ray.serve.routes import documents, graph, ollama, openai, query, webui, workspaces
from lightrag_ray.serve.spaces import OpenSpaces
from lightrag_ray.serve.workspace_routing import WorkspacePrefix, bind_keys
from lightrag_ray.service.workspaces import DEFAULT_WORKSPACE, NoRoomForWorkspace, UnknownWorkspace
from lightrag_ray.storage.graph.reader import GraphUnavailableError

API_KEY_ENV = "LIGHTRAG_RAY_API_KEY"
APP_NAME = "lightrag"  # the Serve application `lightrag-ray serve` runs (serve_config.yaml names it too)
# The replica's guard settings: set by Ingress.__init__, read per request by the middleware, both
# through the module functions below. Serve hands the replica a pickled copy of the app and of
# the Ingress class, whose own globals are copies; named module functions are pickled by
# reference, so both reach this module's dict in the replica's process.
_GUARD: dict[str, Any] = {"access": Access(), "cors_origins": list(DEFAULT_CORS_ORIGINS)}


def _set_guard(access: Access, cors_origins: list[str]) -> None:
    _GUARD.update(access=access, cors_origins=cors_origins)


def _guard_access() -> Access:
    return _GUARD["access"]


def _cors_origins() -> list[str]:
    return _GUARD["cors_origins"]


async def _llm_failed(request: Request, exc: LLMError) -> JSONResponse:
    return openai_errors.error_response(request, 502, llm_failure(exc))


async def _graph_unavailable(request: Request, exc: GraphUnavailableError) -> JSONResponse:
    return openai_errors.error_response(request, 503, f"the knowledge graph is unavailable: {exc}",
                                        headers={"Retry-After": "1"})


async def _unknown_workspace(request: Request, exc: UnknownWorkspace) -> JSONResponse:
    """A workspace deleted since this replica last checked it (serve.spaces)."""
    return openai_errors.error_response(request, 404, str(exc))


async def _no_room(request: Request, exc: NoRoomForWorkspace) -> JSONResponse:
    return openai_errors.error_response(request, 503, str(exc), headers={"Retry-After": "10"})


async def _backend_died(request: Request, exc: RayActorError) -> JSONResponse:
    """A deployment replica (the workspace owner, the embedder) died during the call: Serve
    starts another, so the client is told to retry."""
    return openai_errors.error_response(request, 503, "a back-end replica restarted during the request; "
                                        "send it again", headers={"Retry-After": "1"})


def http_app() -> FastAPI:
    """The FastAPI app: every route module's router; the guard (API key, workspace name and
    key binding, body size; each contract's status and error body) inside the ``/w/{name}``
    prefix's stripping, inside CORS, which must be outermost so that preflights need no key and
    error answers carry its headers; OpenAI's error shape on /v1, Ollama's on
    /api (wrapping the app's own handlers, so added after them); the query routes' metrics
    outside the guard (its refusals count) and inside the prefix's stripping."""
    api = FastAPI(
        title="lightrag-ray",
        description="Graph-based RAG on Ray: LightRAG Server routes and an OpenAI-compatible chat API.",
    )
    for module in (openai, ollama, graph, documents, webui, query, workspaces):
        api.include_router(module.router)
    api.add_middleware(RequestGuard, settings=_guard_access,
                       error_body=ollama_errors.ollama_error_body(openai_errors.error_body),
                       denied_status=lambda path: 401 if openai_errors.is_openai_path(path) else 403)
    openai_errors.install_error_handlers(api)
    api.add_exception_handler(LLMError, _llm_failed)
    api.add_exception_handler(GraphUnavailableError, _graph_unavailable)
    api.add_exception_handler(RayActorError, _backend_died)
    api.add_exception_handler(UnknownWorkspace, _unknown_workspace)
    api.add_exception_handler(NoRoomForWorkspace, _no_room)
    ollama_errors.install_error_handlers(api)
    api.add_middleware(QueryMetrics)
    api.add_middleware(WorkspacePrefix)
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
    (serve.routes.replica.Replica), and each workspace as a Space (serve.spaces)."""

    def __init__(self, settings: dict[str, Any], embedder: Any, llm: Any, owner: Any, access: Access,
                 cors_origins: tuple[str, ...] = DEFAULT_CORS_ORIGINS, webui_dir: str | None = None,
                 input_dir: str | None = None, many: bool = False, max_open: int = 8, reranker: Any = None) -> None:
        _set_guard(access, list(cors_origins))
        self.api_key = access.api_key
        self.webui_dir = webui_dir
        self.settings = Settings.model_validate(settings)
        metrics().configure(self.settings.metrics)
        self.owner = owner
        self.embedder = embedder
        self.llm = HandleLLM(llm) if self.settings.llm.backend != "none" else None
        self.reranker = ingress_reranker(self.settings.rerank, reranker)
        self.spaces = OpenSpaces(owner, embedder, self.llm, self.reranker, input_dir, many, max_open)
        self.node_id = ray.get_runtime_context().get_node_id()

    async def space(self, name: str, create: bool = False) -> Any:
        """Workspace ``name`` ("" the default), as the routes use it (serve.spaces.Space)."""
        return await self.spaces.get(name, create)

    async def forget(self, name: str) -> None:
        """Drop what this replica keeps of workspace ``name`` (deleted)."""
        await self.spaces.forget(name)


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
    workspaces_root: str | None = Field(
        None, description="Serve every workspace under this folder (one subfolder each, made by its first insert); "
        "requests name theirs with the LIGHTRAG-WORKSPACE header or a /w/{name}/ path prefix. None: serve `workspace`.")
    default_workspace: str = Field(
        DEFAULT_WORKSPACE, description="The workspace of requests that name none (with workspaces_root).")
    workspace_keys: dict[str, list[str]] = Field(
        default_factory=dict, description="API keys bound to some workspaces (key -> names): 403 on any other.")
    max_open_workspaces: int = Field(
        8, gt=0, description="Workspaces kept open (graph shards, vectors); the least recently used idle one is "
        "closed past it and reopened on its next request.")
    max_open_memory_mb: float | None = Field(
        None, gt=0, description="Also close the least recently used idle workspaces while the actors of the open ones "
        "(graph shards, Milvus Lite owners) hold more resident memory than this. None: no memory cap.")


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
    """The whole application: Ingress -> (Embedder, LLM, workspace owner, and the Reranker with
    ``rerank.backend: cross-encoder``)."""
    settings = app_settings(args)
    dumped = settings.model_dump()
    recorded = settings.metrics.model_dump()
    embedder = EmbedderDeployment.bind(settings.embedding.model_dump(), args.embed_max_batch_size,  # type: ignore[attr-defined]  # (Ray adds it)
                                       args.embed_batch_wait_s, recorded)
    llm = LLMDeployment.bind(settings.llm.model_dump(), recorded)  # type: ignore[attr-defined]  # (Ray adds it)
    root = str(Path(args.workspaces_root).resolve()) if args.workspaces_root else None
    owner = WorkspaceDeployment.bind(dumped, embedder, root, args.default_workspace, args.max_open_workspaces,  # type: ignore[attr-defined]  # (Ray adds it)
                                     args.max_open_memory_mb)
    access = Access(args.api_key or os.environ.get(API_KEY_ENV) or None, int(args.max_body_mb * 1024 * 1024),
                    bind_keys(args.workspace_keys))
    ingress = Ingress
    if args.ingress_replicas is not None:
        ingress = ingress.options(num_replicas=args.ingress_replicas, autoscaling_config=None)  # type: ignore[attr-defined]  # (Ray adds it)
    if args.ingress_max_replicas_per_node is not None:
        ingress = ingress.options(max_replicas_per_node=args.ingress_max_replicas_per_node)  # type: ignore[attr-defined]  # (Ray adds it)
    input_dir = args.input_dir if not args.input_dir or "://" in args.input_dir else str(Path(args.input_dir).resolve())
    return ingress.bind(dumped, embedder, llm, owner, access, tuple(args.cors_origins), args.webui, input_dir,  # type: ignore[attr-defined]  # (Ray adds it)
                        root is not None, args.max_open_workspaces, reranker_deployment(settings.rerank))
