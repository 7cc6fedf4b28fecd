"""The indexing run: files -> chunks -> extraction -> sharded graph -> Milvus, as a list of
stages (``IndexRun.stages``, index.run_stage.Stage) run in one loop that opens what each needs,
times it and checks the stop; the batch stages (index.stages) run on one executor chosen per
run (index.executors).

The driver plans and counts; rows travel between workers. Pass 1 reads and chunks the
documents into the run's chunk table; pass 2 streams those chunks through embedding,
extraction and the merge into the graph shards; the shards' changes are then summarised,
embedded and alias-linked by tasks that read the shards directly, and the run commits. Every
step is idempotent and keyed by content, so a run that died is simply run again: processed
documents are skipped and extracted chunks come from the cache (``extractions/``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

from lightrag_ray.core.errors import required
from lightrag_ray.core.sources import TEXT
from lightrag_ray.index import executors
from lightrag_ray.index.documents import list_input_files
from lightrag_ray.index.embedding_pool import EmbeddingPool
from lightrag_ray.index.progress import Progress, StageProgress, print_progress
from lightrag_ray.index.run_metrics import RunMetrics
from lightrag_ray.index.run_stage import Resource, Stage
from lightrag_ray.index.stages.commit import commit_graph
from lightrag_ray.index.stages.embed import ChunkStamp, embed_graph_changes
from lightrag_ray.index.stages.read import ReadFiles
from lightrag_ray.index.target import RunTarget
from lightrag_ray.index.sync import SourceSync
from lightrag_ray.metrics.client import metrics
from lightrag_ray.models.llm_processor import require_vllm
from lightrag_ray.models.usage import TokenUsage, model_price
from lightrag_ray.ray_runtime import ensure_ray, niceness_options
from lightrag_ray.storage import extraction_cache, sources
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph.writer import GraphRouter, WriteJob
from lightrag_ray.storage.run_files import RunFiles, new_run_id, remove_stale_runs, stale_chunk_parts
from lightrag_ray.storage.vector_owner import VectorSink
from lightrag_ray.storage.vectors import add_text_search, delete_graph_vectors, is_server_uri, retire_vectors

CANCELLED = "cancelled on request"
# Vectors past which a run on Milvus Lite spends about as long indexing them alone (at close)
# as embedding them, and more the larger it is (docs/configuration.md): say so.
LITE_ADVICE_VECTORS = 50_000
RUN_CHUNK_IDS = pa.schema([("chunk_id", pa.string()), ("doc_id", pa.string())])  # read from the run's chunk parts


class IndexCancelled(RuntimeError):
    """The run was stopped through its ``stop`` event; its documents are marked failed."""


@dataclass
class IndexReport:
    """What one indexing run did."""

    files: int = 0
    docs_new: int = 0
    docs_skipped: int = 0
    docs_failed: int = 0
    chunks: int = 0
    chunks_cached: int = 0
    chunks_extracted: int = 0
    chunks_failed: int = 0
    llm_requests: int = 0
    # Tokens of the run's LLM calls (extraction, gleaning, summaries) as the server reported them;
    # llm_unmetered_requests: calls it reported none for (the totals are then unknown)
    llm_prompt_tokens: int = 0
    llm_completion_tokens: int = 0
    llm_unmetered_requests: int = 0
    llm_cost: float | None = None  # estimated from metrics.prices; None without a price or when unknown
    records_dropped: int = 0
    summaries: int = 0
    alias_links: int = 0  # alias link ends made or removed by the alias pass (index.stages.aliases)
    vectors_upserted: int = 0
    docs_removed: int = 0  # documents no source names any more (deleted or pruned files, replaced versions)
    sources_added: int = 0  # the sync (index.sync): files or records new to the workspace
    sources_replaced: int = 0  # ... whose content changed (their old version replaced)
    sources_moved: int = 0  # ... whose content turned up under another name (re-pointed, no extraction)
    sources_removed: int = 0  # ... gone from the given paths and pruned
    sources_unchanged: int = 0  # ... not read (same size and modification time) or read and the same
    changes: dict[str, list[str]] = field(default_factory=dict)  # the first sources of each outcome
    entities: int = 0
    relations: int = 0
    graph_version: int = 0
    seconds: float = 0.0
    stages: str = ""  # where the batch stages ran: "driver" (a small run) or "ray-data"
    stage_seconds: dict[str, float] = field(default_factory=dict)  # wall time of each step of the run
    errors: list[dict[str, str]] = field(default_factory=list)  # the first of them (index.stages.commit)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def usage(self) -> TokenUsage:
        """The token usage of the run's LLM calls."""
        return TokenUsage.of_row(vars(self))

    def add(self, counts: dict[str, Any]) -> None:
        """Add a count row's numbers to the fields of the same name."""
        for key, value in counts.items():
            if key in self.__dataclass_fields__ and isinstance(value, (int, float)) and not isinstance(value, bool):
                setattr(self, key, getattr(self, key) + value)


