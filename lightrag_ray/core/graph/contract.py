# mypy: disable-error-code="empty-body"
# (each operation below is declared by its signature and docstring; the transports run it)
"""The graph contract: every operation on the graph shards, declared once, typed (pure Python).

An operation is a method of ``GraphReads`` (the readers' operations) or ``GraphOperations``
(all of them), written with its signature and marked with how it travels:

- ``access``: ``READ`` (queries: the published graph, any replica, from any process),
  ``LIVE`` (the writer's reads of the live graph, one replica), ``CONSUME`` (the writer's
  reads that also reset what they return, on every replica, e.g. the change feed) or
  ``WRITE`` (every replica, remembered by the writer so a restarted shard can be replayed);
- ``plan``: which shards to ask and with which arguments, from the caller's arguments
  (``plan(num_shards, *args) -> {shard: shard_args}``);
- ``merge``: how their answers make the caller's result (``merge({shard: answer}, *args)``);
- ``run``: what a shard does with its arguments (``run(shard_graph, *shard_args)``), by
  default the method of the operation's name of the shard's published view (``READ``) or of
  the ShardGraph (the others, which work on its live graph).

A transport is a subclass with one ``run(op, *args)`` method; every operation is then its
method with the declared signature (``router.fetch(keys, pairs)`` calls ``router.run(fetch,
keys, pairs)``), so a type checker sees them all. The shard actor runs ``op.run_on``
(storage.graph.actor), the writer's router and ShardHandles plan, call every replica and merge
(storage.graph.writer, handles), the readers do the same with awaited calls
(``AwaitedGraph``: storage.graph.reader), and the in-memory fake of the tests calls
ShardGraphs directly. So an operation added here is at once callable from all of them
(core.transport: how a declared method becomes every transport's).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from enum import Enum
from typing import Any, Concatenate, ParamSpec, TypeVar

from lightrag_ray.core.alias_rules import NameRow
from lightrag_ray.core.graph import routing
from lightrag_ray.core.graph.routing import Pair
from lightrag_ray.core.graph.shard_graph import ShardGraph
from lightrag_ray.core.records import EntityRecord, RelationRecord
from lightrag_ray.core.tokenizer import count_tokens
from lightrag_ray.core.transport import Awaited, Remote


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
Items = dict[str, list[dict[str, Any]]]  # {"entities": [...], "relations": [...]}
P = ParamSpec("P")
R = TypeVar("R")


class Operation(Remote[P, R]):
    """One shard operation (see the module doc): a method of the contract classes whose
    signature is ``P -> R``; on a transport it is ``transport.run(op, *args)``."""

    def __init__(self, name: str, access: Access, plan: Plan = routing.every_shard, merge: Merge = routing.nothing,
                 run: Callable[..., Any] | None = None, doc: str = "") -> None:
        super().__init__(name, doc)
        self.access, self.plan, self.merge, self.run = access, plan, merge, run

    def __repr__(self) -> str:
        return f"Operation({self.name!r}, {self.access.name})"

    def shard_calls(self, num_shards: int, args: tuple[Any, ...]) -> dict[int, tuple[Any, ...]]:
        """Arguments per shard to ask."""
        return self.plan(num_shards, *args)

    def result(self, answers: dict[int, Any], args: tuple[Any, ...]) -> R:
        """The caller's result from the answers per shard."""
        return self.merge(answers, *args)

    def run_on(self, graph: ShardGraph, args: tuple[Any, ...]) -> Any:
        """Run on one shard's graph (in the shard actor, or in process)."""
        if self.run is not None:
            return self.run(graph, *args)
        return getattr(graph.published if self.access is READ else graph, self.name)(*args)


def operation_of(access: Access, plan: Plan = routing.every_shard, merge: Merge = routing.nothing,
                 run: Callable[..., Any] | None = None) -> Callable[[Callable[Concatenate[Any, P], R]], Operation[P, R]]:
    """Declare the method below as a shard operation (its name, signature and docstring)."""
    def declared(method: Callable[Concatenate[Any, P], R]) -> Operation[P, R]:
        return Operation(method.__name__, access, plan, merge, run, (method.__doc__ or "").strip())
    return declared


