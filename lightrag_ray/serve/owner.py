"""The workspace owner: the Serve deployment that is the one writer of every workspace the app
serves, and how the ingress reaches it.

It hosts one WorkspaceService per open workspace (service.workspace_service: detached graph
shards that query replicas read directly, the Milvus Lite file whose lookups it answers), each
with its own insert-job queue and thread, so a long insert into one workspace never delays
another's writes. Workspaces open on first use and the least recently used idle one is closed
past ``max_open`` (its shards stopped, its Lite file released).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import ray
from ray import serve

from lightrag_ray.config import Settings
from lightrag_ray.index.embedding_pool import KeptEmbeddingPool
from lightrag_ray.core.transport import Remote
from lightrag_ray.query.stores import ThreadedVectorIndex
from lightrag_ray.ray_runtime import BACKGROUND_NICENESS, lower_thread_priority, named_actor
from lightrag_ray.serve.deployments import SERVING, STOPPING, BlockingHandleEmbedder
from lightrag_ray.service.opening import bound_settings
from lightrag_ray.service.workspaces import (
    DEFAULT_WORKSPACE,
    InvalidWorkspaceName,
    NoRoomForWorkspace,
    UnknownWorkspace,
    WorkspaceCatalog,
)
from lightrag_ray.storage.graph.actor import shard_actor_name
from lightrag_ray.storage.vector_contract import READ_METHODS, AwaitedVectorReads

WORKSPACE_REFUSALS = (UnknownWorkspace, InvalidWorkspaceName, NoRoomForWorkspace)
ROOM_WAIT_S = 30.0


@dataclass
class Refused:
    """A write the workspace owner refused (busy, a rejected insert, an impossible edit, an
    unknown workspace), returned instead of raised: Serve logs every exception a replica raises
    as an ERROR with its traceback, and these are normal 400/404/409 answers."""

    error: Exception


class WriterHandle:
    """The owner's handle as the ingress uses it for one workspace (``await
    writer.delete.remote(doc_ids)`` runs ``delete(name, doc_ids)`` there); a refusal is raised
    again here, as the exception the owner raised."""

    def __init__(self, handle: Any, name: str) -> None:
        self.handle = handle
        self.name = name

    def __getattr__(self, method: str) -> Any:
        return _RefusalRaising(getattr(self.handle, method), self.name)


class _RefusalRaising:
    def __init__(self, method: Any, name: str) -> None:
        self.method = method
        self.name = name

    async def remote(self, *args: Any) -> Any:
        result = await self.method.remote(self.name, *args)
        if isinstance(result, Refused):
            raise result.error
        return result


class HandleVectorIndex(AwaitedVectorReads):
    """The vector reads (storage.vector_contract) of one workspace through the owner: the way to
    a Milvus Lite file, which only its owner's process may open."""

    def __init__(self, handle: Any, name: str) -> None:
        self.handle = handle
        self.name = name

    async def run(self, method: Remote[..., Any], *args: Any) -> Any:
        return await self.handle.vectors.remote(self.name, method.name, *args)


def shards_alive(settings: Settings) -> bool:
    """Whether the workspace's graph shard actors run (left by an owner that crashed)."""
    num_shards = bound_settings(settings).graph.num_shards
    if num_shards == "auto":  # a new workspace
        return False
    return named_actor(shard_actor_name(settings.workspace, 0, num_shards), settings.ray.namespace) is not None


@dataclass
class HostedWorkspace:
    """One open workspace of the owner: its service, which opening it is (``epoch``, so readers
    see a reopened one) and its insert jobs' queue and thread."""

    name: str
    service: Any  # service.workspace_service.WorkspaceService
    epoch: int
    jobs: asyncio.Queue = field(default_factory=asyncio.Queue)
    # One long-lived, nicer thread for the insert jobs (niceness is per thread on Linux and
    # cannot be lowered back, so the shared thread pool must not be used).
    thread: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(
        1, "insert-job", initializer=lower_thread_priority, initargs=(BACKGROUND_NICENESS,)))
    worker: asyncio.Task | None = None

    def busy(self) -> bool:
        """Whether an insert job runs or waits."""
        return self.service.write_lock.locked() or bool(self.service.unfinished_jobs()) or not self.jobs.empty()

    async def run_jobs(self) -> None:
        while True:
            track_id = await self.jobs.get()
            await asyncio.get_running_loop().run_in_executor(self.thread, self.service.run_job, track_id,
                                                             BACKGROUND_NICENESS)

    def close(self) -> None:
        """Stop the job loop and the shard actors; release Milvus (the shared embedding workers stay)."""
        if self.worker is not None:
            self.worker.cancel()
        self.service.close()
        self.thread.shutdown(wait=False)


