"""The graph contract: every operation on the graph shards, declared once (pure Python).

An operation says who may call it and how it travels:

- ``access``: ``READ`` (queries: the published graph, any replica, from any process),
  ``LIVE`` (the writer's reads of the live graph, one replica), ``CONSUME`` (the writer's
  reads that also reset what they return, on every replica, e.g. the change feed) or
  ``WRITE`` (every replica, remembered by the writer so a restarted shard can be replayed);
- ``plan``: which shards to ask and with which arguments, from the caller's arguments
  (``plan(num_shards, *args) -> {shard: shard_args}``);
- ``merge``: how their answers make the caller's result (``merge({shard: answer}, *args)``);
- ``run``: what a shard does with its arguments (``run(shard_graph, *shard_args)``), by
  default the ShardGraph method of the operation's name.

The transports derive every operation from this table instead of declaring it again: the
shard actor runs ``op.run`` (storage.graph.actor), the writer's router plans, calls every
replica and merges (storage.graph.writer), the readers do the same with awaited calls
(storage.graph.reader), and the in-memory fake of the tests calls ShardGraphs directly.
So an operation added here is at once callable from all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from lightrag_ray.core.graph import routing
from lightrag_ray.core.graph.shard_graph import ShardGraph
from lightrag_ray.core.tokenizer import count_tokens


class Access(Enum):
    """Who may call an operation and how many replicas it reaches."""

    READ = "read"  # readers and the writer; the published graph; one replica
    LIVE = "live"  # the writer; the live graph; one replica
    CONSUME = "consume"  # the writer; every replica resets what it answered (not replayed)
    WRITE = "write"  # the writer; every replica; replayed to a restarted shard

    @property
    def every_replica(self) -> bool:
        return self in (Access.CONSUME, Access.WRITE)

    @property
    def replayed(self) -> bool:
        return self is Access.WRITE


READ, LIVE, CONSUME, WRITE = Access.READ, Access.LIVE, Access.CONSUME, Access.WRITE
Plan = Callable[..., dict[int, tuple[Any, ...]]]
Merge = Callable[..., Any]


@dataclass(frozen=True)
class Operation:
    """One shard operation (see the module doc)."""

    name: str
    access: Access
    plan: Plan = routing.every_shard
    merge: Merge = routing.nothing
    run: Callable[..., Any] | None = None
    doc: str = ""

    def shard_calls(self, num_shards: int, args: tuple[Any, ...]) -> dict[int, tuple[Any, ...]]:
        """Arguments per shard to ask."""
        return self.plan(num_shards, *args)

    def result(self, answers: dict[int, Any], args: tuple[Any, ...]) -> Any:
        """The caller's result from the answers per shard."""
        return self.merge(answers, *args)

    def run_on(self, graph: ShardGraph, args: tuple[Any, ...]) -> Any:
        """Run on one shard's graph (in the shard actor, or in process)."""
        if self.run is not None:
            return self.run(graph, *args)
        return getattr(graph, self.name)(*args)


OPERATIONS: dict[str, Operation] = {}


def declare(*operations: Operation) -> None:
    """Add operations to the contract (a name declared twice is an error)."""
    for op in operations:
        if op.name in OPERATIONS:
            raise ValueError(f"graph operation {op.name!r} is declared twice")
        OPERATIONS[op.name] = op


def withdraw(name: str) -> None:
    """Remove an operation (tests that declare a throwaway one)."""
    OPERATIONS.pop(name, None)


def operation(name: str) -> Operation:
    """The operation called ``name``; AttributeError when the contract has none, so that the
    transports' attribute lookup fails as for any missing method."""
    try:
        return OPERATIONS[name]
    except KeyError:
        raise AttributeError(f"the graph has no operation {name!r}") from None


def run_in_process(op: Operation, shards: list[ShardGraph], args: tuple[Any, ...]) -> Any:
    """Plan, run and merge ``op`` over ShardGraphs of this process (the tests' fake graph, and
    ShardGraphs loaded from files)."""
    calls = op.shard_calls(len(shards), args)
    return op.result({shard: op.run_on(shards[shard], shard_args) for shard, shard_args in calls.items()}, args)


