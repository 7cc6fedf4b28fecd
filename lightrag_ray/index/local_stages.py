"""Small runs in the driver: reading, chunking, extraction and summaries without Ray Data.

A Ray Data pipeline pays seconds of start-up per stage (read tasks, then an extraction
actor pool, then a summary pool), more than a handful of files takes to read and chunk.
A run whose input is at most ``ray.local_stages_max_mb`` therefore does these stages in
the indexing process with the very same stage classes (one LLM client holding the pool's
whole concurrency); the graph shards and the embedding actor are Ray actors as always.
Backends that load a model (``transformers``) or run ``ray.data.llm`` processors never
run here: their stages belong on the cluster's actors.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.index.documents import parse_file
from lightrag_ray.index.fast_stage import extraction_stage_class
from lightrag_ray.index.llm_stages import SummarizeItems
from lightrag_ray.storage.graph_router import GraphRouter

LOCAL_BACKENDS = ("openai", "none")  # HTTP or no LLM: nothing heavy lands in the driver

Row = dict[str, Any]


def runs_locally(settings: Settings, files: list[str]) -> bool:
    """Whether a run over ``files`` does its stages in this process (see the module doc)."""
    limit = settings.ray.local_stages_max_mb * 1024 * 1024
    if limit <= 0 or settings.llm.backend not in LOCAL_BACKENDS:
        return False
    total = 0
    for path in files:
        if "://" in path:  # a remote workspace's inbox: read by Ray Data
            return False
        total += os.path.getsize(path)
        if total > limit:
            return False
    return True


def read_documents(files: list[str], display_names: dict[str, str]) -> list[Row]:
    """Document rows of ``files`` (as the Ray Data read does: display names, error rows)."""
    rows: list[Row] = []
    for path in files:
        with open(path, "rb") as handle:
            data = handle.read()
        rows.extend(parse_file(path, data, display_names.get(path.rsplit("/", 1)[-1])))
    return rows


def chunk_documents(docs: Iterable[Row], chunk: Callable[[Row], list[Row]]) -> list[Row]:
    """The chunk rows of ``docs``, in document order."""
    return [row for doc in docs for row in chunk(doc)]


def local_settings(settings: Settings) -> dict[str, Any]:
    """Settings for stage objects in this process: one LLM client with the concurrency the
    extraction pool would have had in total."""
    total = settings.llm.max_concurrency * settings.extraction.actors
    return settings.model_copy(update={"llm": settings.llm.model_copy(update={"max_concurrency": total})}).model_dump()


def _columns(rows: list[Row]) -> dict[str, list[Any]]:
    return {key: [row[key] for row in rows] for key in rows[0]}


def _batches(stage: Callable[[dict[str, list[Any]]], Any], rows: list[Row], size: int) -> Iterator[list[Row]]:
    for start in range(0, len(rows), size):
        yield stage(_columns(rows[start : start + size])).to_dict("records")


def extract(settings: Settings, chunks: list[Row]) -> Iterator[list[Row]]:
    """Extraction rows of ``chunks``, batch by batch (one batch = the concurrency in flight)."""
    stage_settings = local_settings(settings)
    stage = extraction_stage_class(settings)(settings=stage_settings)
    yield from _batches(stage, chunks, stage_settings["llm"]["max_concurrency"])


def summarize(settings: Settings, items: list[Row]) -> list[Row]:
    """Summary rows (hash, summary, error) of ``items``."""
    stage_settings = local_settings(settings)
    stage = SummarizeItems(settings=stage_settings)
    return [row for rows in _batches(stage, items, stage_settings["llm"]["max_concurrency"]) for row in rows]


def summarize_changed(settings: Settings, router: GraphRouter) -> int:
    """Summarise, in this process, the changed items whose descriptions are over the limits
    (after a delete or a graph edit: the few items it touched), as an insert would; returns
    how many got a summary. With no LLM, or one that runs only on Ray workers (vllm,
    openai-batch), they stay unsummarised until an insert touches them."""
    if settings.llm.backend != "openai":  # the one LLM this process can call (see LOCAL_BACKENDS)
        return 0
    graph = settings.graph
    todo = router.pending_summaries(graph.summary_max_fragments, graph.summary_max_tokens)
    if not todo:
        return 0
    summaries = {row["hash"]: row["summary"] for row in summarize(settings, todo) if not row["error"]}
    router.add_summaries(summaries)
    return len(summaries)
