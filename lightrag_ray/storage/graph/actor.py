"""The graph shard actor: a thin Ray wrapper around ShardGraph that runs the operations of
the graph contract (core.graph.contract) and keeps the shard's files: a base and one delta
per committed job (storage/graph/snapshot.py), and the log of the writes since the last
commit (storage/graph/wal.py), from which a restarted actor recovers them."""

from __future__ import annotations

import hashlib
import threading
import uuid
from typing import Any

import psutil
import pyarrow as pa
import ray

from lightrag_ray.core.graph.contract import WRITE, Operation, operation
from lightrag_ray.core.graph.shard_graph import ShardGraph
from lightrag_ray.storage.graph.snapshot import load_snapshot, save_snapshot, snapshot_folder, tidy
from lightrag_ray.storage.graph.wal import WriteLog
from lightrag_ray.storage.workspace import Workspace


def shard_actor_name(workspace_uri: str, shard: int, num_shards: int, replica: int = 0) -> str:
    """Ray actor name of one replica of one shard of one workspace."""
    tag = hashlib.md5(workspace_uri.encode()).hexdigest()[:10]
    suffix = f"-r{replica}" if replica else ""
    return f"graph-{tag}-{shard:04d}-of-{num_shards:04d}{suffix}"


# Arrow (pyarrow and its C++ side: file reads, compute kernels) allocates from the system
# allocator in a shard: a shard's tables are a few large buffers replaced whole when the writes
# are folded in, which the system allocator gives back to the OS, where Arrow's default
# (mimalloc) keeps freed pages (a 157k-entity shard held 1.0 GiB instead of 0.45, and a load
# kept the 264 MiB of snapshot it read: 591 MiB above the empty process instead of 273 on the
# 1M-mention bench graph). Only an environment variable, read when pyarrow loads, sets it.
SHARD_RUNTIME_ENV = {"env_vars": {"ARROW_DEFAULT_MEMORY_POOL": "system"}}


# No task events: every query reads the shards, and on a cluster with a dashboard those reads
# would fill the GCS's task table (its last 100k tasks) and push out the tasks worth seeing,
# as Serve's own replicas do not record theirs either.
@ray.remote(runtime_env=SHARD_RUNTIME_ENV, enable_task_events=False)
class GraphShard:
    """Owns the entities whose key hashes to ``shard``; on (re)start it loads its committed
    state and replays the writes its ``writer`` session logged since.

    ``compaction_ratio``: a job's changes are saved as a delta; once the deltas outgrow this
    share of the base, a thread folds them into a new base (and a job that changed this share of
    the shard's items saves a whole base at once)."""

    def __init__(self, workspace_uri: str, shard: int, num_shards: int, max_source_ids: int,
                 compaction_ratio: float = 0.5, replica: int = 0, writer: str = "") -> None:
        self.workspace = Workspace(workspace_uri)
        self.graph = ShardGraph(shard, num_shards, max_source_ids)
        self.folder = snapshot_folder(shard, num_shards)
        self.compaction_ratio = compaction_ratio
        load_snapshot(self.workspace, self.graph)
        self.log = WriteLog(self.workspace, self.folder, replica, writer)
        for name, args in self.log.recover():
            operation(name).run_on(self.graph, args)
        self.folds = self.graph.folds
        pa.default_memory_pool().release_unused()
        self.tidying: threading.Thread | None = None
        self.incarnation = uuid.uuid4().hex  # changes when Ray restarts the actor

    # Every method answers (incarnation, result): callers can tell that the actor was restarted.
    def ping(self) -> tuple[str, None]:
        return self.incarnation, None

    def call(self, op: Operation[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
        """Run one operation of the graph contract (core.graph.contract) on this shard; a
        write is logged first."""
        if op.access is WRITE:
            self.log.append(op.name, args)
        result = op.run_on(self.graph, args)
        if self.graph.folds != self.folds:  # the tables were rebuilt: return the old ones' memory
            self.folds = self.graph.folds
            pa.default_memory_pool().release_unused()
        return self.incarnation, result

    def memory(self) -> tuple[str, int]:
        """This actor process's resident memory, in bytes."""
        return self.incarnation, psutil.Process().memory_info().rss

    def save(self, version: int) -> tuple[str, str]:
        """Write the changes since the last commit as graph version ``version`` ("delta",
        "base" or "none"); they count once the manifest says ``version``."""
        return self.incarnation, save_snapshot(self.workspace, self.graph, version, self.compaction_ratio)

    def committed(self, version: int) -> tuple[str, None]:
        """``version`` is committed: start a new change set and write log, and compact or remove
        replaced files in a background thread (at most one at a time)."""
        self.graph.mark_saved(version)
        self.log.clear()
        if self.tidying is None or not self.tidying.is_alive():
            self.tidying = threading.Thread(target=tidy, args=(self.workspace, self.folder, version, self.compaction_ratio),
                                            name="graph-compaction", daemon=True)
            self.tidying.start()
        return self.incarnation, None

    def mark_saved(self, version: int) -> tuple[str, None]:
        """Start a new change set and write log of graph ``version`` (a replica: the first copy
        writes the files)."""
        self.graph.mark_saved(version)
        self.log.clear()
        return self.incarnation, None

    def wait_tidy(self) -> tuple[str, None]:
        """Wait for a running compaction (before the actor is stopped)."""
        if self.tidying is not None:
            self.tidying.join()
        return self.incarnation, None
