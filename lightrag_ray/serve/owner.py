"""The workspace owner: the Serve deployment that is the one writer of every workspace the app
serves, and how the ingress reaches it.

It hosts the app's open workspaces in a WorkspacePool (service.workspace_pool: one
WorkspaceService each, with its detached graph shards that query replicas read directly, the
Milvus Lite file whose lookups it answers, its own insert-job queue; opened on first use, the
least recently used idle one closed past the caps). What the ingress may ask of a workspace's
service is the explicit list ``WorkspaceCalls``; ``WriterHandle`` is that list over the
owner's Serve handle for one workspace.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from ray import serve

from lightrag_ray.config import Settings
from lightrag_ray.core.transport import Awaited, Remote
from lightrag_ray.index.embedding_pool import KeptEmbeddingPool
from lightrag_ray.metrics.client import metrics
from lightrag_ray.query.stores import ThreadedVectorIndex
from lightrag_ray.serve.deployments import SERVING, STOPPING, BlockingHandleEmbedder
from lightrag_ray.service.workspace_pool import WorkspacePool
from lightrag_ray.service.workspace_service import WorkspaceService, WriteBusy
from lightrag_ray.service.workspaces import (
    DEFAULT_WORKSPACE,
    InvalidWorkspaceName,
    NoRoomForWorkspace,
    UnknownWorkspace,
    WorkspaceCatalog,
)
from lightrag_ray.storage.vector_contract import READ_METHODS, AwaitedVectorReads

WORKSPACE_REFUSALS = (UnknownWorkspace, InvalidWorkspaceName, NoRoomForWorkspace)


@dataclass
class Refused:
    """A write the workspace owner refused (busy, a rejected insert, an impossible edit, an
    unknown workspace), returned instead of raised: Serve logs every exception a replica raises
    as an ERROR with its traceback, and these are normal 400/404/409 answers."""

    error: Exception


def raise_refusal(result: Any) -> Any:
    """``result`` of an owner call, or the exception the owner refused it with, raised here."""
    if isinstance(result, Refused):
        raise result.error
    return result


class WorkspaceCalls(Awaited, ABC):
    """What the ingress may ask of one workspace's WorkspaceService on the owner: each method
    declared once (its signature is the service's), run by ``run`` (``WriterHandle``)."""

    @abstractmethod
    async def run(self, method: Remote[..., Any], *args: Any) -> Any:
        """Run ``method`` of the workspace's service with these arguments, awaited."""

    submit = Remote.of(WorkspaceService.submit)
    scan = Remote.of(WorkspaceService.scan)
    reprocess_failed = Remote.of(WorkspaceService.reprocess_failed)
    track_status = Remote.of(WorkspaceService.track_status)
    cancel = Remote.of(WorkspaceService.cancel)
    cancel_all = Remote.of(WorkspaceService.cancel_all)
    documents = Remote.of(WorkspaceService.documents)
    delete = Remote.of(WorkspaceService.delete)
    clear = Remote.of(WorkspaceService.clear)
    clear_cache = Remote.of(WorkspaceService.clear_cache)
    edit_graph = Remote.of(WorkspaceService.edit_graph)
    health = Remote.of(WorkspaceService.health)


CALLS = frozenset(name for name, value in vars(WorkspaceCalls).items() if isinstance(value, Remote))


class WriterHandle(WorkspaceCalls):
    """The owner's handle as the ingress uses it for one workspace (``await writer.delete(doc_ids)``
    runs the service's ``delete(doc_ids)`` there); a refusal is raised again here, as the
    exception the owner raised."""

    def __init__(self, handle: Any, name: str) -> None:
        self.handle = handle
        self.name = name

    async def run(self, method: Remote[..., Any], *args: Any) -> Any:
        return raise_refusal(await getattr(self.handle, method.name).remote(self.name, *args))


class HandleVectorIndex(AwaitedVectorReads):
    """The vector reads (storage.vector_contract) of one workspace through the owner: the way to
    a Milvus Lite file, which only its owner's process may open."""

    def __init__(self, handle: Any, name: str) -> None:
        self.handle = handle
        self.name = name

    async def run(self, method: Remote[..., Any], *args: Any) -> Any:
        return await self.handle.vectors.remote(self.name, method.name, *args)


def _service_call(method: str) -> Any:
    async def call(self: Any, name: str, *args: Any) -> Any:
        return await self.call(name, method, *args)

    call.__name__ = call.__qualname__ = method
    call.__doc__ = f"``WorkspaceService.{method}`` of workspace ``name`` (WorkspaceCalls)."
    return call


def with_service_calls(cls: type) -> type:
    """``cls`` with a method per name of ``WorkspaceCalls`` (``delete(name, doc_ids)``, ...), so
    that Serve's request log names the call."""
    for method in sorted(CALLS):
        setattr(cls, method, _service_call(method))
    return cls


@serve.deployment(ray_actor_options={"num_cpus": 0.1, **SERVING}, max_ongoing_requests=512, health_check_timeout_s=120,
                  **STOPPING)
@with_service_calls
class WorkspaceDeployment:
    """The single writer of the app's workspaces: it owns their graph shard actors (detached,
    so they outlive a crash of this replica and keep serving reads) and, with Milvus Lite,
    their Milvus files, whose vector lookups it answers.

    Exactly one replica: a Milvus Lite file admits one process and a graph one writer. Insert
    jobs run one after another per workspace in the background; queries never wait for them.
    The ingress calls ``open``, ``vectors``, ``workspaces``, ``delete_workspace`` and the
    service's ``WorkspaceCalls`` (methods added by ``with_service_calls``).
    """

    def __init__(self, settings: dict[str, Any], embedder: Any, workspaces_root: str | None = None,
                 default_workspace: str = DEFAULT_WORKSPACE, max_open: int = 8,
                 max_open_memory_mb: float | None = None) -> None:
        self.catalog = WorkspaceCatalog(Settings.model_validate(settings), workspaces_root, default_workspace)
        metrics().configure(self.catalog.settings.metrics)
        self.embedding_pool = KeptEmbeddingPool(self.catalog.settings.embedding, self.catalog.settings.metrics)  # every workspace's insert jobs
        self.embedder_handle = embedder
        self.embedder: BlockingHandleEmbedder | None = None
        self.pool = WorkspacePool(self.catalog, self._open_service, max_open, max_open_memory_mb)

    async def _open_service(self, settings: Settings) -> WorkspaceService:
        if self.embedder is None:
            self.embedder = BlockingHandleEmbedder(self.embedder_handle, await self.embedder_handle.dimension.remote())
        return await asyncio.to_thread(WorkspaceService, settings, self.embedder, self.embedding_pool)

    def __del__(self) -> None:
        """Serve's graceful shutdown of this replica: stop the (detached) shard actors and
        release Milvus. A crashed replica never gets here, so its shards keep serving."""
        self.pool.close_all()
        self.embedding_pool.close()

    async def check_health(self) -> None:
        """Serve's periodic probe. Right after start it opens the one workspace of a
        single-workspace app; with a workspaces root it only makes the default one's folder (each
        workspace opens on its first request: an open one holds its actors' CPU and memory).
        Each probe also records the open workspaces' gauges."""
        if self.catalog.multi:
            await asyncio.to_thread(self.catalog.settings_for, "", True)
        else:
            await self.pool.get("")
        await asyncio.to_thread(self.pool.record_gauges)

    async def open(self, name: str, create: bool = False) -> dict[str, Any] | Refused:
        """Open workspace ``name`` for a reader: its name, opening (epoch) and settings."""
        try:
            hosted = await self.pool.get(name, create)
        except WORKSPACE_REFUSALS as exc:
            return Refused(exc)
        return {"name": hosted.name, "epoch": hosted.epoch, "settings": hosted.service.settings.model_dump()}

    async def vectors(self, name: str, method: str, *args: Any) -> Any:
        """A vector read (``search``, ``get``: storage.vector_contract) in a workspace's Milvus
        (Lite) store, which this replica owns."""
        if method not in READ_METHODS:
            raise AttributeError(f"readers may not call the vector store's {method!r}")
        hosted = await self.pool.get(name)
        index = ThreadedVectorIndex(hosted.service.vectors)
        return await getattr(index, method)(*args)

    async def call(self, name: str, method: str, *args: Any) -> Any:
        """``method`` (one of ``WorkspaceCalls``; each is also this class's method of its name) of
        workspace ``name``'s service, run in a worker thread; a job it returns that waits to run
        is queued on that workspace's job loop."""
        if method not in CALLS:
            raise AttributeError(f"the ingress may not call the workspace service's {method!r}")
        try:
            hosted = await self.pool.get(name)
            result = await asyncio.to_thread(getattr(hosted.service, method), *args)
        except (*WorkspaceService.REFUSALS, *WORKSPACE_REFUSALS) as exc:
            return Refused(exc)
        if method in WorkspaceService.QUEUEING and result is not None and result["status"] == "pending":
            hosted.jobs.put_nowait(result["track_id"])
        return result

    async def workspaces(self) -> list[dict[str, Any]]:
        """Every workspace: name, counts, whether it is open now."""
        rows = await asyncio.to_thread(lambda: [self.catalog.summary(n) for n in self.catalog.names()])
        return [{**row, "open": self.pool.is_open(row["name"])} for row in rows]

    async def delete_workspace(self, name: str) -> dict[str, Any] | Refused:
        """Delete workspace ``name`` with everything in it; refused while an insert job runs in it."""
        try:
            await self.pool.remove(name)
            name = self.catalog.resolve(name)
        except (*WORKSPACE_REFUSALS, WriteBusy) as exc:
            return Refused(exc)
        return {"status": "success", "message": f"workspace {name!r} deleted"}
