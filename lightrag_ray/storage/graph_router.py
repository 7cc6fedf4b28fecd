"""Route records to graph shards by stable hash and call all shards in one parallel round."""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

import ray

from lightrag_ray.config import GraphConfig
from lightrag_ray.core.ids import shard_of
from lightrag_ray.core.names import entity_key
from lightrag_ray.core.records import EntityRecord, RelationRecord
from lightrag_ray.storage.graph_shard import GraphShard

log = logging.getLogger(__name__)


def shard_actor_name(workspace_uri: str, shard: int, num_shards: int) -> str:
    """Ray actor name of one shard of one workspace."""
    tag = hashlib.md5(workspace_uri.encode()).hexdigest()[:10]
    return f"graph-{tag}-{shard:04d}-of-{num_shards:04d}"


# Rows copy the records' fields with vars(): they are all str or float, so a shallow copy
# is a full one, and dataclasses.asdict (to_dict) deep-copies at ~7 us a record, which made
# it a third of the time to merge 100k mentions (scripts/bench_scale.py).
def entity_rows(records: list[EntityRecord]) -> list[dict[str, Any]]:
    """Entity records -> shard rows carrying the identity key."""
    return [{**vars(r), "key": entity_key(r.name)} for r in records]


def relation_rows(records: list[RelationRecord]) -> list[dict[str, Any]]:
    """Relation records -> shard rows carrying both endpoint keys."""
    return [
        {**vars(r), "source_key": entity_key(r.source), "target_key": entity_key(r.target)}
        for r in records
    ]


