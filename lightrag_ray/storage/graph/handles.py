"""The shard actors of a workspace as one picklable object: any process (the writer, an
extraction worker, a task that embeds a shard's changes) runs graph-contract operations through
it, blocking, in one parallel round per operation."""

from __future__ import annotations

from typing import Any

import ray

from lightrag_ray.core.graph.contract import GraphOperations, Operation


class ShardHandles(GraphOperations):
    """Every graph-contract operation, blocking, over ``shards[i][j]`` (replica j of shard i).
    Writes reach every replica (each logs them, so a restarted one recovers them by itself:
    storage.graph.wal), reads ask the first."""

    def __init__(self, shards: list[list[Any]]) -> None:
        self.shards = shards
        self.num_shards = len(shards)
        self.replicas = len(shards[0]) if shards else 1

    def run(self, op: Operation[..., Any], *args: Any) -> Any:
        """One contract operation: its shards asked in parallel, their answers merged."""
        calls = op.shard_calls(self.num_shards, args)
        answers = self.every({i: ("call", (op, shard_args)) for i, shard_args in calls.items()},
                             every_replica=op.access.every_replica)
        return op.result(answers, args)

    def on_shard(self, shard: int, op: Operation[..., Any], *args: Any) -> Any:
        """One contract operation on one shard only (every replica for writes), its answer as is."""
        return self.every({shard: ("call", (op, args))}, every_replica=op.access.every_replica)[shard]

    def every(self, calls: dict[int, tuple[str, tuple[Any, ...]]], every_replica: bool = False) -> dict[int, Any]:
        """Actor method ``name(*args)`` per shard, in parallel, on every replica or on the first;
        the answer per shard is its first replica's."""
        targets = range(self.replicas) if every_replica else range(1)
        refs = {(i, j): getattr(self.shards[i][j], method).remote(*args)
                for i, (method, args) in calls.items() for j in targets}
        answers = dict(zip(refs, ray.get(list(refs.values()))))
        return {i: result for (i, j), (_, result) in answers.items() if j == 0}