declare(
    # ---- reads of the published graph (queries) ---------------------------------------
    Operation("neighborhood", READ, routing.plan_neighborhood, routing.merge_neighborhood,
              doc="(keys, max_relations=None) -> {entities, relations}: the entities ``keys`` (best first) and "
                  "their incident relations, all or the best ``max_relations`` per shard in local_relation_order"),
    Operation("fetch", READ, routing.plan_fetch, routing.merge_fetch,
              doc="(keys, pairs) -> {entities, relations}: entities by key, relations by endpoint pair, in order"),
    Operation("passage_entities", READ, routing.plan_passage_entities, routing.rows_by_key,
              doc="(chunk_ids, keys, max_chunks) -> rows (key, n_chunks, chunks, aliases) of the entities "
                  "``keys`` and of those the passages mention (one hop of a walk; hubs get no chunks)"),
    Operation("labels", READ, merge=routing.sorted_union, doc="() -> display names of all entities, sorted"),
    Operation("export", READ, merge=routing.merge_export,
              doc="() -> {entities, relations}: the whole graph, sorted by id"),
    Operation("read_version", READ, routing.first_shard, routing.only_answer,
              doc="() -> {version, settled}: the published graph version, and whether every chunk vector "
                  "is of it (else readers search those visible at it; one shard answers, a publish reaches "
                  "all shards in one round)"),
    # ---- the writer's reads of the live graph --------------------------------------------
    Operation("counts", LIVE, merge=routing.total, doc="() -> {entities, relations} in the whole graph"),
    Operation("mention_rows", LIVE, routing.plan_owned, routing.merge_mention_rows,
              doc="(keys) -> {found, entities, relations}: what the chunks said about the entities ``keys`` "
                  "and all their relations, as ``apply`` rows"),
    Operation("pending_summaries", LIVE, merge=routing.merge_pending_summaries,
              run=lambda graph, max_fragments, max_tokens: graph.pending_summaries(max_fragments, max_tokens, count_tokens),
              doc="(max_fragments, max_tokens) -> changed items whose description needs an LLM summary"),
    Operation("change_count", LIVE, merge=routing.total, doc="() -> owned items in the change feed"),
    Operation("block_members", LIVE, merge=routing.concatenated_by_kind,
              doc="(blocks, limit) -> per alias block, its entities as (key, name, passages), at most "
                  "``limit + 1`` per shard"),
    # ---- the writer's reads that reset what they return, on every replica -------------------
    Operation("take_changes", CONSUME, merge=routing.concatenated_by_kind,
              doc="(limit=None) -> {entities, relations, removed}: what changed since the last call (the change "
                  "feed), at most ``limit`` items per shard"),
    Operation("new_names", CONSUME, merge=routing.concatenated,
              doc="() -> (key, name, passages) of the entities created since the last call (the alias pass)"),
    Operation("publish", CONSUME, doc="() -> None: readers see everything the open write job wrote"),
    # ---- writes (every replica, replayed to a restarted shard) ---------------------------
    Operation("apply", WRITE, routing.plan_apply,
              doc="(entity records, relation records) -> None: merge extraction records (per item and "
                  "chunk, what the chunk said replaces what it said before)"),
    Operation("remove_chunks", WRITE, routing.as_lists, run=lambda graph, chunk_ids: graph.remove_chunks(set(chunk_ids)),
              doc="(chunk_ids) -> None: drop what these chunks said; items left with nothing go"),
    Operation("drop", WRITE, routing.as_lists,
              doc="(keys, pairs) -> None: remove entities with all their relations, and relations by pair"),
    Operation("add_summaries", WRITE, routing.every_shard_if_any,
              doc="(summaries) -> None: summaries by fragments hash (relations live on two shards: all get them)"),
    Operation("relink_all", WRITE, doc="() -> None: every entity counts as new for the next alias pass"),
    Operation("set_aliases", WRITE, routing.plan_aliases, routing.total,
              doc="(verdicts) -> link ends changed: link (reason) or unlink (None) pairs of entity keys"),
    Operation("settle", WRITE, doc="() -> None: the vectors are of the published version (its old rows deleted)"),
    Operation("begin", WRITE, doc="() -> None: open a write job; readers keep the published graph"),
    Operation("rollback", WRITE, doc="() -> None: undo the open write job"),
)
