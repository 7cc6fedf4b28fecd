"""The writer's handle on a workspace's graph shards: it starts (or attaches to) the shard
actors, runs every operation of the graph contract (core.graph.contract) through their
ShardHandles, opens and ends write jobs, and commits graph versions."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import ray

from lightrag_ray.config import GraphConfig
from lightrag_ray.ray_runtime import named_actor
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph.actor import GraphShard, shard_actor_name
from lightrag_ray.storage.graph.handles import ShardHandles
from lightrag_ray.storage.workspace import Workspace

log = logging.getLogger(__name__)


class WriteJob:
    """An open write job (GraphRouter.job): the steps to run once it is published, or undone."""

    def __init__(self) -> None:
        self.steps: list[Callable[[], object]] = []
        self.undo_steps: list[Callable[[], object]] = []

    def after_publish(self, step: Callable[[], object]) -> None:
        """Run ``step`` once readers see the job (e.g. delete the vector rows it retired)."""
        self.steps.append(step)

    def if_rolled_back(self, step: Callable[[], object]) -> None:
        """Run ``step`` if the job is undone (e.g. delete the vector rows it stored)."""
        self.undo_steps.append(step)


class GraphRouter(ShardHandles):
    """The writer's handle on the shard actors of one workspace.

    Each shard has ``config.replicas`` copies; every write reaches all of them, reads need one.
    Writes may also come from other processes through ``handles`` (extraction workers merge
    straight into the shards). Each replica logs the writes since the last commit and a
    restarted one replays its log (storage.graph.wal), so a killed shard ends in the same
    state; every write is idempotent per source chunk, so a retried call never double-counts.

    ``keep_alive`` (the Serve app's workspace owner): the actors are detached, so they
    outlive a crashed owner and keep answering readers, and a restarted owner attaches to
    the live ones instead of reloading them (undoing a write job the crashed one left open).
    Otherwise actors left by an earlier run are replaced, so state comes from disk.
    """

    def __init__(self, workspace_uri: str, config: GraphConfig, namespace: str | None = None,
                 keep_alive: bool = False) -> None:
        if config.num_shards == "auto":
            raise ValueError("a graph router needs the workspace's shard count, not 'auto': open the workspace "
                             "with service.opening (open_workspace, or bound_settings for its settings)")
        self.num_shards = config.num_shards
        self.replicas = config.replicas
        writer = uuid.uuid4().hex[:12]  # this router's write session: its shards' logs are replayed
        shards: list[list[Any]] = []
        for i in range(self.num_shards):
            copies = []
            for j in range(self.replicas):
                name = shard_actor_name(workspace_uri, i, self.num_shards, j)
                live = _live_actor(name, namespace) if keep_alive else None
                if live is None and not keep_alive:
                    _kill_stale(name, namespace)
                # SPREAD: the shards go to different nodes when there are several, so their
                # memory adds up across the cluster and a lost node restarts only its share
                # (Ray's default packs small actors onto the first node).
                copies.append(live or GraphShard.options(  # type: ignore[attr-defined]  # (Ray adds it)
                    name=name, namespace=namespace, num_cpus=config.num_cpus, max_restarts=-1,
                    max_task_retries=-1, scheduling_strategy="SPREAD",
                    lifetime="detached" if keep_alive else None,
                ).remote(workspace_uri, i, self.num_shards, config.max_source_ids, config.compaction_ratio, j, writer))
            shards.append(copies)
        # The shards load their state while the caller goes on (an indexing run loads its model and
        # extracts meanwhile); the first call waits for them.
        super().__init__(shards)
        self.handles = ShardHandles(shards)  # picklable, for the run's tasks and workers
        if keep_alive:  # a job left open by a writer that died is undone (its re-run merges it again)
            self.rollback()

    def _lifecycle(self, method: str, *args: Any, every_replica: bool = False) -> list[Any]:
        """An actor method that is not a graph operation (saving, compaction), on every shard."""
        results = self.every({i: (method, args) for i in range(self.num_shards)}, every_replica)
        return [results[i] for i in range(self.num_shards)]

    def memory_bytes(self) -> int:
        """Resident memory of the shard actors (the first copies', times the copies)."""
        return sum(self._lifecycle("memory")) * self.replicas

    # ---- write jobs -------------------------------------------------------------------
    @contextlib.contextmanager
    def job(self) -> Iterator[WriteJob]:
        """One write job: readers (``fetch``, ``neighborhood``, ``export``, ``labels``, and
        ShardReader) keep the graph as it was until the block ends, then see all of its
        writes; if the block raises, its writes are undone on every shard. What the block
        hands to ``WriteJob.after_publish`` (deleting the vectors it retired) runs once the
        job is published; then the shards tell readers that the vectors are settled."""
        self.begin()
        job = WriteJob()
        try:
            yield job
        except BaseException:
            self.rollback()
            for undo in job.undo_steps:
                try:
                    undo()
                except Exception:  # the job's own error is the one to raise
                    log.exception("undoing a write job's vectors failed; readers keep filtering them")
            raise
        self.publish()
        for step in job.steps:  # a step that raises leaves the vectors unsettled: readers keep filtering
            step()
        self.settle()

    def commit(self, workspace: Workspace, manifest: manifests.Manifest | None = None) -> manifests.Manifest:
        """Persist what the writes changed as the next graph version and return the manifest
        that records it (on top of ``manifest`` when the caller holds a newer one than the file).

        Every shard writes its delta (replicas hold the same state: the first one writes),
        then the manifest moves to the new version: the commit point, before which a loading
        shard ignores those files. Then the shards start a new change set and write log
        (compacting in the background when their deltas have grown)."""
        manifest = manifest or manifests.load(workspace)
        version = manifest.graph_version + 1
        self._lifecycle("save", version)
        manifest = manifests.record_graph(workspace, self.counts(), manifest)
        self._lifecycle("committed", version)
        if self.replicas > 1:
            self._lifecycle("mark_saved", version, every_replica=True)
        return manifest

    def close(self) -> None:
        """Stop the shard actors once their compactions are done (their state is on disk)."""
        try:
            self._lifecycle("wait_tidy")
        except ray.exceptions.RayError as error:  # a dead shard has nothing to finish
            log.warning("graph shards: %s", error)
        for copies in self.shards:
            for shard in copies:
                ray.kill(shard, no_restart=True)


def _live_actor(name: str, namespace: str | None) -> Any | None:
    """The running actor called ``name``, or None."""
    actor = named_actor(name, namespace)
    if actor is None:
        return None
    try:
        ray.get(actor.ping.remote(), timeout=30)
        return actor
    except ray.exceptions.RayError:
        return None


def _kill_stale(name: str, namespace: str | None) -> None:
    """Kill a shard actor left by an earlier run in this cluster, so state comes from disk."""
    for _ in range(100):
        actor = named_actor(name, namespace)
        if actor is None:
            return
        ray.kill(actor, no_restart=True)
        time.sleep(0.1)
    raise RuntimeError(f"graph shard actor {name} does not go away; is another run using this workspace?")
