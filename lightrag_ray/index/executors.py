"""How a run executes its batch stages (index.stages), chosen once per run:

- ``InProcess``: a small run (at most ``ray.local_stages_max_mb`` of local input, an HTTP LLM
  or none) runs the stages in the indexing process, batch by batch: a Ray Data pool costs
  seconds to start, more than a few files take. Graph shards and embedding actors are Ray
  actors as always.
- ``RayDataPools``: Ray Data streams the rows between workers: read and chunk tasks, then
  chunk embedding tasks, an extraction actor pool and merge tasks that write into the shards.
- ``Processors``: as ``RayDataPools``, but the LLM extraction is a ``ray.data.llm`` processor
  (vLLM engines, or an OpenAI-compatible server via Ray's HTTP stage) pass per gleaning round
  (index.batch_llm); its rows are merged as they come.

Each executor offers the same three steps: ``chunk(files)`` (pass 1: documents into the run's
chunk table), ``extract()`` (pass 2: the run's chunks embedded, extracted and merged) and
``summarise()``; each yields or returns count rows only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Generator, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, Protocol

import pandas as pd
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import ray

from lightrag_ray.config import Settings
from lightrag_ray.core.errors import required
from lightrag_ray.index.batch_llm import ProcessorRuns
from lightrag_ray.index.stages.aliases import link_aliases, link_aliases_across
from lightrag_ray.index.stages.chunk import ChunkDocuments
from lightrag_ray.index.stages.commit import finish_documents
from lightrag_ray.index.stages.embed import ChunkStamp, EmbedChunks
from lightrag_ray.index.stages.extract import extraction_stage
from lightrag_ray.index.stages.merge import MergeIntoShards
from lightrag_ray.index.stages.read import ReadFiles, path_batches
from lightrag_ray.index.stages.summarise import (
    ApplySummaries, PartitionRows, SummarizeItems, no_summaries, pending_partitions, summarise_in_process)
from lightrag_ray.ray_runtime import actor_pool
from lightrag_ray.storage.extraction_cache import CacheIndex, extraction_fingerprint
from lightrag_ray.storage.graph.handles import ShardHandles
from lightrag_ray.storage.run_files import RunFiles
from lightrag_ray.storage.vector_owner import VectorSink

Row = dict[str, Any]
FILES_PER_BATCH = 16  # files read and chunked together in this process
# A Ray Data execution keeps statistics of every block it made until it ends (about 10 KiB of
# the driver's memory a block), so the driver's memory would grow with the corpus: the passes
# run as a series of executions ("waves") over at most this many input files or chunk parts.
WAVE_FILES = 4096
WAVE_PARTS = 256
LOCAL_BACKENDS = ("openai", "none")  # HTTP or no LLM: nothing heavy lands in the driver


def runs_locally(settings: Settings, files: list[Row]) -> bool:
    """Whether a run over ``files`` (file rows with their sizes) does its batch stages in this
    process: at most ``ray.local_stages_max_mb`` of local files, and an LLM reached over HTTP (or none)."""
    limit = settings.ray.local_stages_max_mb * 1024 * 1024
    if limit <= 0 or settings.llm.backend not in LOCAL_BACKENDS:
        return False
    if any("://" in row["path"] for row in files):  # remote files: read by Ray Data
        return False
    return sum(int(row["size"]) for row in files) <= limit


@dataclass
class RunParts:
    """What the stages of one run share: settings, the run's scratch tables, the shards, the
    embedding actors and where they store vectors, and the Ray options of the run's tasks."""

    settings: Settings
    run: RunFiles
    shards: ShardHandles | None  # set once the run opened its shards (graph)
    embed_workers: list[Any]
    sink: VectorSink | None  # set once the run opened its vector store (vector_sink)
    embed_batch: int
    task_args: dict[str, Any]  # num_cpus and runtime env of the run's tasks
    display_names: dict[str, str]
    cache_parts: list[str] = field(default_factory=list)  # the extraction cache's parts at the run's start
    display_kind: str = "text"  # the source kind of display-named files (index.stages.read.ReadFiles)
    relative_to: str | None = None  # a folder whose files are named by their path inside it (a scan)
    stamp: ChunkStamp = ChunkStamp()  # the graph version the run's chunk vectors are seen from

    @property
    def graph(self) -> ShardHandles:
        """The run's graph shards."""
        return required(self.shards, "the run's graph shards")

    @property
    def vector_sink(self) -> VectorSink:
        """Where the run's vectors go."""
        return required(self.sink, "the run's vector store")

    def reader(self) -> ReadFiles:
        """The read stage of this run."""
        return ReadFiles(self.display_names, self.display_kind, self.relative_to)

    @property
    def settings_dict(self) -> dict[str, Any]:
        return self.settings.model_dump()