class IndexRun:
    """One run of the pipeline over a set of input paths."""

    def __init__(
        self, target: RunTarget, progress: Progress | None = print_progress,
        display_names: dict[str, str] | None = None, niceness: int | None = None, stop: threading.Event | None = None,
        embedding_pool: EmbeddingPool | None = None, prune: bool = False, display_kind: str = TEXT,
        relative_to: str | None = None,
    ) -> None:
        """``target``: the workspace as its caller opened it (index.target); the run opens its
        shards and vector sink through it when a stage first needs them, and closes neither;
        ``embedding_pool``: an open pool (model loaded) that the run leases and leaves open
        (None: the run starts its own and closes it);
        ``display_names``: file name -> name to record instead of the file's path, as inserted
        text (``display_kind`` TEXT) or an upload that replaces the upload of that name (UPLOAD);
        ``relative_to``: a folder whose files are named by their path inside it (the Serve app's scan);
        ``niceness``: the niceness of this job's Ray workers (a background job on nodes that
        also answer queries; None: Ray's default; see ``niceness_options``); ``stop``: once set,
        the run stops after the current extraction batch (IndexCancelled); ``prune``: documents whose
        file lies under the given paths and is gone are removed (index.sync)."""
        settings = target.settings
        require_vllm(settings.llm)  # before any work: one clear line when vLLM is missing
        self.settings = settings
        self.target = target
        self.embedding_pool = embedding_pool
        self.display_names = display_names or {}
        self.niceness = niceness
        self.stop = stop
        self.prune = prune
        self.display_kind = display_kind
        self.relative_to = relative_to
        self.say = progress or (lambda _message: None)
        self.report = IndexReport()
        metrics().configure(settings.metrics)
        self.metrics = RunMetrics(settings.workspace)
        self.workspace = target.workspace
        self.manifest = target.read_manifest()
        self.task_args = {"num_cpus": settings.ray.task_cpus, **niceness_options(niceness)}
        self.paths: list[str] = []
        self.sync: SourceSync | None = None
        self.parts: executors.RunParts | None = None
        self.executor: executors.Executor | None = None
        self.graph: GraphRouter | None = None  # the target's, once a stage needs it
        self.pool: EmbeddingPool | None = None
        self.job: WriteJob | None = None  # the write job of a kept target's graph
        self._resources: contextlib.ExitStack | None = None
        self._job_scope: contextlib.ExitStack | None = None

    # ---- the run --------------------------------------------------------------------
    def stages(self) -> list[Stage]:
        """The run, in order (see the module doc)."""
        building, llm = self._builds_graph, lambda: self._builds_graph() and self.settings.llm.backend != "none"
        writer: tuple[Resource, ...] = ("embedding", "graph", "vectors", "job")
        return [
            Stage("list sources", self._list_sources, reads=("paths", "sources"), writes=("sync",)),
            Stage("read and chunk", self._read_and_chunk, ("ray",), when=self._has_work,
                  reads=("files", "documents"), writes=("run chunks", "run documents")),
            Stage("plan sync", self._plan, when=self._has_work, reads=("sync", "run chunks", "chunks"),
                  writes=("run chunks", "run documents")),
            Stage("nothing new", self._nothing_new, when=lambda: not self._builds_graph()),
            Stage("remove old versions", self._remove_old, writer, when=lambda: self._builds_graph() and self._synced.removes,
                  reads=("sync",), writes=("graph", "chunk vectors")),
            Stage("embed chunks, extract and merge", self._extract, writer, when=building, stoppable=True,
                  reads=("run chunks", "extraction cache"), writes=("chunk vectors", "extraction cache", "graph", "run outcomes")),
            Stage("summarise", self._summarise, writer, when=llm, stoppable=True, reads=("graph",), writes=("graph",)),
            Stage("embed graph", self._embed_graph, writer, when=building, reads=("graph changes",),
                  writes=("graph vectors",)),
            Stage("aliases", self._link_aliases, writer, when=building, reads=("graph",), writes=("graph",)),
            Stage("finish vectors", self._finish_vectors, writer, when=building, writes=("vectors flushed",)),
            Stage("commit graph", self._commit, writer, when=building, releases=("job",),
                  writes=("graph files", "manifest")),
            Stage("record documents", self._record_documents, when=self._has_work,
                  reads=("run documents", "run outcomes"), writes=("document status",)),
            Stage("record sources", self._record_sources, reads=("sync",), writes=("chunks", "document status", "sources")),
        ]

    def run(self, paths: list[str]) -> IndexReport:
        """Sync the workspace with ``paths`` (index what is new or changed, replace old versions,
        re-point moved files, remove pruned ones) and return what happened: the stages in order,
        each timed, their resources opened when first needed and closed when the run ends."""
        started = time.monotonic()
        self.paths = paths
        outcome = "failed"
        self.metrics.begin()
        try:
            with contextlib.ExitStack() as self._resources:
                try:
                    for stage in self.stages():
                        self._run_stage(stage)
                except IndexCancelled:  # its documents are marked failed: run again to finish, or delete them
                    outcome = "cancelled"
                    self._record_documents(cancelled=CANCELLED)
                    raise
            outcome = "ok"
        finally:
            self._resources = self._job_scope = None
            self.report.seconds = round(time.monotonic() - started, 2)
            self.report.llm_cost = self.report.usage.cost(model_price(self.settings))
            self.metrics.ended(outcome, self.report)
        return self.report

    def _run_stage(self, stage: Stage) -> None:
        """One stage: skipped unless ``when`` holds; its resources opened, its time recorded
        (opening included), the run's stop checked after it if it is ``stoppable``."""
        if not stage.when():
            return
        began = time.monotonic()
        self.metrics.enter(stage.name)
        for resource in stage.opening_order():
            self._open(resource)
        stage.run()
        self.metrics.counts(self.report)
        for resource in stage.releases:
            self._release(resource)
        self.report.stage_seconds[stage.name] = round(time.monotonic() - began, 2)
        if stage.stoppable:
            self._check_stop()

    @property
    def _synced(self) -> SourceSync:
        return required(self.sync, "the run's source listing")

    @property
    def _parts(self) -> executors.RunParts:
        return required(self.parts, "the run's batch stages")

    @property
    def _executor(self) -> executors.Executor:
        return required(self.executor, "the run's executor")

    @property
    def _router(self) -> GraphRouter:
        return required(self.graph, "the run's graph")

    def _has_work(self) -> bool:
        """Files to read, or recorded files gone from the paths (a prune may remove them)."""
        return bool(self._synced.files or self._synced.missing)

    def _builds_graph(self) -> bool:
        """New documents to merge, or old versions to remove."""
        return self._has_work() and bool(self.report.docs_new or self._synced.removes)

    # ---- resources -------------------------------------------------------------------
    def _open(self, resource: Resource) -> None:
        """Open ``resource`` unless it is open: the shards and the vector sink through the target
        (its caller closes them), the embedding pool's lease and the write job closed when the
        run ends."""
        stack = self._resources
        assert stack is not None  # only inside run()
        if resource == "ray":
            ensure_ray(self.settings)
        elif resource == "embedding" and self.pool is None:
            self.pool = self.embedding_pool.lease() if self.embedding_pool is not None else EmbeddingPool(
                self.settings.embedding, self.niceness, self.settings.metrics)
            stack.callback(self.pool.close)  # a caller's pool stays up: this run holds a lease of it
            self._parts.embed_workers, self._parts.embed_batch = self.pool.workers, self.pool.batch_size
        elif resource == "graph" and self.graph is None:
            self.graph = self.target.graph(self.report.chunks, self.manifest)
            self.manifest = self.manifest.model_copy(update={"num_shards": self.graph.num_shards})
            self._parts.shards = self.graph.handles
        elif resource == "vectors" and self._parts.sink is None:
            assert self.pool is not None  # opened before: the sink needs the model's dimension
            self._parts.sink = self._vector_sink(self.pool)
            self._add_text_search()
            version = self.manifest.graph_version + 1  # what this run commits
            self._parts.stamp = ChunkStamp(version, frozenset(self._synced.moved_docs))
        elif resource == "job" and self._job_scope is None:
            self._job_scope = stack.enter_context(contextlib.ExitStack())
            # A kept target (the Serve app's) has readers: they see the graph of the last
            # finished run, published once it is committed (before its documents count as
            # processed), and the chunk vectors of that version (ChunkStamp; old versions' rows
            # are retired at this one and deleted once it is published); a run that fails or is
            # cancelled is undone (its extractions stay cached, so running it again costs no LLM
            # call). Shards opened for the run have no readers until it ends.
            if self.target.kept:
                self.job = self._job_scope.enter_context(self._router.job())
                self.job.if_rolled_back(self._vectors_dropper(self._parts))  # the run's chunks are known now

    def _release(self, resource: Resource) -> None:
        """End ``resource`` before the run ends: the write job is published (the commit is done)."""
        if resource == "job" and self._job_scope is not None:
            self._job_scope.close()
            self.job = None

    def preview(self, paths: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """What ``run(paths)`` would add, replace, move and remove (every source named, with the
        files ``listed`` and the ``unsupported`` ones), and the document rows of the files it would
        read, without doing it: those files are read and hashed here, nothing is written and Ray
        is not started."""
        sync = self._listing(paths)
        docs = ReadFiles(relative_to=self.relative_to)(sync.files)
        sync.result = sync.preview(docs)
        return {**sync.summary(limit=None), "listed": len(sync.to_read) + sync.alone,
                "unsupported": self.report.errors}, docs

    def _listing(self, paths: list[str]) -> SourceSync:
        """The listing of ``paths`` against the sources recorded: what to read, what is gone."""
        inputs = list_input_files(paths, exclude=self.settings.workspace)
        self.report.errors.extend(inputs.errors)
        sync = SourceSync(self.workspace, paths, inputs, self.prune)
        if not inputs.files and not inputs.errors and not sync.missing:
            raise FileNotFoundError(f"no files to index under {' '.join(paths)}")
        self.report.files = len(sync.to_read)
        self.report.docs_skipped = sync.alone_docs
        if inputs.files:
            notes = [f"{sync.alone} unchanged"] if sync.alone else []
            notes += [f"{len(inputs.errors)} skipped: unsupported type"] if inputs.errors else []
            listed = f" of {len(inputs.files)}" if sync.alone else ""
            self.say(f"reading {len(sync.to_read)}{listed} files" + (f" ({', '.join(notes)})" if notes else ""))
        if sync.missing:
            self.say(f"{len(sync.missing)} recorded files are gone from the given paths"
                     + ("" if self.prune else " (kept; --prune removes their documents)"))
        return sync

    # ---- stages ---------------------------------------------------------------------
    def _list_sources(self) -> None:
        """The listing of the paths against the sources recorded (before Ray: a wrong path fails fast)."""
        self.sync = self._listing(self.paths)

    def _read_and_chunk(self) -> None:
        """Pass 1: the run's scratch tables and executor; documents read, the new ones chunked
        into the run's chunk table."""
        files = self._synced.files
        run = RunFiles(self.settings.workspace, new_run_id(), self.workspace)
        extraction_cache.migrate_text_keys(self.workspace, self.workspace.list_files("chunks") + stale_chunk_parts(
            self.workspace, keep=run.run_id))
        remove_stale_runs(self.workspace, keep=run.run_id)
        self.parts = executors.RunParts(
            self.settings, run, None, [], None, 0, self.task_args, self.display_names,
            cache_parts=extraction_cache.cache_parts(self.workspace), display_kind=self.display_kind,
            relative_to=self.relative_to)
        self.executor = executors.choose_executor(self.parts, executors.runs_locally(self.settings, files))
        self.report.stages = self.executor.name
        progress = StageProgress(self.say, "chunking", None, "documents", on_advance=self.metrics.progress)
        for counts in self.executor.chunk(files):
            self.report.add({k: v for k, v in counts.items() if k != "errors"})
            self.report.errors.extend(json.loads(counts["errors"]))
            progress.advance(int(counts["docs_new"]) + int(counts["docs_skipped"]) + int(counts["docs_failed"]))
        if self.report.docs_new:
            self.say(f"{self.report.docs_new} documents to index, {self.report.chunks} chunks")

    def _plan(self) -> None:
        """The sync's plan once the files read are chunked (re-pointed documents join the run)."""
        sync = self._synced
        added = sync.plan(self._parts.run)
        self.report.chunks += added
        summary = sync.summary()
        for key in ("added", "replaced", "moved", "removed", "unchanged"):
            setattr(self.report, f"sources_{key}", summary[key])
        self.report.docs_removed = summary["documents_removed"]
        self.report.changes = {key: names for key, names in summary["sources"].items() if names}
        changed = [f"{summary[k]} {k}" for k in ("replaced", "moved", "removed") if summary[k]]
        if changed:
            self.say(f"sync: {', '.join(changed)} ({summary['documents_removed']} documents leave the workspace, "
                     f"{len(sync.moved_docs)} re-pointed)")

    def _nothing_new(self) -> None:
        self.say(f"nothing new to index ({self.report.docs_skipped} documents already processed)")
        self.report.graph_version = self.manifest.graph_version
        self.report.entities, self.report.relations = self.manifest.entities, self.manifest.relations

    def _remove_old(self) -> None:
        """The replaced, moved and removed documents' chunks out of the shards, in the write job
        that merges the new versions (committed and published together), and their chunk vectors
        out of Milvus: at once for a store with no readers (no write job), else retired at the
        run's version (its readers no longer see them, older ones still do; done first, so that
        a server's bounded consistency shows it long before the publish) and deleted once the
        job is published (restored if it is undone)."""
        sync, parts, job = self._synced, self._parts, self.job
        self._router.remove_chunks(sync.graph_chunks)
        sink, ids = parts.vector_sink, sync.vector_chunks
        if job is None:  # before the new versions' vectors
            sink.delete("chunks", ids)
            return
        with sink.writing() as writer:
            retire_vectors(writer, "chunks", ids, parts.stamp.since)

        def restore() -> None:
            with sink.writing() as writer:
                retire_vectors(writer, "chunks", ids, None)

        job.after_publish(functools.partial(sink.delete, "chunks", ids))
        job.after_publish(sink.flush)
        job.if_rolled_back(restore)

    @staticmethod
    def _vectors_dropper(parts: executors.RunParts) -> Callable[[], None]:
        """What deletes the chunk vectors of the run's chunks if its job is undone (but the moved
        documents': theirs are of every version), so that no later job publishes them; its
        extractions stay cached."""
        rows = parts.run.read("chunks", RUN_CHUNK_IDS).to_pylist()
        ids = [row["chunk_id"] for row in rows if row["doc_id"] not in parts.stamp.moved_docs]
        return functools.partial(parts.vector_sink.delete, "chunks", ids)

    def _extract(self) -> None:
        """Pass 2: the run's chunks embedded, extracted and merged into the shards."""
        total = self.report.chunks
        self.say(f"extracting {total} chunks")
        extracting = StageProgress(self.say, "extracting", total, "chunks", on_advance=self.metrics.progress)
        embedding = StageProgress(self.say, "embedding chunks", total, "chunks")

        def embedded(count: int) -> None:
            self.report.vectors_upserted += count
            embedding.advance(count)

        with contextlib.closing(self._executor.extract(total, embedded)) as extraction:  # a stop waits for the vectors in flight
            for counts in extraction:
                self.report.add(counts)
                self.metrics.counts(self.report)
                extracting.advance(int(counts["chunks_merged"]))
                self._check_stop()

    def _summarise(self) -> None:
        self.say("summarising long descriptions")
        counts = self._executor.summarise()
        self.report.add({key: value for key, value in counts.items() if key != "summaries_failed"})
        if counts["summaries_failed"]:
            self.say(f"{counts['summaries_failed']} summaries failed; their descriptions stay unsummarised")

    def _embed_graph(self) -> None:
        """The changed entities and relations embedded and stored, removed ones deleted (once
        the write job is published: its readers may still find them until then)."""
        parts, job = self._parts, self.job
        total = parts.graph.change_count()
        progress = StageProgress(self.say, "embedding entities and relations", total, "texts",
                                 on_advance=self.metrics.progress)
        counts = embed_graph_changes(parts.graph, parts.embed_workers, parts.vector_sink, parts.embed_batch,
                                     self.task_args, progress.advance, delete=job is None)
        self.report.vectors_upserted += counts.vectors
        if job is not None and counts.removed:
            sink = parts.vector_sink

            def delete() -> None:
                with sink.writing() as writer:
                    delete_graph_vectors(writer, counts.removed)

            job.after_publish(delete)

    def _add_text_search(self) -> None:
        """A workspace indexed before BM25: its vectors copied into collections that also search
        their texts (storage.vectors.add_text_search), as the vector sink opens, before this run
        writes any (the stages that write vectors also hold the graph, whose texts it reads)."""
        with self._parts.vector_sink.writing() as writer:
            copied = add_text_search(writer, self._router.export)
        if copied:
            self.say(f"added BM25 text search: {', '.join(f'{n} {kind}' for kind, n in copied.items())} rows copied")

    def _link_aliases(self) -> None:
        """Link the run's new entities to their name variants (core.alias_rules); all of the
        graph's, the first time a workspace built before aliases existed is indexed into."""
        started = time.monotonic()
        self.report.alias_links = self._executor.link_aliases(everything=not self.manifest.aliases_linked)
        self.manifest = self.manifest.model_copy(update={"aliases_linked": True})
        if self.report.alias_links:
            self.say(f"linked name variants: {self.report.alias_links} alias links ({time.monotonic() - started:.1f} s)")

    def _finish_vectors(self) -> None:
        """The run's rows searchable before the commit (RunTarget.finish_vectors). A store opened
        for the run closes: a Milvus Lite owner then flushes and indexes the run's vectors alone
        (docs/configuration.md: past ~50k vectors, as long as their embedding, and growing
        faster); a server's client closes at once. A kept store flushes (its lookups go on)."""
        lite = not self.target.kept and not is_server_uri(self.settings.milvus_uri())
        if lite:
            self.say(f"Milvus Lite: indexing this run's {self.report.vectors_upserted} vectors (one process owns "
                     "the file; a Milvus server at vectors.uri indexes while the embedding actors insert)")
        started = time.monotonic()
        self.target.finish_vectors()
        seconds = time.monotonic() - started
        if lite and self.report.vectors_upserted >= LITE_ADVICE_VECTORS:
            self.say(f"Milvus Lite indexed {self.report.vectors_upserted} vectors in {seconds:.0f} s; for runs of this "
                     "size set vectors.uri to a Milvus server (docs/configuration.md)")

    def _commit(self) -> None:
        self.manifest = commit_graph(self._router, self.workspace, self.manifest)
        self.report.entities, self.report.relations = self.manifest.entities, self.manifest.relations
        self.report.graph_version = self.manifest.graph_version

    def _record_documents(self, cancelled: str = "") -> None:
        """Document statuses from the run's tables (``cancelled``: the reason its documents failed)."""
        counts = self._executor.finish_documents(cancelled)
        self.report.docs_failed += counts["docs_failed"]
        self.report.errors.extend(counts["errors"])
        if counts["errors_total"] > len(counts["errors"]):
            self.report.errors.append({"file_path": "", "error": f"... and {counts['errors_total'] - len(counts['errors'])} "
                                       "more failed documents (`lightrag-ray status` lists them)"})

    def _record_sources(self) -> None:
        """The sources table and the last sync's summary (after the commit: the chunk and status
        tables follow it); with nothing to read, only the summary."""
        sync = self._synced
        llm = {**self.report.usage.counts(), "llm_cost": self.report.usage.cost(model_price(self.settings))}
        if self._has_work():
            sync.finish(llm)
        else:
            self.report.sources_unchanged = sync.alone
            sources.save_last_sync(self.workspace, sync.summary(), llm)

    # ---- helpers ----------------------------------------------------------------------
    def _check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise IndexCancelled(CANCELLED)

    def _vector_sink(self, pool: EmbeddingPool) -> VectorSink:
        """Where the embedding actors store vectors (the target's). The model's dimension must
        be the one the workspace's vectors were stored with."""
        dim = pool.warm_up()
        manifests.check_embedding_dim(self.manifest, dim, self.settings.embedding.model)
        self.manifest = self.manifest.model_copy(update={"embedding_dim": dim})
        return self.target.vector_sink(dim, niceness_options(self.niceness))
