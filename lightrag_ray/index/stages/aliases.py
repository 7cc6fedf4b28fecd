"""Stage ``aliases``: after a run has merged its entities, link the new ones to their name
variants on every shard (core.alias_rules).

Three rounds, each bounded by the new entities times MAX_BLOCK, whatever the size of the graph:

1. Each shard gives the entities it gained since the last pass.
2. Each block key those names fall in is judged with every entity in it, from every shard
   (blocks of more than MAX_BLOCK names are skipped).
3. The verdicts (links, and unlinkings of names that became ambiguous) go to the shards of
   both ends; for a pair judged in several blocks, a link wins, the last block's.

``link_aliases`` runs the rounds in this process (small runs, the tests' in-memory graph);
``link_aliases_across`` runs them as Ray tasks, one per shard, then per partition of the block
keys, then per partition of the pairs, so no name passes through the driver.
"""

from __future__ import annotations

import zlib
from typing import Any

import ray

from lightrag_ray.core.alias_rules import MAX_BLOCK, Name, NameRow, block_keys, block_verdicts, find_aliases
from lightrag_ray.core.graph.contract import GraphOperations
from lightrag_ray.storage.graph.handles import ShardHandles

Verdict = tuple[str, str, str | None]


def link_aliases(graph: GraphOperations, everything: bool = False) -> int:
    """Link the entities created since the last pass (``everything``: all of them, for a
    workspace built before aliases existed) to their variants (``graph``: any holder of the
    graph contract's writer operations); returns how many link ends were made or removed."""
    if everything:
        graph.relink_all()
    new = [Name.of(row) for row in graph.new_names()]
    if not new:
        return 0
    blocks = sorted({block for name in new for block in block_keys(name.key)})
    members = {block: [Name.of(row) for row in found] for block, found in graph.block_members(blocks, MAX_BLOCK).items()}
    verdicts = find_aliases({name.key for name in new}, members)
    if not verdicts:
        return 0
    return graph.set_aliases([(a, b, reason) for (a, b), reason in sorted(verdicts.items())])


def _partition(text: str, partitions: int) -> int:
    return zlib.crc32(text.encode()) % partitions


def _split(items: list[Any], key: Any, partitions: int) -> tuple[list[Any], ...] | list[Any]:
    parts: list[list[Any]] = [[] for _ in range(partitions)]
    for item in items:
        parts[_partition(key(item), partitions)].append(item)
    return tuple(parts) if partitions > 1 else parts[0]


@ray.remote
def _new_names_by_block(shards: ShardHandles, shard: int, partitions: int) -> Any:
    """Round 1: one shard's new names as (block, name row), split by block key."""
    rows: list[NameRow] = shards.on_shard(shard, GraphOperations.new_names)
    entries = [(block, row) for row in rows for block in block_keys(row[0])]
    return _split(entries, lambda entry: entry[0], partitions)


@ray.remote
def _judge_blocks(shards: ShardHandles, partitions: int, *per_shard: list[tuple[str, NameRow]]) -> Any:
    """Round 2: the verdicts of one partition's blocks, as (pair, block, reason), split by pair."""
    new: dict[str, set[str]] = {block: set() for entries in per_shard for block, _ in entries}
    for entries in per_shard:
        for block, row in entries:
            new[block].add(row[0])
    found = shards.block_members(sorted(new), MAX_BLOCK) if new else {}
    judged = [(pair, block, reason) for block, rows in sorted(found.items())
              for pair, reason in block_verdicts(new[block], [Name.of(row) for row in rows]).items()]
    return _split(judged, lambda entry: "\x1f".join(entry[0]), partitions)


@ray.remote
def _link_pairs(shards: ShardHandles, *per_partition: list[tuple[tuple[str, str], str, str | None]]) -> int:
    """Round 3: one partition of pairs: a link wins over an unlinking, the last block's link
    over earlier ones (as find_aliases); the verdicts go to the shards of both ends."""
    verdicts: dict[tuple[str, str], str | None] = {}
    for pair, _, reason in sorted((entry for entries in per_partition for entry in entries), key=lambda e: e[1]):
        if reason is not None or pair not in verdicts:
            verdicts[pair] = reason
    if not verdicts:
        return 0
    return shards.set_aliases([(a, b, reason) for (a, b), reason in sorted(verdicts.items())])


def link_aliases_across(shards: ShardHandles, task_options: dict[str, Any], everything: bool = False) -> int:
    """``link_aliases`` as Ray tasks over the shards (see the module doc)."""
    if everything:
        shards.relink_all()
    partitions = max(1, shards.num_shards)

    def listed(refs: Any) -> list[Any]:
        return list(refs) if partitions > 1 else [refs]

    names = [listed(_new_names_by_block.options(num_returns=partitions, **task_options).remote(shards, i, partitions))
             for i in range(shards.num_shards)]
    judged = [listed(_judge_blocks.options(num_returns=partitions, **task_options).remote(
        shards, partitions, *(refs[p] for refs in names))) for p in range(partitions)]
    return sum(ray.get([_link_pairs.options(**task_options).remote(shards, *(refs[p] for refs in judged))
                        for p in range(partitions)]))