class Executor(Protocol):
    """How a run maps its batch stages over rows (InProcess, RayDataPools, Processors)."""

    name: str

    def chunk(self, files: list[Row]) -> Iterator[Row]: ...
    def extract(self, chunks: int, embedded: Callable[[int], None]) -> Generator[Row, None, None]: ...
    def summarise(self) -> dict[str, int]: ...
    def link_aliases(self, everything: bool) -> int: ...
    def finish_documents(self, cancelled: str) -> dict[str, Any]: ...


def local_settings(settings: Settings) -> Settings:
    """Settings for stage objects in this process: one LLM client with the concurrency the
    extraction pool would have had in total."""
    total = settings.llm.max_concurrency * settings.extraction.actors
    return settings.model_copy(update={"llm": settings.llm.model_copy(update={"max_concurrency": total})})


class Batches:
    """A row stage (rows -> rows) as a Ray Data batch callable: the stage is built in the
    worker (an actor of a pool) from the constructor kwargs, batches come and go as pandas
    frames. Use ``pool_of(stage_class)``: its subclass carries the stage's name, which is
    what the Ray dashboard (and ``ray list actors``) shows for the pool's actors, e.g.
    ``MapWorker(MapBatches(ExtractChunks))``."""

    stage_class: type

    def __init__(self, **kwargs: Any) -> None:
        self.stage = self.stage_class(**kwargs)

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(self.stage(batch.to_dict("records")))


def pool_of(stage_class: type) -> type[Batches]:
    """The Ray Data callable class of an actor pool running ``stage_class``, named after it."""
    return type(stage_class.__name__, (Batches,), {"stage_class": stage_class, "__module__": __name__})