class GraphRouter:
    """Driver-side handle on the shard actors of one workspace.

    It remembers what it sent each shard since the last snapshot; when a shard answers
    from a new incarnation (Ray restarted it from its snapshot), that log is replayed
    before the call is repeated, so a killed shard ends in the same state. Every write
    is idempotent per source chunk, so replays never double-count.
    """

    def __init__(self, workspace_uri: str, config: GraphConfig) -> None:
        self.num_shards = config.num_shards
        self.shards = []
        for i in range(self.num_shards):
            name = shard_actor_name(workspace_uri, i, self.num_shards)
            _kill_stale(name)
            # SPREAD: the shards go to different nodes when there are several, so their
            # memory adds up across the cluster and a lost node restarts only its share
            # (Ray's default packs small actors onto the first node).
            self.shards.append(
                GraphShard.options(
                    name=name, num_cpus=config.num_cpus, max_restarts=-1, max_task_retries=-1,
                    scheduling_strategy="SPREAD",
                ).remote(workspace_uri, i, self.num_shards, config.max_source_ids)
            )
        self.log: list[list[tuple[str, tuple[Any, ...]]]] = [[] for _ in self.shards]
        self.incarnations = [inc for inc, _ in ray.get([s.ping.remote() for s in self.shards])]

    # ---- plumbing -----------------------------------------------------------------
    def _call(self, calls: dict[int, tuple[str, tuple[Any, ...]]], record: bool) -> dict[int, Any]:
        """Run ``method(*args)`` on the given shards in parallel; replay restarted ones."""
        if record:
            for i, call in calls.items():
                self.log[i].append(call)
        pending = dict(calls)
        results: dict[int, Any] = {}
        while pending:
            refs = {i: getattr(self.shards[i], m).remote(*args) for i, (m, args) in pending.items()}
            answers = dict(zip(refs, ray.get(list(refs.values()))))
            retry = {}
            for i, (incarnation, result) in answers.items():
                if incarnation == self.incarnations[i]:
                    results[i] = result
                    continue
                log.warning("graph shard %d was restarted; replaying %d calls", i, len(self.log[i]))
                self.incarnations[i] = self._replay(i)
                retry[i] = pending[i]
            pending = retry
        return results

    def _replay(self, i: int) -> str:
        incarnation = None
        for method, args in self.log[i]:
            incarnation, _ = ray.get(getattr(self.shards[i], method).remote(*args))
        return incarnation or ray.get(self.shards[i].ping.remote())[0]

    def _all(self, method: str, *args: Any, record: bool = False) -> list[Any]:
        results = self._call({i: (method, args) for i in range(self.num_shards)}, record)
        return [results[i] for i in range(self.num_shards)]

    # ---- writes -------------------------------------------------------------------
    def apply(self, entities: list[EntityRecord], relations: list[RelationRecord]) -> None:
        """Merge extraction records into the shards that own them (one parallel round)."""
        per_shard: dict[int, tuple[list[dict], list[dict]]] = {}
        for row in entity_rows(entities):
            per_shard.setdefault(shard_of(row["key"], self.num_shards), ([], []))[0].append(row)
        for row in relation_rows(relations):
            if row["source_key"] == row["target_key"]:
                continue
            owners = {shard_of(row["source_key"], self.num_shards), shard_of(row["target_key"], self.num_shards)}
            for i in owners:
                per_shard.setdefault(i, ([], []))[1].append(row)
        self._call({i: ("apply", rows) for i, rows in per_shard.items()}, record=True)

    def remove_chunks(self, chunk_ids: list[str]) -> None:
        """Drop what these chunks contributed, on every shard."""
        self._all("remove_chunks", list(chunk_ids), record=True)

    def add_summaries(self, summaries: dict[str, str]) -> None:
        """Give every shard the new summaries (relations live on two shards)."""
        if summaries:
            self._all("add_summaries", summaries, record=True)

    def save(self) -> None:
        """Snapshot every shard; the replay log starts afresh."""
        self._all("save")
        self.log = [[] for _ in self.shards]

    # ---- reads --------------------------------------------------------------------
    def pending_summaries(self, max_fragments: int, max_tokens: int) -> list[dict[str, Any]]:
        """Items whose descriptions need an LLM summary, one per distinct fragment set."""
        todo = {}
        for items in self._all("pending_summaries", max_fragments, max_tokens):
            todo.update({item["hash"]: item for item in items})
        return list(todo.values())

    def take_changes(self) -> dict[str, list[Any]]:
        """Changed owned entities/relations of all shards since the last call."""
        merged: dict[str, list[Any]] = {"entities": [], "relations": [], "removed": []}
        for changes in self._all("take_changes"):
            for kind, items in changes.items():
                merged[kind].extend(items)
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

    def neighborhood(self, keys: list[str]) -> dict[str, list[dict[str, Any]]]:
        """The entities ``keys`` and their incident relations, asking each owner once."""
        per_shard: dict[int, list[str]] = {}
        for key in dict.fromkeys(keys):
            per_shard.setdefault(shard_of(key, self.num_shards), []).append(key)
        results = self._call({i: ("neighborhood", (ks,)) for i, ks in per_shard.items()}, record=False)
        entities = [e for i in sorted(results) for e in results[i]["entities"]]
        relations = {r["id"]: r for i in sorted(results) for r in results[i]["relations"]}
        return {"entities": entities, "relations": list(relations.values())}

    def fetch(self, keys: list[str], pairs: list[tuple[str, str]]) -> dict[str, list[dict[str, Any]]]:
        """Entities by key and relations by endpoint pair, in the order asked, in one round."""
        per_shard: dict[int, tuple[list[str], list[tuple[str, str]]]] = {}
        for key in dict.fromkeys(keys):
            per_shard.setdefault(shard_of(key, self.num_shards), ([], []))[0].append(key)
        for pair in dict.fromkeys(tuple(sorted(p)) for p in pairs):
            per_shard.setdefault(shard_of(pair[0], self.num_shards), ([], []))[1].append(pair)
        results = self._call({i: ("fetch", args) for i, args in per_shard.items()}, record=False)
        entities = {e["key"]: e for part in results.values() for e in part["entities"]}
        relations = {(r["source_key"], r["target_key"]): r for part in results.values() for r in part["relations"]}
        return {
            "entities": [entities[k] for k in dict.fromkeys(keys) if k in entities],
            "relations": [relations[p] for p in dict.fromkeys(tuple(sorted(p)) for p in pairs) if p in relations],
        }

    def close(self) -> None:
        """Stop the shard actors (their state is in the snapshots)."""
        for shard in self.shards:
            ray.kill(shard, no_restart=True)


def _kill_stale(name: str) -> None:
    """Kill a shard actor left by an earlier run in this cluster, so state comes from disk."""
    for _ in range(100):
        try:
            actor = ray.get_actor(name)
        except ValueError:
            return
        ray.kill(actor, no_restart=True)
        time.sleep(0.1)
    raise RuntimeError(f"graph shard actor {name} does not go away; is another run using this workspace?")

