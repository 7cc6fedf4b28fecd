"""Which shard to ask for what, and how their answers combine (pure functions).

An entity lives on the shard of its key; a relation on both endpoints' shards, owned by
the shard of the smaller key. The writer (GraphRouter) and the readers (ShardReader) plan
and merge their lookups here, so both ask each shard at most once per round.
"""

from __future__ import annotations

from typing import Any

from lightrag_ray.core.ids import shard_of
from lightrag_ray.core.names import entity_key
from lightrag_ray.core.records import EntityRecord, RelationRecord

Pair = tuple[str, str]


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


def plan_apply(num_shards: int, entities: list[EntityRecord], relations: list[RelationRecord]) -> dict[int, tuple[list[dict], list[dict]]]:
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


def plan_aliases(num_shards: int, verdicts: list[tuple[str, str, str | None]]) -> dict[int, tuple[list[tuple[str, str, str | None]]]]:
    """Alias verdicts (key, key, reason) per shard: each goes to the shards of both keys."""
    plan: dict[int, list[tuple[str, str, str | None]]] = {}
    for verdict in verdicts:
        for shard in {shard_of(verdict[0], num_shards), shard_of(verdict[1], num_shards)}:
            plan.setdefault(shard, []).append(verdict)
    return {shard: (part,) for shard, part in plan.items()}


def plan_neighborhood(num_shards: int, keys: list[str], max_relations: int | None = None) -> dict[int, tuple[Any, ...]]:
    """Arguments of ``neighborhood`` per shard owning one of ``keys``; every shard gets the
    whole ranked key list, since a relation's rank depends on both of its endpoints."""
    ranked = list(dict.fromkeys(keys))
    return {shard: (ranked, max_relations) for shard in sorted({shard_of(k, num_shards) for k in ranked})}


def merge_neighborhood(results: dict[int, dict[str, list[dict[str, Any]]]], *args: Any) -> dict[str, list[dict[str, Any]]]:
    """Entities of all shards, and relations without the copies both endpoints' shards sent."""
    entities = [e for shard in sorted(results) for e in results[shard]["entities"]]
    relations = {r["id"]: r for shard in sorted(results) for r in results[shard]["relations"]}
    return {"entities": entities, "relations": list(relations.values())}


def plan_passage_entities(num_shards: int, chunk_ids: list[str], keys: list[str], max_chunks: int) -> dict[int, tuple[Any, ...]]:
    """Arguments of ``passage_entities`` per shard: the passages to every shard (any may own
    an entity they mention), each key to its owner only."""
    owned: dict[int, list[str]] = {shard: [] for shard in range(num_shards)} if chunk_ids else {}
    for key in dict.fromkeys(keys):
        owned.setdefault(shard_of(key, num_shards), []).append(key)
    return {shard: (list(chunk_ids), owned[shard], max_chunks) for shard in sorted(owned)}


def plan_fetch(num_shards: int, keys: list[str], pairs: list[Pair]) -> dict[int, tuple[list[str], list[Pair]]]:
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


def plan_owned(num_shards: int, keys: list[str]) -> dict[int, tuple[list[str]]]:
    """The keys per owning shard."""
    return {shard: (owned,) for shard, (owned, _) in plan_fetch(num_shards, keys, []).items()}


def merge_mention_rows(results: dict[int, dict[str, list[Any]]], *args: Any) -> dict[str, list[Any]]:
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


# ---- operations every shard answers --------------------------------------------------------
def every_shard(num_shards: int, *args: Any) -> dict[int, tuple[Any, ...]]:
    """The same arguments to every shard."""
    return {shard: args for shard in range(num_shards)}


def first_shard(num_shards: int, *args: Any) -> dict[int, tuple[Any, ...]]:
    """Shard 0 alone (an answer every shard knows alike)."""
    return {0: args}


def only_answer(results: dict[int, Any], *args: Any) -> Any:
    """The one shard's answer."""
    [answer] = results.values()
    return answer


def every_shard_if_any(num_shards: int, *args: Any) -> dict[int, tuple[Any, ...]]:
    """The same arguments to every shard, or no call when the first argument is empty."""
    return every_shard(num_shards, *args) if args[0] else {}


def as_lists(num_shards: int, *args: Any) -> dict[int, tuple[Any, ...]]:
    """Every shard, with each argument as a list (of tuples for pairs), so any iterable can be given."""
    return every_shard(num_shards, *([tuple(p) if isinstance(p, (list, tuple)) else p for p in arg] for arg in args))


def nothing(results: dict[int, Any], *args: Any) -> None:
    """Writes answer nothing."""
    return None


def total(results: dict[int, Any], *args: Any) -> Any:
    """The sum of the shards' answers (numbers, or dicts of numbers)."""
    answers = [results[shard] for shard in sorted(results)]
    if answers and isinstance(answers[0], dict):
        return {key: sum(a[key] for a in answers) for key in answers[0]}
    return sum(answers)


def concatenated(results: dict[int, list[Any]], *args: Any) -> list[Any]:
    """The shards' lists, one after the other in shard order."""
    return [item for shard in sorted(results) for item in results[shard]]


def rows_by_key(results: dict[int, list[dict[str, Any]]], *args: Any) -> list[dict[str, Any]]:
    """The shards' rows as one list sorted by ``key``: the same whatever the shard count
    (a walk's PageRank sums in the order its rows come, and ties rank by that order)."""
    return sorted(concatenated(results), key=lambda row: row["key"])


def sorted_union(results: dict[int, list[Any]], *args: Any) -> list[Any]:
    """The shards' lists as one sorted list."""
    return sorted(concatenated(results))


def concatenated_by_kind(results: dict[int, dict[str, list[Any]]], *args: Any) -> dict[str, list[Any]]:
    """Per key (kind), the shards' lists one after the other in shard order."""
    merged: dict[str, list[Any]] = {}
    for shard in sorted(results):
        for kind, items in results[shard].items():
            merged.setdefault(kind, []).extend(items)
    return merged


def merge_export(results: dict[int, dict[str, list[dict[str, Any]]]], *args: Any) -> dict[str, list[dict[str, Any]]]:
    """The whole graph: every entity and relation of all shards, sorted by id."""
    merged = concatenated_by_kind(results)
    return {kind: sorted(merged.get(kind, []), key=lambda item: item["id"]) for kind in ("entities", "relations")}


def merge_pending_summaries(results: dict[int, list[dict[str, Any]]], *args: Any) -> list[dict[str, Any]]:
    """Items to summarise, one per distinct fragment set (the same one whatever the shards'
    order, so the same graph gives the same prompts)."""
    todo: dict[str, dict[str, Any]] = {}
    for item in sorted(concatenated(results), key=lambda i: (i["hash"], i["kind"], i["name"], i["base"])):
        todo.setdefault(item["hash"], item)
    return list(todo.values())


def _sorted_pair(pair: Pair) -> Pair:
    a, b = pair
    return (a, b) if a <= b else (b, a)