@serve.deployment(ray_actor_options={"num_cpus": 0.1, **SERVING}, max_ongoing_requests=512, health_check_timeout_s=120,
                  **STOPPING)
class WorkspaceDeployment:
    """The single writer of the app's workspaces: it owns their graph shard actors (detached,
    so they outlive a crash of this replica and keep serving reads) and, with Milvus Lite,
    their Milvus files, whose vector lookups it answers.

    Exactly one replica: a Milvus Lite file admits one process and a graph one writer. Insert
    jobs run one after another per workspace in the background; queries never wait for them.
    """

    def __init__(self, settings: dict[str, Any], embedder: Any, workspaces_root: str | None = None,
                 default_workspace: str = DEFAULT_WORKSPACE, max_open: int = 8,
                 max_open_memory_mb: float | None = None) -> None:
        self.catalog = WorkspaceCatalog(Settings.model_validate(settings), workspaces_root, default_workspace)
        self.embedding_pool = KeptEmbeddingPool(self.catalog.settings.embedding)  # every workspace's insert jobs
        self.embedder_handle = embedder
        self.embedder: BlockingHandleEmbedder | None = None
        self.max_open = max_open
        self.max_open_bytes = max_open_memory_mb * 2**20 if max_open_memory_mb else None
        self.hosted: OrderedDict[str, HostedWorkspace] = OrderedDict()
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)  # one opening or closing per name
        self.epochs = itertools.count(1)

    async def _hosted(self, name: str, create: bool = False) -> HostedWorkspace:
        """Workspace ``name`` ("" the default), opened on first use (``create``: a new one made)."""
        name = self.catalog.resolve(name)
        opened_now = False
        if name not in self.hosted:  # make room first: the cluster may have resources for max_open only
            await self._evict(keep=name, room=1)
            await self._evict_for_memory(keep=name, incoming=True)
        async with self.locks[name]:
            if name not in self.hosted:
                self.hosted[name] = await self._open(name, create)
                opened_now = True
            self.hosted.move_to_end(name)
            hosted = self.hosted[name]
        if opened_now:
            await self._evict(keep=name)  # in case every other one was busy before
            await self._evict_for_memory(keep=name)
        return hosted

    async def _open(self, name: str, create: bool) -> HostedWorkspace:
        """Open workspace ``name`` as its writer, its unfinished insert jobs queued again."""
        from lightrag_ray.service.workspace_service import WorkspaceService

        settings = await asyncio.to_thread(self.catalog.settings_for, name, create)
        if not await asyncio.to_thread(shards_alive, settings):  # else a restarted owner attaches to them
            await self._wait_for_room(name, await asyncio.to_thread(self.catalog.cpus_to_open, settings))
        if self.embedder is None:
            self.embedder = BlockingHandleEmbedder(self.embedder_handle, await self.embedder_handle.dimension.remote())
        service = await asyncio.to_thread(WorkspaceService, settings, self.embedder, self.embedding_pool)
        hosted = HostedWorkspace(name, service, next(self.epochs))
        for track_id in service.unfinished_jobs():  # cut short by a restart: run again
            hosted.jobs.put_nowait(track_id)
        hosted.worker = asyncio.create_task(hosted.run_jobs())
        return hosted

    async def _close(self, name: str) -> bool:
        """Close workspace ``name`` if it is open and idle; whether it is closed now."""
        async with self.locks[name]:
            hosted = self.hosted.get(name)
            if hosted is not None:
                if hosted.busy():
                    return False
                del self.hosted[name]
                await asyncio.to_thread(hosted.close)
        return True

    async def _evict(self, keep: str, room: int = 0) -> None:
        """Close the least recently used idle workspaces (never ``keep``) until at most
        ``max_open - room`` are open, or only busy ones are left."""
        for name in [n for n in self.hosted if n != keep]:
            if len(self.hosted) <= self.max_open - room:
                return
            await self._close(name)

    async def _evict_for_memory(self, keep: str, incoming: bool = False) -> None:
        """Close the least recently used idle workspaces (never ``keep``) while the actors of the
        open ones hold more than ``max_open_memory_mb``; ``incoming``: with room for one more
        workspace of their average size (before opening ``keep``)."""
        if self.max_open_bytes is None:
            return
        sizes = {name: await asyncio.to_thread(hosted.service.memory_bytes) for name, hosted in list(self.hosted.items())}
        total = sum(sizes.values()) + (sum(sizes.values()) / len(sizes) if incoming and sizes else 0)
        for name in [n for n in sizes if n != keep]:
            if total <= self.max_open_bytes:
                return
            if await self._close(name):
                total -= sizes[name]

    async def _wait_for_room(self, name: str, cpus: float) -> None:
        """Wait until the cluster has ``cpus`` free for workspace ``name``'s actors, closing idle
        workspaces meanwhile (an actor that cannot be placed would hang the opening); after
        ``ROOM_WAIT_S``, NoRoomForWorkspace."""
        deadline = time.monotonic() + ROOM_WAIT_S
        while ray.available_resources().get("CPU", 0.0) < cpus - 1e-9:
            idle = [n for n, hosted in self.hosted.items() if n != name and not hosted.busy()]
            if idle:
                await self._close(idle[0])
                continue
            if time.monotonic() > deadline:
                raise NoRoomForWorkspace(
                    f"no free CPU to open workspace {name!r} (its actors reserve {cpus:g}; "
                    f"{ray.available_resources().get('CPU', 0.0):g} free while insert jobs run): try again later, "
                    "or lower max_open_workspaces or graph.num_cpus, or add nodes")
            await asyncio.sleep(0.5)

    def __del__(self) -> None:
        """Serve's graceful shutdown of this replica: stop the (detached) shard actors and
        release Milvus. A crashed replica never gets here, so its shards keep serving."""
        for hosted in self.hosted.values():
            hosted.close()
        self.embedding_pool.close()

    async def check_health(self) -> None:
        """Serve's periodic probe. Right after start it opens the one workspace of a
        single-workspace app; with a workspaces root it only makes the default one's folder (each
        workspace opens on its first request: an open one holds its actors' CPU and memory)."""
        if self.catalog.multi:
            await asyncio.to_thread(self.catalog.settings_for, "", True)
        else:
            await self._hosted("")

    async def open(self, name: str, create: bool = False) -> dict[str, Any] | Refused:
        """Open workspace ``name`` for a reader: its name, opening (epoch) and settings."""
        try:
            hosted = await self._hosted(name, create)
        except WORKSPACE_REFUSALS as exc:
            return Refused(exc)
        return {"name": hosted.name, "epoch": hosted.epoch, "settings": hosted.service.settings.model_dump()}

    async def vectors(self, name: str, method: str, *args: Any) -> Any:
        """A vector read (``search``, ``get``: storage.vector_contract) in a workspace's Milvus
        (Lite) store, which this replica owns."""
        if method not in READ_METHODS:
            raise AttributeError(f"readers may not call the vector store's {method!r}")
        hosted = await self._hosted(name)
        index = ThreadedVectorIndex(hosted.service.vectors)
        return await getattr(index, method)(*args)

    async def workspaces(self) -> list[dict[str, Any]]:
        """Every workspace: name, counts, whether it is open now."""
        rows = await asyncio.to_thread(lambda: [self.catalog.summary(n) for n in self.catalog.names()])
        return [{**row, "open": row["name"] in self.hosted} for row in rows]

    async def delete_workspace(self, name: str) -> dict[str, Any] | Refused:
        """Delete workspace ``name`` with everything in it; refused while an insert job runs in it."""
        from lightrag_ray.service.workspace_service import WriteBusy

        try:
            name = self.catalog.resolve(name)
            await asyncio.to_thread(self.catalog.settings_for, name)  # UnknownWorkspace
            if not self.catalog.multi:
                raise UnknownWorkspace("this app serves one workspace; deleting workspaces needs --workspaces-root")
            async with self.locks[name]:
                hosted = self.hosted.get(name)
                if hosted is not None and hosted.busy():
                    raise WriteBusy(f"an insert job runs in workspace {name!r}; delete it once the job has finished")
                if hosted is not None:
                    del self.hosted[name]
                    await asyncio.to_thread(hosted.close)
                await asyncio.to_thread(self.catalog.remove, name)
        except (*WORKSPACE_REFUSALS, WriteBusy) as exc:
            return Refused(exc)
        return {"status": "success", "message": f"workspace {name!r} deleted"}

    def __getattr__(self, method: str) -> Any:
        """Every public method of the WorkspaceService, for the workspace named first and awaited
        in a worker thread (``handle.delete.remote(name, doc_ids)``); a job it returns that waits
        to run is queued on that workspace's job loop."""
        from lightrag_ray.service.workspace_service import WorkspaceService

        if method.startswith("_") or not callable(getattr(WorkspaceService, method, None)):
            raise AttributeError(method)

        async def call(name: str, *args: Any) -> Any:
            try:
                hosted = await self._hosted(name)
                result = await asyncio.to_thread(getattr(hosted.service, method), *args)
            except (*WorkspaceService.REFUSALS, *WORKSPACE_REFUSALS) as exc:
                return Refused(exc)
            if method in WorkspaceService.QUEUEING and result is not None and result["status"] == "pending":
                hosted.jobs.put_nowait(result["track_id"])
            return result

        call.__name__ = method
        return call