def _owned_changes(graph: ShardGraph, max_fragments: int, max_tokens: int) -> list[dict[str, Any]]:
    return graph.pending_summaries(max_fragments, max_tokens, count_tokens)


def _remove_chunks(graph: ShardGraph, chunk_ids: list[str]) -> None:
    graph.remove_chunks(set(chunk_ids))


class GraphReads(ABC):
    """The READ operations: what queries ask of the published graph. A transport subclasses it
    (or GraphOperations) and defines ``run(op, *args)``."""

    @abstractmethod
    def run(self, op: Operation[..., Any], *args: Any) -> Any:
        """Run ``op`` with the caller's arguments: plan, ask the shards, merge their answers."""

    @operation_of(READ, routing.plan_neighborhood, routing.merge_neighborhood)
    def neighborhood(self, keys: list[str], max_relations: int | None = None) -> Items:
        """(keys, max_relations=None) -> {entities, relations}: the entities ``keys`` (best first)
        and their incident relations, all or the best ``max_relations`` per shard in
        local_relation_order"""

    @operation_of(READ, routing.plan_fetch, routing.merge_fetch)
    def fetch(self, keys: list[str], pairs: list[Pair]) -> Items:
        """(keys, pairs) -> {entities, relations}: entities by key, relations by endpoint pair, in order"""

    @operation_of(READ, routing.plan_passage_entities, routing.rows_by_key)
    def passage_entities(self, chunk_ids: list[str], keys: list[str], max_chunks: int) -> list[dict[str, Any]]:
        """(chunk_ids, keys, max_chunks) -> rows (key, n_chunks, chunks, aliases) of the entities
        ``keys`` and of those the passages mention (one hop of a walk; hubs get no chunks)"""

    @operation_of(READ, merge=routing.sorted_union)
    def labels(self) -> list[str]:
        """() -> display names of all entities, sorted"""

    @operation_of(READ, merge=routing.merge_export)
    def export(self) -> Items:
        """() -> {entities, relations}: the whole graph, sorted by id"""

    @operation_of(READ, routing.first_shard, routing.only_answer, run=ShardGraph.read_version)
    def read_version(self) -> dict[str, Any]:
        """() -> {version, settled}: the published graph version, and whether every chunk vector
        is of it (else readers search those visible at it; one shard answers, a publish reaches
        all shards in one round)"""


class AwaitedGraph(GraphReads, Awaited):
    """A transport whose ``run`` is a coroutine: its operations are awaited (the readers)."""

    @abstractmethod
    async def run(self, op: Operation[..., Any], *args: Any) -> Any:
        """Run ``op`` with the caller's arguments, awaited."""


