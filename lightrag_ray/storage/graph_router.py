"""Route records to graph shards by stable hash and call all shards in one parallel round."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import ray

from lightrag_ray.config import GraphConfig
from lightrag_ray.core.alias_rules import NameRow
from lightrag_ray.core.records import EntityRecord, RelationRecord
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph_calls import (
    merge_fetch,
    merge_mention_rows,
    merge_neighborhood,
    plan_aliases,
    plan_apply,
    plan_fetch,
    plan_neighborhood,
    shard_actor_name,
)
from lightrag_ray.storage.graph_shard import GraphShard
from lightrag_ray.storage.workspace import Workspace

log = logging.getLogger(__name__)


class GraphRouter:
    """The writer's handle on the shard actors of one workspace.

    Each shard has ``config.replicas`` copies; every write reaches all of them (in the same
    order), reads need one. The router remembers what it sent each shard since the last
    commit; when a replica answers from a new incarnation (Ray restarted it from its
    committed state), that log is replayed before the call is repeated, so a killed shard ends in
    the same state. Every write is idempotent per source chunk, so replays never
    double-count.

    ``keep_alive`` (the Serve app's workspace owner): the actors are detached, so they
    outlive a crashed owner and keep answering readers, and a restarted owner attaches to
    the live ones instead of reloading them (undoing a write job the crashed one left open).
    Otherwise actors left by an earlier run are replaced, so state comes from disk.
    """

    def __init__(self, workspace_uri: str, config: GraphConfig, namespace: str | None = None,
                 keep_alive: bool = False) -> None:
        self.num_shards = config.num_shards
        self.replicas = config.replicas
        self.shards: list[list[Any]] = []
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
                copies.append(live or GraphShard.options(
                    name=name, namespace=namespace, num_cpus=config.num_cpus, max_restarts=-1,
                    max_task_retries=-1, scheduling_strategy="SPREAD",
                    lifetime="detached" if keep_alive else None,
                ).remote(workspace_uri, i, self.num_shards, config.max_source_ids, config.compaction_ratio))
            self.shards.append(copies)
        self.log: list[list[tuple[str, tuple[Any, ...]]]] = [[] for _ in self.shards]
        # The shards load their state while the caller goes on (an indexing run loads its model and
        # extracts meanwhile); the first call waits for them.
        self._pings = [[shard.ping.remote() for shard in copies] for copies in self.shards]
        self._incarnations: list[list[str]] | None = None
        if keep_alive:  # a job left open by a writer that died is undone (its re-run merges it again)
            self._all("rollback", replicas="all")

    # ---- plumbing -----------------------------------------------------------------
    @property
    def incarnations(self) -> list[list[str]]:
        """Each replica's incarnation id (waits, once, until every shard has loaded)."""
        if self._incarnations is None:
            self._incarnations = [[incarnation for incarnation, _ in ray.get(refs)] for refs in self._pings]
        return self._incarnations

    def _call(self, calls: dict[int, tuple[str, tuple[Any, ...]]], record: bool, replicas: str = "one") -> dict[int, Any]:
        """Run ``method(*args)`` on the given shards in parallel, on every replica
        (``replicas="all"``: writes) or on the first; replay restarted ones. The answer
        per shard is its first replica's."""
        if record:
            for i, call in calls.items():
                self.log[i].append(call)
        targets = range(self.replicas) if replicas == "all" else range(1)
        pending = {(i, j): call for i, call in calls.items() for j in targets}
        results: dict[int, Any] = {}
        while pending:
            refs = {(i, j): getattr(self.shards[i][j], m).remote(*args) for (i, j), (m, args) in pending.items()}
            answers = dict(zip(refs, ray.get(list(refs.values()))))
            retry = {}
            for (i, j), (incarnation, result) in answers.items():
                if incarnation == self.incarnations[i][j]:
                    if j == 0:
                        results[i] = result
                    continue
                log.warning("graph shard %d (replica %d) was restarted; replaying %d calls", i, j, len(self.log[i]))
                self.incarnations[i][j] = self._replay(i, j)
                retry[(i, j)] = pending[(i, j)]
            pending = retry
        return results

    def _replay(self, i: int, j: int) -> str:
        incarnation = None
        for method, args in self.log[i]:
            incarnation, _ = ray.get(getattr(self.shards[i][j], method).remote(*args))
        return incarnation or ray.get(self.shards[i][j].ping.remote())[0]

    def _all(self, method: str, *args: Any, record: bool = False, replicas: str = "one") -> list[Any]:
        results = self._call({i: (method, args) for i in range(self.num_shards)}, record, replicas)
        return [results[i] for i in range(self.num_shards)]

    # ---- writes -------------------------------------------------------------------
    def apply(self, entities: list[EntityRecord], relations: list[RelationRecord]) -> None:
        """Merge extraction records into the shards that own them (one parallel round)."""
        plan = plan_apply(entities, relations, self.num_shards)
        self._call({i: ("apply", rows) for i, rows in plan.items()}, record=True, replicas="all")

    def remove_chunks(self, chunk_ids: list[str]) -> None:
        """Drop what these chunks contributed, on every shard."""
        self._all("remove_chunks", list(chunk_ids), record=True, replicas="all")

    def add_summaries(self, summaries: dict[str, str]) -> None:
        """Give every shard the new summaries (relations live on two shards)."""
        if summaries:
            self._all("add_summaries", summaries, record=True, replicas="all")

    def drop(self, keys: list[str], pairs: list[tuple[str, str]]) -> None:
        """Remove entities with all their relations, and relations by endpoint keys, on every shard."""
        self._all("drop", list(keys), [tuple(p) for p in pairs], record=True, replicas="all")

    def relink_all(self) -> None:
        """Every entity counts as new for the next alias pass (a workspace built before aliases
        existed), on every replica, and again on a shard that restarts before the commit."""
        self._all("relink_all", record=True, replicas="all")

    def set_aliases(self, verdicts: list[tuple[str, str, str | None]]) -> int:
        """Link (reason) or unlink (None) pairs of entity keys on the shards of both ends;
        returns how many link ends changed."""
        plan = plan_aliases(verdicts, self.num_shards)
        return sum(self._call({i: ("set_aliases", (part,)) for i, part in plan.items()}, record=True, replicas="all").values())

    @contextlib.contextmanager
    def job(self) -> Iterator[None]:
        """One write job: readers (``fetch``, ``neighborhood``, ``export``, ``labels``, and
        ShardReader) keep the graph as it was until the block ends, then see all of its
        writes; if the block raises, its writes are undone on every shard."""
        self._all("begin", record=True, replicas="all")
        try:
            yield
        except BaseException:
            self._all("rollback", record=True, replicas="all")
            raise
        self._all("publish", replicas="all")

    def commit(self, workspace: Workspace, manifest: manifests.Manifest | None = None) -> manifests.Manifest:
        """Persist what the writes changed as the next graph version and return the manifest
        that records it (on top of ``manifest`` when the caller holds a newer one than the file).

        Every shard writes its delta (replicas hold the same state: the first one writes),
        then the manifest moves to the new version: the commit point, before which a loading
        shard ignores those files. Then the shards start a new change set (compacting in the
        background when their deltas have grown) and the replay log starts afresh."""
        manifest = manifest or manifests.load(workspace)
        version = manifest.graph_version + 1
        self._all("save", version)
        manifest = manifests.record_graph(workspace, self.counts(), manifest)
        self._all("committed", version)
        if self.replicas > 1:
            self._all("mark_saved", replicas="all")
        self.log = [[] for _ in self.shards]
        return manifest

    # ---- reads --------------------------------------------------------------------
    def pending_summaries(self, max_fragments: int, max_tokens: int) -> list[dict[str, Any]]:
        """Items whose descriptions need an LLM summary, one per distinct fragment set (the
        same one whatever the shards' order, so the same graph gives the same prompts)."""
        items = [item for shard in self._all("pending_summaries", max_fragments, max_tokens) for item in shard]
        todo: dict[str, dict[str, Any]] = {}
        for item in sorted(items, key=lambda i: (i["hash"], i["kind"], i["name"], i["base"])):
            todo.setdefault(item["hash"], item)
        return list(todo.values())

    def take_changes(self) -> dict[str, list[Any]]:
        """Changed owned entities/relations of all shards since the last call."""
        merged: dict[str, list[Any]] = {"entities": [], "relations": [], "removed": []}
        for changes in self._all("take_changes", replicas="all"):  # every replica forgets them
            for kind, items in changes.items():
                merged[kind].extend(items)
        return merged

    def new_names(self) -> list[NameRow]:
        """(key, name, passages) of the entities created since the last call (every replica forgets them)."""
        return [name for names in self._all("new_names", replicas="all") for name in names]

    def block_members(self, blocks: list[str], limit: int) -> dict[str, list[NameRow]]:
        """Per alias block key, the entities in it as (key, name), from every shard (each
        gives at most ``limit + 1``)."""
        merged: dict[str, list[NameRow]] = {}
        for found in self._all("block_members", blocks, limit):
            for block, members in found.items():
                merged.setdefault(block, []).extend(members)
        return merged

    def counts(self) -> dict[str, int]:
        """Entities and relations in the whole graph."""
        totals = {"entities": 0, "relations": 0}
        for counts in self._all("counts"):
            for kind, n in counts.items():
                totals[kind] += n
        return totals

    def export(self) -> dict[str, list[dict[str, Any]]]:
        """The whole graph: every entity and relation, sorted by id."""
        parts = self._all("export")
        return {
            kind: sorted((item for part in parts for item in part[kind]), key=lambda item: item["id"])
            for kind in ("entities", "relations")
        }

    def labels(self) -> list[str]:
        """Names of all entities, sorted."""
        return sorted(name for names in self._all("labels") for name in names)

    def neighborhood(self, keys: list[str], max_relations: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """The entities ``keys`` and their incident relations (all, or the best
        ``max_relations`` per shard), asking each owner once."""
        plan = plan_neighborhood(keys, self.num_shards, max_relations)
        return merge_neighborhood(self._call({i: ("neighborhood", args) for i, args in plan.items()}, record=False))

    def mention_rows(self, keys: list[str]) -> dict[str, list[Any]]:
        """What the chunks said about the entities ``keys`` and all their relations, as ``apply``
        rows of the live graph (``found``: the keys that exist), asking each owner once."""
        plan = plan_fetch(keys, [], self.num_shards)
        return merge_mention_rows(self._call({i: ("mention_rows", (owned,)) for i, (owned, _) in plan.items()}, record=False))

    def fetch(self, keys: list[str], pairs: list[tuple[str, str]]) -> dict[str, list[dict[str, Any]]]:
        """Entities by key and relations by endpoint pair, in the order asked, in one round."""
        plan = plan_fetch(keys, pairs, self.num_shards)
        return merge_fetch(self._call({i: ("fetch", args) for i, args in plan.items()}, record=False), keys, pairs)

    def close(self) -> None:
        """Stop the shard actors once their compactions are done (their state is on disk)."""
        try:
            self._all("wait_tidy")
        except ray.exceptions.RayError as error:  # a dead shard has nothing to finish
            log.warning("graph shards: %s", error)
        for copies in self.shards:
            for shard in copies:
                ray.kill(shard, no_restart=True)


def _live_actor(name: str, namespace: str | None) -> Any | None:
    """The running actor called ``name``, or None."""
    try:
        actor = ray.get_actor(name, namespace=namespace)
        ray.get(actor.ping.remote(), timeout=30)
        return actor
    except (ValueError, ray.exceptions.RayError):
        return None


def _kill_stale(name: str, namespace: str | None) -> None:
    """Kill a shard actor left by an earlier run in this cluster, so state comes from disk."""
    for _ in range(100):
        try:
            actor = ray.get_actor(name, namespace=namespace)
        except ValueError:
            return
        ray.kill(actor, no_restart=True)
        time.sleep(0.1)
    raise RuntimeError(f"graph shard actor {name} does not go away; is another run using this workspace?")
