"""Stage ``summarise``: descriptions that grew past the limits get an LLM summary (map-reduce,
index.summaries), which every shard then caches.

What needs a summary comes from the shards: for a large run one task per shard reads its
pending items and splits them by fragments hash into partitions, and one task per partition
keeps one item per hash (the same one whatever the shards' order, so the same graph gives the
same prompts). The partitions become the input of the LLM stage; the driver holds their refs.
"""

from __future__ import annotations

import zlib
from contextlib import closing
from typing import Any

import pandas as pd
import ray

from lightrag_ray.config import Settings
from lightrag_ray.core.graph.contract import GraphOperations
from lightrag_ray.core.graph.routing import merge_pending_summaries
from lightrag_ray.index.summaries import summarize, summary_limits
from lightrag_ray.models.llm import LLMError
from lightrag_ray.metrics.client import metrics
from lightrag_ray.models.llm_clients import BatchCaller
from lightrag_ray.models.usage import LLMCall, TokenUsage
from lightrag_ray.storage.graph.handles import ShardHandles

Row = dict[str, Any]
PENDING_COLUMNS = ["kind", "name", "hash", "base", "fragments"]


class SummarizeItems:
    """Rows (kind, name, hash, base, fragments) -> rows (hash, summary, error and the calls' token
    usage, ``USAGE_COLUMNS``), a batch at once (one LLM client and event loop per actor; the client
    bounds requests in flight)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = Settings.model_validate(settings)
        metrics().configure(self.settings.metrics)  # a Ray Data worker's process
        self.llm = BatchCaller(self.settings.llm)

    def __call__(self, items: list[Row]) -> list[Row]:
        rows = self.llm.each(self._summarize, items)
        metrics().flush()  # a Ray Data worker may be killed after its last batch
        return rows

    def close(self) -> None:
        """Close the LLM client and its event loop (see ``BatchCaller``)."""
        self.llm.close()

    async def _summarize(self, item: Row) -> Row:
        call = LLMCall.of(self.settings, "summary")
        summary, error = "", ""
        try:
            summary = await summarize(
                self.llm.client, item["kind"], item["name"], list(item["fragments"]), str(item.get("base") or ""),
                call=call, **summary_limits(self.settings),
            )
        except LLMError as exc:
            error = str(exc)
        return {"hash": item["hash"], "summary": summary, "error": error, **call.usage.counts()}


class ApplySummaries:
    """Summary rows -> [count row (``summaries``, ``summaries_failed`` and the token usage,
    ``USAGE_COLUMNS``)]; the good ones go to every shard (a relation lives on two)."""

    def __init__(self, shards: GraphOperations) -> None:
        self.shards = shards

    def __call__(self, rows: list[Row]) -> list[Row]:
        good = {row["hash"]: row["summary"] for row in rows if not row["error"]}
        self.shards.add_summaries(good)
        usage = sum((TokenUsage.of_row(row) for row in rows), TokenUsage())
        return [{"summaries": len(good), "summaries_failed": len(rows) - len(good), **usage.counts()}]


def _partition(digest: str, partitions: int) -> int:
    return zlib.crc32(digest.encode()) % partitions


@ray.remote
def _pending_of_shard(shards: ShardHandles, shard: int, max_fragments: int, max_tokens: int,
                      partitions: int) -> tuple[list[Row], ...] | list[Row]:
    """One shard's pending items, split into ``partitions`` (one object each)."""
    items = shards.on_shard(shard, GraphOperations.pending_summaries, max_fragments, max_tokens)
    parts: list[list[Row]] = [[] for _ in range(partitions)]
    for item in items:
        parts[_partition(item["hash"], partitions)].append(item)
    return tuple(parts) if partitions > 1 else parts[0]


@ray.remote
def _one_per_hash(*per_shard: list[Row]) -> pd.DataFrame:
    """One partition's items from every shard, one per fragments hash."""
    items = merge_pending_summaries(dict(enumerate(per_shard)))
    return pd.DataFrame(items, columns=PENDING_COLUMNS)


def pending_partitions(shards: ShardHandles, settings: Settings, task_options: dict[str, Any]) -> list[Any]:
    """Refs of DataFrames (PENDING_COLUMNS) of the items to summarise, one per partition."""
    graph = settings.graph
    partitions = max(1, shards.num_shards)
    per_shard = [_pending_of_shard.options(num_returns=partitions, **task_options).remote(
        shards, i, graph.summary_max_fragments, graph.summary_max_tokens, partitions) for i in range(shards.num_shards)]
    per_shard = [refs if partitions > 1 else [refs] for refs in per_shard]
    return [_one_per_hash.options(**task_options).remote(*(refs[p] for refs in per_shard)) for p in range(partitions)]


class PartitionRows:
    """(partition) rows -> the items of those partitions (``pending_partitions``' refs, which the
    driver holds), so that the LLM stage's dataset starts from rows the driver put: Ray Data's
    ``from_pandas_refs`` asks a whole CPU per partition to read its metadata, which a small
    cluster busy with served workspaces may never have free (the run then waits forever)."""

    def __init__(self, partitions: list[Any]) -> None:
        self.partitions = partitions

    def __call__(self, rows: list[Row]) -> list[Row]:
        frames = ray.get([self.partitions[int(row["partition"])] for row in rows])
        return [item for frame in frames for item in frame.to_dict("records")]


def no_summaries() -> dict[str, int]:
    """The counts of ``ApplySummaries`` when nothing was summarised."""
    return {"summaries": 0, "summaries_failed": 0, **TokenUsage().counts()}


def summarise_in_process(settings: Settings, graph: GraphOperations) -> dict[str, int]:
    """Summarise the changed items over the limits with the LLM of this process (a small run,
    a delete, a graph edit); returns the counts of ``ApplySummaries``."""
    limits = settings.graph
    items = graph.pending_summaries(limits.summary_max_fragments, limits.summary_max_tokens)
    if not items:
        return no_summaries()
    with closing(SummarizeItems(settings.model_dump())) as stage:
        rows = stage(items)
    return ApplySummaries(graph)(rows)[0]


def summarise_changed(settings: Settings, graph: GraphOperations) -> int:
    """Summarise, in this process, the changed items over the limits after a delete or a graph
    edit (the few items it touched), as an insert would; returns how many got a summary. With
    no LLM, or one that runs only on Ray workers (vllm, openai-batch), they stay unsummarised
    until an insert touches them."""
    if settings.llm.backend != "openai":  # the one LLM this process can call
        return 0
    return summarise_in_process(settings, graph)["summaries"]