def batch_task(stage: Callable[[list[Row]], list[Row]]) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """A row stage object with little state (actor handles, paths) as a Ray Data task function."""
    def run(batch: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(stage(batch.to_dict("records")))

    return run


class InProcess:
    """Every stage in this process, batch by batch (see the module doc)."""

    name = "driver"

    def __init__(self, parts: RunParts) -> None:
        self.parts = parts
        self.settings = local_settings(parts.settings)

    def chunk(self, files: list[Row]) -> Iterator[Row]:
        read = self.parts.reader()
        chunker = ChunkDocuments(self.parts.settings_dict, self.parts.run)
        for batch in path_batches(files, FILES_PER_BATCH):
            yield from chunker(read(batch))

    def extract(self, chunks: int, embedded: Callable[[int], None]) -> Generator[Row, None, None]:
        """Merge counts per batch; chunk vectors are computed beside extraction (``embedded``
        hears of each stored batch; all are stored when the generator ends or is closed)."""
        parts = self.parts
        merge = MergeIntoShards(parts.graph, parts.run)
        embedding = ChunkVectors(parts, embedded)
        stage = extraction_stage(self.settings)(settings=self.settings.model_dump(), earlier_parts=parts.cache_parts,
                                                run=parts.run)
        try:
            with closing(stage) as extract:
                for batch in _run_chunks(parts.run, self.settings.llm.max_concurrency):
                    embedding.submit(batch)
                    yield from merge(extract(batch))
        finally:
            embedding.wait_all()

    def summarise(self) -> dict[str, int]:
        return summarise_in_process(self.settings, self.parts.graph)

    def link_aliases(self, everything: bool) -> int:
        """The alias pass over the run's shards, from this process."""
        return link_aliases(self.parts.graph, everything)

    def finish_documents(self, cancelled: str) -> dict[str, Any]:
        """The run's document statuses, from this process."""
        return finish_documents(self.parts.run, cancelled)


class ChunkVectors:
    """Chunk vectors computed beside extraction, from this process: batches go to the embedding
    actors (which store them), at most two per actor in flight; ``done`` hears of each."""

    def __init__(self, parts: RunParts, done: Callable[[int], None]) -> None:
        self.parts, self.done = parts, done
        self.refs: list[Any] = []
        self.limit = 2 * max(1, len(parts.embed_workers))
        self.turn = itertools.cycle(parts.embed_workers)

    def submit(self, chunks: list[Row]) -> None:
        size = self.parts.embed_batch
        for start in range(0, len(chunks), size):
            items = [self.parts.stamp.item(row) for row in chunks[start : start + size]]
            self.refs.append(next(self.turn).embed_and_store.remote(items, self.parts.vector_sink))
            while len(self.refs) > self.limit:
                self._collect(1)

    def _collect(self, count: int) -> None:
        ready, self.refs = ray.wait(self.refs, num_returns=count)
        for stored in ray.get(ready):
            self.done(stored)

    def wait_all(self) -> None:
        if self.refs:
            self._collect(len(self.refs))


def _dataset_of(rows: list[Row], rows_per_block: int = 1) -> ray.data.Dataset:
    """``rows`` as blocks put by this process: no task starts (Ray Data's file listing asks for
    a whole CPU, which a busy small cluster may never have free), and losing a worker node loses
    none of them. Rows are paths: what the driver holds is the run's plan."""
    return ray.data.from_items(rows, override_num_blocks=max(1, math.ceil(len(rows) / rows_per_block)))


class ReadParts:
    """(path) rows of the run's chunk parts -> their chunk rows."""

    def __init__(self, run: RunFiles) -> None:
        self.run = run

    def __call__(self, rows: list[Row]) -> list[Row]:
        fs = self.run.workspace.fs
        chunks = []
        for row in rows:
            with fs.open_input_file(row["path"]) as src:
                chunks += pq.read_table(src).to_pylist()
        return chunks


def _run_chunks(run: RunFiles, batch_rows: int) -> Iterator[list[Row]]:
    """The run's chunk rows, ``batch_rows`` at a time, read from its chunk table."""
    parts = run.parts("chunks")
    if not parts:
        return
    for batch in pads.dataset(parts, filesystem=run.workspace.fs, format="parquet").to_batches(batch_size=batch_rows):
        yield batch.to_pylist()


class RayDataPools:
    """Ray Data streams (see the module doc)."""

    name = "ray-data"

    def __init__(self, parts: RunParts) -> None:
        self.parts = parts

    def _read_chunks(self, paths: list[str]) -> ray.data.Dataset:
        """The chunk rows of the part files ``paths``, one block per part (a few LLM batches
        each, so every extraction actor gets work), their vectors stored as they pass."""
        parts = self.parts
        ds = _dataset_of([{"path": path} for path in paths])
        ds = ds.map_batches(batch_task(ReadParts(parts.run)), batch_format="pandas", **parts.task_args)
        embed = EmbedChunksThrough(parts.embed_workers, parts.vector_sink, parts.embed_batch, parts.stamp)
        return ds.map_batches(batch_task(embed), batch_format="pandas", **parts.task_args)

    def chunk(self, files: list[Row]) -> Iterator[Row]:
        parts = self.parts
        for wave in _waves(files, WAVE_FILES):
            ds = _dataset_of(wave, FILES_PER_BATCH)
            ds = ds.map_batches(batch_task(parts.reader()), batch_format="pandas", **parts.task_args)
            ds = ds.map_batches(pool_of(ChunkDocuments),
                                fn_constructor_kwargs={"settings": parts.settings_dict, "run": parts.run},
                                batch_format="pandas", **actor_pool(1, parts.task_args["num_cpus"]),
                                **_runtime(parts.task_args))
            yield from ds.iter_rows()

    def extract(self, chunks: int, embedded: Callable[[int], None]) -> Generator[Row, None, None]:
        parts, ex, llm = self.parts, self.parts.settings.extraction, self.parts.settings.llm
        for wave in _waves(parts.run.parts("chunks"), WAVE_PARTS):
            ds = self._read_chunks(wave).map_batches(
                pool_of(extraction_stage(parts.settings)),
                fn_constructor_kwargs={"settings": parts.settings_dict, "earlier_parts": parts.cache_parts, "run": parts.run},
                batch_size=llm.max_concurrency, batch_format="pandas",
                **actor_pool(ex.actors, ex.num_cpus, ex.num_gpus), **_runtime(parts.task_args))
            ds = ds.map_batches(batch_task(MergeIntoShards(parts.graph, parts.run)), batch_format="pandas",
                                **parts.task_args)
            for row in ds.iter_rows():
                embedded(int(row["chunks_merged"]))  # a chunk's vector is stored before it is extracted
                yield row

    def summarise(self) -> dict[str, int]:
        parts, ex = self.parts, self.parts.settings.extraction
        totals = no_summaries()
        if parts.settings.llm.backend == "none":
            return totals
        refs = pending_partitions(parts.graph, parts.settings, parts.task_args)
        ds = _dataset_of([{"partition": number} for number in range(len(refs))])
        ds = ds.map_batches(batch_task(PartitionRows(refs)), batch_format="pandas", **parts.task_args)
        ds = ds.map_batches(
            pool_of(SummarizeItems), fn_constructor_kwargs={"settings": parts.settings_dict},
            batch_size=parts.settings.llm.max_concurrency, batch_format="pandas",
            **actor_pool(ex.actors, ex.num_cpus, ex.num_gpus), **_runtime(parts.task_args))
        ds = ds.map_batches(batch_task(ApplySummaries(parts.graph)), batch_format="pandas", **parts.task_args)
        for row in ds.iter_rows():
            for key in totals:
                totals[key] += int(row[key])
        return totals

    def link_aliases(self, everything: bool) -> int:
        """The alias pass as Ray tasks reading the shards (one per shard, then per partition)."""
        return link_aliases_across(self.parts.graph, self.parts.task_args, everything)

    def finish_documents(self, cancelled: str) -> dict[str, Any]:
        """The run's document statuses, in a Ray task (it reads every document and outcome of the run)."""
        return ray.get(_finish_documents.options(**self.parts.task_args).remote(self.parts.run, cancelled))


class Processors(RayDataPools):
    """Ray Data for reading and chunking, the LLM as ``ray.data.llm`` processor passes (see the
    module doc). The driver keeps the rows of each pass (index.batch_llm), so that a pass that
    dies fails exactly the chunks it had not returned."""

    def __init__(self, parts: RunParts) -> None:
        super().__init__(parts)
        self.runs = ProcessorRuns(parts.settings, parts.run.workspace, parts.task_args)

    def extract(self, chunks: int, embedded: Callable[[int], None]) -> Generator[Row, None, None]:
        parts = self.parts
        rows = [row for batch in _run_chunks(parts.run, 1024) for row in batch]
        embedding = ChunkVectors(parts, embedded)
        embedding.submit(rows)
        merge = MergeIntoShards(parts.graph, parts.run)
        try:
            cached = CacheIndex(parts.run.workspace, extraction_fingerprint(parts.settings)).lookup(rows)
            if cached:
                yield from merge([{**row, "error": "", "cached": True} for row in cached.values()])
            new = [row for row in rows if row["chunk_id"] not in cached]
            for out in self.runs.extract(new) if new else ():
                yield from merge([{**row, "cached": False} for row in out])
        finally:
            embedding.wait_all()

    def summarise(self) -> dict[str, int]:
        graph = self.parts.settings.graph
        todo = self.parts.graph.pending_summaries(graph.summary_max_fragments, graph.summary_max_tokens)
        if not todo:
            return no_summaries()
        return ApplySummaries(self.parts.graph)(self.runs.summarize(todo))[0]


class EmbedChunksThrough(EmbedChunks):
    """EmbedChunks that passes its chunk rows on (to the extraction stage)."""

    def __call__(self, chunks: list[Row]) -> list[Row]:
        super().__call__(chunks)
        return chunks


def _waves(items: list[Any], size: int) -> Iterator[list[Any]]:
    """``items`` in consecutive slices of at most ``size`` (one Ray Data execution each)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _runtime(task_args: dict[str, Any]) -> dict[str, Any]:
    """The run's Ray options other than ``num_cpus`` (an actor pool sets its own)."""
    return {k: v for k, v in task_args.items() if k != "num_cpus"}


_finish_documents = ray.remote(finish_documents)


def choose_executor(parts: RunParts, local: bool) -> Executor:
    """The run's executor: processors for the ray.data.llm backends in LLM mode, else this
    process for a small run (``local``), else Ray Data pools."""
    from lightrag_ray.models.llm_processor import uses_processor

    if uses_processor(parts.settings.llm) and parts.settings.extraction.mode == "llm":
        return Processors(parts)
    return InProcess(parts) if local else RayDataPools(parts)
