"""Graph reads for queries, straight from the shard actors (any process, any node).

The writer (GraphRouter) owns the shard actors; readers find them by name, spread their
calls over a shard's replicas and await them on the event loop, so a query never passes
through the writer nor waits for it. A shard that is down (Ray restarts it from its
snapshot) is waited for at most ``timeout_s``, then the read fails with
GraphUnavailableError, which the HTTP layer turns into a 503.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import ray

from lightrag_ray.config import Settings
from lightrag_ray.core.graph.contract import READ, AwaitedGraph, Operation
from lightrag_ray.storage.graph.actor import shard_actor_name

RETRY_DELAY_S = 0.2


class GraphUnavailableError(RuntimeError):
    """A graph shard did not answer in time (restarting, or not started yet)."""


class ShardReader(AwaitedGraph):
    """The READ operations of the graph contract (core.graph.contract), awaited, over the shard
    actors of one workspace: ``await reader.fetch(keys, pairs)``."""

    def __init__(self, workspace_uri: str, num_shards: int, replicas: int = 1, namespace: str | None = None,
                 timeout_s: float = 10.0) -> None:
        self.workspace_uri = workspace_uri
        self.num_shards = num_shards
        self.replicas = replicas
        self.namespace = namespace
        self.timeout_s = timeout_s
        self._handles: dict[tuple[int, int], Any] = {}
        self._turn = itertools.count()

    @classmethod
    def for_settings(cls, settings: Settings) -> "ShardReader":
        """The reader of ``settings.workspace``'s shards (``graph.num_shards``: the workspace's count)."""
        graph = settings.graph
        if graph.num_shards == "auto":
            raise ValueError("a reader needs the workspace's shard count, not 'auto': open it with service.opening")
        return cls(settings.workspace, graph.num_shards, graph.replicas, settings.ray.namespace, graph.read_timeout_s)

    def _handle(self, shard: int, replica: int) -> Any:
        key = (shard, replica)
        if key not in self._handles:
            name = shard_actor_name(self.workspace_uri, shard, self.num_shards, replica)
            self._handles[key] = ray.get_actor(name, namespace=self.namespace)
        return self._handles[key]

    async def run(self, op: Operation[..., Any], *args: Any) -> Any:
        """One READ operation: its shards asked in one parallel round, their answers merged."""
        if op.access is not READ:
            raise AttributeError(f"graph operation {op.name!r} is the writer's ({op.access.value}); readers only read")
        calls = op.shard_calls(self.num_shards, args)
        shards = sorted(calls)
        answers = await asyncio.gather(*(self._ask(i, op, calls[i]) for i in shards))
        return op.result(dict(zip(shards, answers)), args)

    async def _ask(self, shard: int, op: Operation[..., Any], args: tuple[Any, ...]) -> Any:
        """One shard's answer, from the next replica in turn; retried on other replicas
        (or the same, restarted) until the deadline."""
        deadline = time.monotonic() + self.timeout_s
        first = next(self._turn)
        last_error: BaseException | None = None
        for attempt in itertools.count():
            replica = (first + attempt) % self.replicas
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                handle = self._handle(shard, replica)
                _, result = await asyncio.wait_for(handle.call.remote(op, args), left)
                return result
            except ValueError as exc:  # no actor by that name (yet)
                last_error = exc
            except (asyncio.TimeoutError, ray.exceptions.RayActorError) as exc:  # dead, restarting, unreachable
                last_error = exc
                self._handles.pop((shard, replica), None)
            if (attempt + 1) % self.replicas == 0:  # every replica tried: give a restart time
                await asyncio.sleep(min(RETRY_DELAY_S, max(0.0, deadline - time.monotonic())))
        raise GraphUnavailableError(
            f"graph shard {shard} did not answer within {self.timeout_s:g} s ({type(last_error).__name__}); "
            "it may be restarting, try again shortly"
        )