class GraphOperations(GraphReads):
    """Every operation: the readers' and the writer's (blocking transports)."""

    # ---- the writer's reads of the live graph --------------------------------------------
    @operation_of(LIVE, merge=routing.total)
    def counts(self) -> dict[str, int]:
        """() -> {entities, relations} in the whole graph"""

    @operation_of(LIVE, routing.plan_owned, routing.merge_mention_rows)
    def mention_rows(self, keys: list[str]) -> dict[str, list[Any]]:
        """(keys) -> {found, entities, relations}: what the chunks said about the entities
        ``keys`` and all their relations, as ``apply`` rows"""

    @operation_of(LIVE, merge=routing.merge_pending_summaries, run=_owned_changes)
    def pending_summaries(self, max_fragments: int, max_tokens: int) -> list[dict[str, Any]]:
        """(max_fragments, max_tokens) -> changed items whose description needs an LLM summary"""

    @operation_of(LIVE, merge=routing.total)
    def change_count(self) -> int:
        """() -> owned items in the change feed"""

    @operation_of(LIVE, merge=routing.concatenated_by_kind)
    def block_members(self, blocks: list[str], limit: int) -> dict[str, list[NameRow]]:
        """(blocks, limit) -> per alias block, its entities as (key, name, passages), at most
        ``limit + 1`` per shard"""

    # ---- the writer's reads that reset what they return, on every replica -------------------
    @operation_of(CONSUME, merge=routing.concatenated_by_kind)
    def take_changes(self, limit: int | None = None) -> dict[str, list[Any]]:
        """(limit=None) -> {entities, relations, removed}: what changed since the last call (the
        change feed), at most ``limit`` items per shard"""

    @operation_of(CONSUME, merge=routing.concatenated)
    def new_names(self) -> list[NameRow]:
        """() -> (key, name, passages) of the entities created since the last call (the alias pass)"""

    @operation_of(CONSUME)
    def publish(self) -> None:
        """() -> None: readers see everything the open write job wrote"""

    # ---- writes (every replica, replayed to a restarted shard) ---------------------------
    @operation_of(WRITE, routing.plan_apply)
    def apply(self, entities: list[EntityRecord], relations: list[RelationRecord]) -> None:
        """(entity records, relation records) -> None: merge extraction records (per item and
        chunk, what the chunk said replaces what it said before)"""

    @operation_of(WRITE, routing.as_lists, run=_remove_chunks)
    def remove_chunks(self, chunk_ids: list[str]) -> None:
        """(chunk_ids) -> None: drop what these chunks said; items left with nothing go"""

    @operation_of(WRITE, routing.as_lists)
    def drop(self, keys: list[str], pairs: list[Pair]) -> None:
        """(keys, pairs) -> None: remove entities with all their relations, and relations by pair"""

    @operation_of(WRITE, routing.every_shard_if_any)
    def add_summaries(self, summaries: dict[str, str]) -> None:
        """(summaries) -> None: summaries by fragments hash (relations live on two shards: all get them)"""

    @operation_of(WRITE)
    def relink_all(self) -> None:
        """() -> None: every entity counts as new for the next alias pass"""

    @operation_of(WRITE, routing.plan_aliases, routing.total)
    def set_aliases(self, verdicts: list[tuple[str, str, str | None]]) -> int:
        """(verdicts) -> link ends changed: link (reason) or unlink (None) pairs of entity keys"""

    @operation_of(WRITE)
    def settle(self) -> None:
        """() -> None: the vectors are of the published version (its old rows deleted)"""

    @operation_of(WRITE)
    def begin(self) -> None:
        """() -> None: open a write job; readers keep the published graph"""

    @operation_of(WRITE)
    def rollback(self) -> None:
        """() -> None: undo the open write job"""


def _declared() -> dict[str, Operation[..., Any]]:
    return {name: op for cls in (GraphReads, GraphOperations) for name, op in vars(cls).items()
            if isinstance(op, Operation)}


OPERATIONS: dict[str, Operation[..., Any]] = _declared()


def declare(*operations: Operation[..., Any]) -> None:
    """Add operations to the contract after the fact (tests that declare a throwaway one): a
    READ one becomes a method of GraphReads, any other of GraphOperations. A name declared twice
    is an error."""
    for op in operations:
        if op.name in OPERATIONS:
            raise ValueError(f"graph operation {op.name!r} is declared twice")
        OPERATIONS[op.name] = op
        setattr(GraphReads if op.access is READ else GraphOperations, op.name, op)


def withdraw(name: str) -> None:
    """Remove an operation added by ``declare``."""
    op = OPERATIONS.pop(name, None)
    if op is not None:
        delattr(GraphReads if op.access is READ else GraphOperations, name)


def operation(name: str) -> Operation[..., Any]:
    """The operation called ``name`` (a write log's replay); AttributeError when the contract has none."""
    try:
        return OPERATIONS[name]
    except KeyError:
        raise AttributeError(f"the graph has no operation {name!r}") from None


def run_in_process(op: Operation[..., Any], shards: list[ShardGraph], args: tuple[Any, ...]) -> Any:
    """Plan, run and merge ``op`` over ShardGraphs of this process (the tests' fake graph, and
    ShardGraphs loaded from files)."""
    calls = op.shard_calls(len(shards), args)
    return op.result({shard: op.run_on(shards[shard], shard_args) for shard, shard_args in calls.items()}, args)
