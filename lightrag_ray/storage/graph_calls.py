"""Which shard to ask for what, and how their answers combine (pure functions).

An entity lives on the shard of its key; a relation on both endpoints' shards, owned by
the shard of the smaller key. The writer (GraphRouter) and the readers (ShardReader) plan
and merge their lookups here, so both ask each shard at most once per round.
"""

from __future__ import annotations

import hashlib
from typing import Any

from lightrag_ray.core.ids import shard_of
from lightrag_ray.core.names import entity_key
from lightrag_ray.core.records import EntityRecord, RelationRecord

Pair = tuple[str, str]


def shard_actor_name(workspace_uri: str, shard: int, num_shards: int, replica: int = 0) -> str:
    """Ray actor name of one replica of one shard of one workspace."""
    tag = hashlib.md5(workspace_uri.encode()).hexdigest()[:10]
    suffix = f"-r{replica}" if replica else ""
    return f"graph-{tag}-{shard:04d}-of-{num_shards:04d}{suffix}"


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


def plan_apply(entities: list[EntityRecord], relations: list[RelationRecord], num_shards: int) -> dict[int, tuple[list[dict], list[dict]]]:
    """Shard rows per shard: an entity to its owner, a relation to both endpoints' shards
    (self-relations are dropped)."""
    plan: dict[int, tuple[list[dict], list[dict]]] = {}
    for row in entity_rows(entities):
        plan.setdefault(shard_of(row["key"], num_shards), ([], []))[0].append(row)
    for row in relation_rows(relations):
        if row["source_key"] == row["target_key"]:
            continue
        for shard in {shard_of(row["source_key"], num_shards), shard_of(row["target_key"], num_shards)}:
            plan.setdefault(shard, ([], []))[1].append(row)
    return plan


def plan_aliases(verdicts: list[tuple[str, str, str | None]], num_shards: int) -> dict[int, list[tuple[str, str, str | None]]]:
    """Alias verdicts (key, key, reason) per shard: each goes to the shards of both keys."""
    plan: dict[int, list[tuple[str, str, str | None]]] = {}
    for verdict in verdicts:
        for shard in {shard_of(verdict[0], num_shards), shard_of(verdict[1], num_shards)}:
            plan.setdefault(shard, []).append(verdict)
    return plan


def plan_neighborhood(keys: list[str], num_shards: int, max_relations: int | None) -> dict[int, tuple[Any, ...]]:
    """Arguments of ``neighborhood`` per shard owning one of ``keys``; every shard gets the
    whole ranked key list, since a relation's rank depends on both of its endpoints."""
    ranked = list(dict.fromkeys(keys))
    return {shard: (ranked, max_relations) for shard in sorted({shard_of(k, num_shards) for k in ranked})}


def merge_neighborhood(results: dict[int, dict[str, list[dict[str, Any]]]]) -> dict[str, list[dict[str, Any]]]:
    """Entities of all shards, and relations without the copies both endpoints' shards sent."""
    entities = [e for shard in sorted(results) for e in results[shard]["entities"]]
    relations = {r["id"]: r for shard in sorted(results) for r in results[shard]["relations"]}
    return {"entities": entities, "relations": list(relations.values())}


def plan_passage_entities(chunk_ids: list[str], keys: list[str], num_shards: int, max_chunks: int) -> dict[int, tuple[Any, ...]]:
    """Arguments of ``passage_entities`` per shard: the passages to every shard (any may own
    an entity they mention), each key to its owner only."""
    owned: dict[int, list[str]] = {shard: [] for shard in range(num_shards)} if chunk_ids else {}
    for key in dict.fromkeys(keys):
        owned.setdefault(shard_of(key, num_shards), []).append(key)
    return {shard: (list(chunk_ids), owned[shard], max_chunks) for shard in sorted(owned)}


def merge_passage_entities(results: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The rows of all shards, in shard order (each entity comes from its owner only)."""
    return [row for shard in sorted(results) for row in results[shard]]


def plan_fetch(keys: list[str], pairs: list[Pair], num_shards: int) -> dict[int, tuple[list[str], list[Pair]]]:
    """Arguments of ``fetch`` per shard: entities on their shard, relations on their owner."""
    plan: dict[int, tuple[list[str], list[Pair]]] = {}
    for key in dict.fromkeys(keys):
        plan.setdefault(shard_of(key, num_shards), ([], []))[0].append(key)
    for pair in dict.fromkeys(_sorted_pair(p) for p in pairs):
        plan.setdefault(shard_of(pair[0], num_shards), ([], []))[1].append(pair)
    return plan


def merge_fetch(results: dict[int, dict[str, list[dict[str, Any]]]], keys: list[str], pairs: list[Pair]) -> dict[str, list[dict[str, Any]]]:
    """Entities by key and relations by pair, in the order asked, found ones only."""
    entities = {e["key"]: e for part in results.values() for e in part["entities"]}
    relations = {(r["source_key"], r["target_key"]): r for part in results.values() for r in part["relations"]}
    return {
        "entities": [entities[k] for k in dict.fromkeys(keys) if k in entities],
        "relations": [relations[p] for p in dict.fromkeys(_sorted_pair(p) for p in pairs) if p in relations],
    }


def merge_mention_rows(results: dict[int, dict[str, list[Any]]]) -> dict[str, list[Any]]:
    """Found keys and mention rows of all shards; a relation whose two endpoints were both
    asked for comes from the first shard only."""
    merged: dict[str, list[Any]] = {"found": [], "entities": [], "relations": []}
    seen: set[Pair] = set()
    for shard in sorted(results):
        part = results[shard]
        merged["found"] += part["found"]
        merged["entities"] += part["entities"]
        merged["relations"] += [r for r in part["relations"] if (r["source_key"], r["target_key"]) not in seen]
        seen |= {(r["source_key"], r["target_key"]) for r in part["relations"]}
    return merged


def _sorted_pair(pair: Pair) -> Pair:
    a, b = pair
    return (a, b) if a <= b else (b, a)
