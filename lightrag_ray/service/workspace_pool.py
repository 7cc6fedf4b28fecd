"""The open workspaces of a served app: hosting, eviction and admission in one place.

A ``WorkspacePool`` opens a workspace's WorkspaceService on first use, with its own insert-job
queue and thread (a long insert into one workspace never delays another's writes), closes the
least recently used idle one past ``max_open`` or while the open ones' actors hold more than a
memory cap, and opens a workspace only when the cluster has free CPU for its actors (an actor
Ray cannot place would hang the opening for good). The Serve owner (serve.owner) hosts one pool.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import OrderedDict, defaultdict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import ray

from lightrag_ray.config import Settings
from lightrag_ray.metrics.client import metrics, workspace_label
from lightrag_ray.ray_runtime import BACKGROUND_NICENESS, lower_thread_priority, named_actor
from lightrag_ray.service.opening import bound_settings
from lightrag_ray.service.workspace_service import WorkspaceService, WriteBusy
from lightrag_ray.service.workspaces import NoRoomForWorkspace, UnknownWorkspace, WorkspaceCatalog
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph.actor import shard_actor_name

ROOM_WAIT_S = 30.0
LOG = logging.getLogger("ray.serve")  # the owner replica's log


def job_cpus(settings: Settings) -> float:
    """The CPUs an insert job needs free to make progress: one light Ray Data task beside one
    extraction actor (the job's other workers, the embedding actors, are kept for every job)."""
    return settings.ray.task_cpus + settings.extraction.num_cpus


def shards_alive(settings: Settings) -> bool:
    """Whether the workspace's graph shard actors run (left by an owner that crashed)."""
    num_shards = bound_settings(settings).graph.num_shards
    if num_shards == "auto":  # a new workspace
        return False
    return named_actor(shard_actor_name(settings.workspace, 0, num_shards), settings.ray.namespace) is not None


@dataclass
class HostedWorkspace:
    """One open workspace: its service, which opening it is (``epoch``, so readers see a
    reopened one) and its insert jobs' queue and thread."""

    name: str
    service: WorkspaceService
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

    def start(self, make_room: Callable[[], Awaitable[None]]) -> None:
        """Queue the jobs a restart cut short and start the job loop (on the running event loop);
        ``make_room`` runs before each job."""
        for track_id in self.service.unfinished_jobs():
            self.jobs.put_nowait(track_id)
        self.worker = asyncio.create_task(self._run_jobs(make_room))

    async def _run_jobs(self, make_room: Callable[[], Awaitable[None]]) -> None:
        while True:
            track_id = await self.jobs.get()
            await make_room()
            await asyncio.get_running_loop().run_in_executor(self.thread, self.service.run_job, track_id,
                                                             BACKGROUND_NICENESS)

    def close(self) -> None:
        """Stop the job loop and the shard actors; release Milvus (shared embedding workers stay)."""
        if self.worker is not None:
            self.worker.cancel()
        self.service.close()
        self.thread.shutdown(wait=False)


def _free_cpus() -> float:
    return ray.available_resources().get("CPU", 0.0)


class WorkspacePool:
    """The open workspaces of ``catalog``, by name, at most ``max_open`` (and, with
    ``max_open_memory_mb``, within that much actor memory); ``open_service`` makes the
    WorkspaceService of a workspace's settings."""

    def __init__(self, catalog: WorkspaceCatalog, open_service: Callable[[Settings], Awaitable[WorkspaceService]],
                 max_open: int = 8, max_open_memory_mb: float | None = None) -> None:
        self.catalog = catalog
        self.open_service = open_service
        self.max_open = max_open
        self.max_open_bytes = max_open_memory_mb * 2**20 if max_open_memory_mb else None
        self.hosted: OrderedDict[str, HostedWorkspace] = OrderedDict()
        self.locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)  # one opening or closing per name
        self.epochs = itertools.count(1)

    async def get(self, name: str, create: bool = False) -> HostedWorkspace:
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

    def is_open(self, name: str) -> bool:
        return name in self.hosted

    async def remove(self, name: str) -> None:
        """Close workspace ``name`` and delete it with everything in it; WriteBusy while an
        insert job runs in it, UnknownWorkspace for none of that name or a single-workspace app."""
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

    def record_gauges(self) -> None:
        """The open workspaces, their insert jobs, graph sizes and actor memory, as metrics
        (blocking: it reads each manifest and asks the actors for their memory). Never raises: a workspace closed
        meanwhile (its actors gone) is skipped until the next call."""
        metrics().gauge("workspaces_open", len(self.hosted))
        for hosted in list(self.hosted.values()):
            try:
                self._record_workspace_gauges(hosted)
            except Exception:  # noqa: BLE001 - figures must never fail the owner's health probe
                LOG.debug("no gauges for workspace %s this time", hosted.name, exc_info=True)

    @staticmethod
    def _record_workspace_gauges(hosted: HostedWorkspace) -> None:
        label = workspace_label(hosted.service.settings.workspace)
        running = int(hosted.service.write_lock.locked())
        metrics().gauge("insert_jobs", running, workspace=label, state="running")
        metrics().gauge("insert_jobs", max(len(hosted.service.unfinished_jobs()) - running, 0),
                        workspace=label, state="queued")
        manifest = manifests.load(hosted.service.workspace)  # its JSON alone: no document table read
        metrics().gauge("graph_items", manifest.entities, workspace=label, kind="entities")
        metrics().gauge("graph_items", manifest.relations, workspace=label, kind="relations")
        metrics().gauge("workspace_memory_bytes", hosted.service.memory_bytes(), workspace=label)

    def close_all(self) -> None:
        """Close every open workspace (the owner's graceful shutdown)."""
        for hosted in self.hosted.values():
            hosted.close()
        self.hosted.clear()

    async def _open(self, name: str, create: bool) -> HostedWorkspace:
        """Open workspace ``name`` as its writer, its unfinished insert jobs queued again."""
        settings = await asyncio.to_thread(self.catalog.settings_for, name, create)
        if not await asyncio.to_thread(shards_alive, settings):  # else a restarted owner attaches to them
            await self.wait_for_room(name, await asyncio.to_thread(self.catalog.cpus_to_open, settings))
        hosted = HostedWorkspace(name, await self.open_service(settings), next(self.epochs))
        hosted.start(lambda: self.room_for_job(name, job_cpus(settings)))
        return hosted

    async def room_for_job(self, name: str, cpus: float) -> None:
        """Before an insert job of workspace ``name``: close idle workspaces (least recently used
        first, never ``name``) while the cluster has less than ``cpus`` free, since the open
        ones' actors may hold every CPU and the job's tasks would wait for good; with none idle
        left the job starts anyway (it proceeds once other jobs free their CPUs)."""
        while not await self._room_or_close_idle(name, cpus):
            await asyncio.sleep(0.5)  # the cluster's resource view follows the actors' end
        if _free_cpus() < cpus - 1e-9:
            LOG.warning("insert job of workspace %r starts with %.2g CPU free (it needs %.2g) and no idle workspace "
                        "to close: it waits for other jobs' CPUs; add CPUs or lower max_open_workspaces", name,
                        _free_cpus(), cpus)

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

    async def _room_or_close_idle(self, keep: str, cpus: float) -> bool:
        """Whether the cluster has ``cpus`` free, or (when it has not) no idle workspace but
        ``keep`` is left to close; otherwise close the least recently used idle one (False)."""
        if _free_cpus() >= cpus - 1e-9:
            return True
        idle = [n for n, hosted in self.hosted.items() if n != keep and not hosted.busy()]
        if not idle:
            return True
        await self._close(idle[0])
        return False

    async def wait_for_room(self, name: str, cpus: float) -> None:
        """Wait until the cluster has ``cpus`` free for workspace ``name``'s actors, closing idle
        workspaces meanwhile; after ``ROOM_WAIT_S``, NoRoomForWorkspace."""
        deadline = time.monotonic() + ROOM_WAIT_S
        while not await self._room_or_close_idle(name, cpus) or _free_cpus() < cpus - 1e-9:
            if time.monotonic() > deadline:
                raise NoRoomForWorkspace(
                    f"no free CPU to open workspace {name!r} (its actors reserve {cpus:g}; "
                    f"{_free_cpus():g} free while insert jobs run): try again later, "
                    "or lower max_open_workspaces or graph.num_cpus, or add nodes")
            await asyncio.sleep(0.5)
