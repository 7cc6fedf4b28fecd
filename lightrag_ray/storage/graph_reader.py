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
from lightrag_ray.storage.graph_calls import (
    merge_fetch,
    merge_neighborhood,
    merge_passage_entities,
    plan_fetch,
    plan_neighborhood,
    plan_passage_entities,
    shard_actor_name,
)

RETRY_DELAY_S = 0.2


class GraphUnavailableError(RuntimeError):
    """A graph shard did not answer in time (restarting, or not started yet)."""


class ShardReader:
    """Async ``neighborhood`` and ``fetch`` over the shard actors of one workspace."""

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
    def for_settings(cls, settings: Settings, num_shards: int) -> "ShardReader":
        """The reader of ``settings.workspace``'s ``num_shards`` shards (the manifest's count)."""
        graph = settings.graph
        return cls(settings.workspace, num_shards, graph.replicas, settings.ray.namespace, graph.read_timeout_s)

    def _handle(self, shard: int, replica: int) -> Any:
        key = (shard, replica)
        if key not in self._handles:
            name = shard_actor_name(self.workspace_uri, shard, self.num_shards, replica)
            self._handles[key] = ray.get_actor(name, namespace=self.namespace)
        return self._handles[key]

    async def _ask(self, shard: int, method: str, args: tuple[Any, ...]) -> Any:
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
                _, result = await asyncio.wait_for(getattr(handle, method).remote(*args), left)
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

    async def _round(self, method: str, plan: dict[int, tuple[Any, ...]]) -> dict[int, Any]:
        shards = sorted(plan)
        answers = await asyncio.gather(*(self._ask(i, method, plan[i]) for i in shards))
        return dict(zip(shards, answers))

    async def neighborhood(self, keys: list[str], max_relations: int | None = None) -> dict[str, list[dict[str, Any]]]:
        """The entities ``keys`` and their best ``max_relations`` incident relations per
        shard (all when None), in one parallel round."""
        if not keys:
            return {"entities": [], "relations": []}
        plan = plan_neighborhood(keys, self.num_shards, max_relations)
        return merge_neighborhood(await self._round("neighborhood", plan))

    async def passage_entities(self, chunk_ids: list[str], keys: list[str], max_chunks: int) -> list[dict[str, Any]]:
        """The entities ``keys`` and those the passages ``chunk_ids`` mention, with their
        passages (none for hubs past ``max_chunks``), in one parallel round."""
        plan = plan_passage_entities(chunk_ids, keys, self.num_shards, max_chunks)
        return merge_passage_entities(await self._round("passage_entities", plan)) if plan else []

    async def fetch(self, keys: list[str], pairs: list[tuple[str, str]]) -> dict[str, list[dict[str, Any]]]:
        """Entities by key and relations by endpoint pair, in the order asked, in one round."""
        plan = plan_fetch(keys, pairs, self.num_shards)
        return merge_fetch(await self._round("fetch", plan), keys, pairs)
