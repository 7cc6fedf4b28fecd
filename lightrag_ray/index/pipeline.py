"""The indexing run: files -> chunks -> extraction -> sharded graph -> Milvus, as a list of
stages (index.stages) run by one executor chosen per run (index.executors).

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

from lightrag_ray.config import Settings
from lightrag_ray.core.sources import TEXT
from lightrag_ray.index import executors
from lightrag_ray.index.documents import list_input_files
from lightrag_ray.index.embedding_pool import EmbeddingPool
from lightrag_ray.index.progress import Progress, StageProgress, print_progress
from lightrag_ray.index.stages.read import ReadFiles
from lightrag_ray.index.sync import SourceSync
from lightrag_ray.index.stages.aliases import link_aliases, link_aliases_across
from lightrag_ray.index.stages.commit import commit_graph, finish_documents
from lightrag_ray.index.stages.embed import ChunkStamp, embed_graph_changes
from lightrag_ray.models.llm_processor import require_vllm
from lightrag_ray.ray_runtime import ensure_ray, niceness_options
from lightrag_ray.storage import extraction_cache, sources
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph.writer import GraphRouter, WriteJob
from lightrag_ray.storage.run_files import RunFiles, new_run_id, remove_stale_runs, stale_chunk_parts
from lightrag_ray.storage.vector_owner import VectorSink, open_vector_sink
from lightrag_ray.storage.vector_contract import VectorStore
from lightrag_ray.storage.vectors import delete_graph_vectors, is_server_uri, retire_vectors
from lightrag_ray.storage.workspace import Workspace

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
    llm_tokens: int = 0  # generated tokens, as ray.data.llm processors report them (0 for other backends)
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

    def add(self, counts: dict[str, Any]) -> None:
        """Add a count row's numbers to the fields of the same name."""
        for key, value in counts.items():
            if key in self.__dataclass_fields__ and isinstance(value, (int, float)) and not isinstance(value, bool):
                setattr(self, key, getattr(self, key) + value)


class IndexRun:
    """One run of the pipeline over a set of input paths."""

    def __init__(
        self, settings: Settings, progress: Progress | None = print_progress,
        router: GraphRouter | None = None, vectors: VectorSink | None = None,
        display_names: dict[str, str] | None = None, niceness: int | None = None, stop: threading.Event | None = None,
        embedding_pool: EmbeddingPool | None = None, open_graph: Callable[[Settings, int], GraphRouter] | None = None,
        prune: bool = False, display_kind: str = TEXT, relative_to: str | None = None,
    ) -> None:
        """``router``/``vectors``: the shards and the vector store a caller keeps open (the Serve
        app); ``open_graph(settings, chunks)``: opens the workspace's shards when the run has
        ``chunks`` to index and no ``router`` was given (service.indexing passes its writer's; the
        run closes it);
        ``embedding_pool``: an open pool (model loaded) that the run leases and leaves open
        (None: the run starts its own and closes it);
        ``display_names``: file name -> name to record instead of the file's path, as inserted
        text (``display_kind`` TEXT) or an upload that replaces the upload of that name (UPLOAD);
        ``relative_to``: a folder whose files are named by their path inside it (the Serve app's scan);
        ``niceness``: the niceness of this job's Ray workers (a background job on nodes that
        also answer queries; None: Ray's default; see ``niceness_options``); ``stop``: once set,
        the run stops after the current extraction batch (IndexCancelled); ``prune``: documents whose
        file lies under the given paths and is gone are removed (index.sync)."""
        require_vllm(settings.llm)  # before any work: one clear line when vLLM is missing
        self.settings = settings
        self.router = router
        self.open_graph = open_graph
        self.vectors = vectors
        self.embedding_pool = embedding_pool
        self.display_names = display_names or {}
        self.niceness = niceness
        self.stop = stop
        self.prune = prune
        self.display_kind = display_kind
        self.relative_to = relative_to
        self.say = progress or (lambda _message: None)
        self.report = IndexReport()
        self.workspace = Workspace(settings.workspace)
        self.manifest = manifests.open_for(self.workspace, manifests.settings_manifest(settings))
        self.task_args = {"num_cpus": settings.ray.task_cpus, **niceness_options(niceness)}
        self._step_started = time.monotonic()

    # ---- the run --------------------------------------------------------------------
    def run(self, paths: list[str]) -> IndexReport:
        """Sync the workspace with ``paths`` (index what is new or changed, replace old versions,
        re-point moved files, remove pruned ones) and return what happened."""
        started = time.monotonic()
        sync = self._sync(paths)  # before Ray: a wrong path fails fast
        files = sync.files
        if not files and not sync.missing:
            self._nothing_new()
            self.report.sources_unchanged = sync.alone
            sources.save_last_sync(self.workspace, sync.summary())
            return self.report
        ensure_ray(self.settings)
        run = RunFiles(self.settings.workspace, new_run_id())
        extraction_cache.migrate_text_keys(self.workspace, self.workspace.list_files("chunks") + stale_chunk_parts(
            self.workspace, keep=run.run_id))
        remove_stale_runs(self.workspace, keep=run.run_id)
        parts = executors.RunParts(self.settings, run, None, [], None, 0, self.task_args, self.display_names,
                                   cache_parts=extraction_cache.cache_parts(self.workspace), display_kind=self.display_kind,
                                   relative_to=self.relative_to)
        executor = executors.choose_executor(parts, executors.runs_locally(self.settings, files))
        self.report.stages = executor.name
        try:
            self._chunk(executor, files)
            self._plan(sync, run)
            if self.report.docs_new or sync.removes:
                self._index(executor, parts, sync)
            else:
                self._nothing_new()
                self._finish(run)
            self._finish_sync(sync)
        finally:
            self.report.seconds = round(time.monotonic() - started, 2)
        return self.report

    def preview(self, paths: list[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """What ``run(paths)`` would add, replace, move and remove (every source named, with the
        files ``listed`` and the ``unsupported`` ones), and the document rows of the files it would
        read, without doing it: those files are read and hashed here, nothing is written and Ray
        is not started."""
        sync = self._sync(paths)
        docs = ReadFiles(relative_to=self.relative_to)(sync.files)
        sync.result = sync.preview(docs)
        return {**sync.summary(limit=None), "listed": len(sync.to_read) + sync.alone,
                "unsupported": self.report.errors}, docs

    def _nothing_new(self) -> None:
        self.say(f"nothing new to index ({self.report.docs_skipped} documents already processed)")
        self.report.graph_version = self.manifest.graph_version
        self.report.entities, self.report.relations = self.manifest.entities, self.manifest.relations

    def _index(self, executor: Any, parts: executors.RunParts, sync: SourceSync) -> None:
        """Pass 2 and what follows, with the shards and the embedding actors open."""
        pool = self.embedding_pool.lease() if self.embedding_pool is not None else EmbeddingPool(
            self.settings.embedding, self.niceness)
        router = sink_writer = None
        try:
            router = self.router or self._open_graph()
            self.manifest = self.manifest.model_copy(update={"num_shards": router.num_shards})
            parts.shards = router.handles
            parts.embed_workers, parts.embed_batch = pool.workers, pool.batch_size
            parts.sink, sink_writer = self._vector_sink(pool)
            version = self.manifest.graph_version + 1  # what this run commits
            parts.stamp = ChunkStamp(version, frozenset(sync.moved_docs))
            # A caller's router (the Serve app's) has readers: they see the graph of the last
            # finished run, published once it is committed (before its documents count as
            # processed), and the chunk vectors of that version (ChunkStamp; old versions' rows
            # are retired at this one and deleted once it is published); a run that fails or is
            # cancelled is undone (its extractions stay cached, so running it again costs no LLM
            # call). A run's own shards have no readers until it ends.
            with router.job() if router is self.router else contextlib.nullcontext() as job:
                if job is not None:  # the chunks are known now (a cancel moves them out of the run's tables)
                    job.if_rolled_back(self._vectors_dropper(parts))
                try:
                    self._remove_old(router, parts, sync, job, version)
                    self._extract(executor)
                    self._summarise(executor)
                    self._check_stop()
                except IndexCancelled:  # its documents are marked failed: run again to finish, or delete them
                    self._finish(parts.run, cancelled=CANCELLED)
                    raise
                self.report.llm_tokens = executor.tokens
                self._embed_graph(parts, job)
                self._link_aliases(router)
                if sink_writer is not None:  # the run's own Lite owner flushes its rows before the commit
                    self._finish_vectors(sink_writer)
                    sink_writer = None
                else:  # the caller's store stays open, and its lookups go on: the run's rows are flushed
                    parts.vector_sink.flush()
                self._commit(router)
            self._finish(parts.run)
        finally:
            pool.close()  # a caller's pool stays up: this run holds a lease of it
            if sink_writer is not None:
                sink_writer.close()
            if router is not None and router is not self.router:
                router.close()

    # ---- steps ------------------------------------------------------------------------
    def _sync(self, paths: list[str]) -> SourceSync:
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

    def _plan(self, sync: SourceSync, run: RunFiles) -> None:
        """The sync's plan once the files read are chunked (re-pointed documents join the run)."""
        added = sync.plan(run)
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

    def _remove_old(self, router: GraphRouter, parts: executors.RunParts, sync: SourceSync, job: WriteJob | None,
                    version: int) -> None:
        """The replaced, moved and removed documents' chunks out of the shards, in the write job
        that merges the new versions (committed and published together), and their chunk vectors
        out of Milvus: at once for a store with no readers (no ``job``), else retired at
        ``version`` (its readers no longer see them, older ones still do; done first, so that
        a server's bounded consistency shows it long before the publish) and deleted once the
        job is published (restored if it is undone)."""
        if not sync.removes:
            return
        router.remove_chunks(sync.graph_chunks)
        sink, ids = parts.vector_sink, sync.vector_chunks
        if job is None:  # before the new versions' vectors
            sink.delete("chunks", ids)
        else:
            with sink.writing() as writer:
                retire_vectors(writer, "chunks", ids, version)

            def restore() -> None:
                with sink.writing() as writer:
                    retire_vectors(writer, "chunks", ids, None)

            job.after_publish(functools.partial(sink.delete, "chunks", ids))
            job.after_publish(sink.flush)
            job.if_rolled_back(restore)
        self._timed("remove old versions")

    @staticmethod
    def _vectors_dropper(parts: executors.RunParts) -> Callable[[], None]:
        """What deletes the chunk vectors of the run's chunks if its job is undone (but the moved
        documents': theirs are of every version), so that no later job publishes them; its
        extractions stay cached."""
        rows = parts.run.read("chunks", RUN_CHUNK_IDS).to_pylist()
        ids = [row["chunk_id"] for row in rows if row["doc_id"] not in parts.stamp.moved_docs]
        return functools.partial(parts.vector_sink.delete, "chunks", ids)

    def _finish_sync(self, sync: SourceSync) -> None:
        sync.finish()
        self._timed("record sources")

    def _timed(self, step: str) -> None:
        """Close the wall time of ``step`` (from the end of the previous one)."""
        now = time.monotonic()
        self.report.stage_seconds[step] = round(now - self._step_started, 2)
        self._step_started = now

    def _chunk(self, executor: Any, files: list[dict[str, Any]]) -> None:
        """Pass 1: documents read, the new ones chunked into the run's chunk table."""
        progress = StageProgress(self.say, "chunking", None, "documents")
        for counts in executor.chunk(files):
            self.report.add({k: v for k, v in counts.items() if k != "errors"})
            self.report.errors.extend(json.loads(counts["errors"]))
            progress.advance(int(counts["docs_new"]) + int(counts["docs_skipped"]) + int(counts["docs_failed"]))
        self._timed("read and chunk")
        if self.report.docs_new:
            self.say(f"{self.report.docs_new} documents to index, {self.report.chunks} chunks")

    def _extract(self, executor: Any) -> None:
        """Pass 2: the run's chunks embedded, extracted and merged into the shards."""
        total = self.report.chunks
        self.say(f"extracting {total} chunks")
        extracting = StageProgress(self.say, "extracting", total, "chunks")
        embedding = StageProgress(self.say, "embedding chunks", total, "chunks")

        def embedded(count: int) -> None:
            self.report.vectors_upserted += count
            embedding.advance(count)

        with contextlib.closing(executor.extract(total, embedded)) as extraction:  # a stop waits for the vectors in flight
            for counts in extraction:
                self.report.add(counts)
                extracting.advance(int(counts["chunks_merged"]))
                self._check_stop()
        self._timed("embed chunks, extract and merge")

    def _summarise(self, executor: Any) -> None:
        if self.settings.llm.backend == "none":
            return
        self.say("summarising long descriptions")
        counts = executor.summarise()
        self.report.summaries += counts["summaries"]
        if counts["summaries_failed"]:
            self.say(f"{counts['summaries_failed']} summaries failed; their descriptions stay unsummarised")
        self._timed("summarise")

    def _embed_graph(self, parts: executors.RunParts, job: WriteJob | None) -> None:
        """The changed entities and relations embedded and stored, removed ones deleted (once
        the ``job`` is published: its readers may still find them until then)."""
        total = parts.graph.change_count()
        progress = StageProgress(self.say, "embedding entities and relations", total, "texts")
        counts = embed_graph_changes(parts.graph, parts.embed_workers, parts.vector_sink, parts.embed_batch,
                                     self.task_args, progress.advance, delete=job is None)
        self.report.vectors_upserted += counts.vectors
        if job is not None and counts.removed:
            sink = parts.vector_sink

            def delete() -> None:
                with sink.writing() as writer:
                    delete_graph_vectors(writer, counts.removed)

            job.after_publish(delete)
        self._timed("embed graph")

    def _link_aliases(self, router: GraphRouter) -> None:
        """Link the run's new entities to their name variants (core.alias_rules); all of the
        graph's, the first time a workspace built before aliases existed is indexed into."""
        started = time.monotonic()
        everything = not self.manifest.aliases_linked
        if self.report.stages == "driver":
            self.report.alias_links = link_aliases(router, everything)
        else:
            self.report.alias_links = link_aliases_across(router.handles, self.task_args, everything)
        self.manifest = self.manifest.model_copy(update={"aliases_linked": True})
        if self.report.alias_links:
            self.say(f"linked name variants: {self.report.alias_links} alias links ({time.monotonic() - started:.1f} s)")
        self._timed("aliases")

    def _finish_vectors(self, writer: VectorStore) -> None:
        """Close the run's own vector writer. A Milvus Lite owner then flushes and indexes
        the run's vectors alone (docs/configuration.md: past ~50k vectors, as long as their
        embedding, and growing faster); a server's client closes at once."""
        lite = not is_server_uri(self.settings.milvus_uri())
        if lite:
            self.say(f"Milvus Lite: indexing this run's {self.report.vectors_upserted} vectors (one process owns "
                     "the file; a Milvus server at vectors.uri indexes while the embedding actors insert)")
        started = time.monotonic()
        writer.close()
        seconds = time.monotonic() - started
        if lite and self.report.vectors_upserted >= LITE_ADVICE_VECTORS:
            self.say(f"Milvus Lite indexed {self.report.vectors_upserted} vectors in {seconds:.0f} s; for runs of this "
                     "size set vectors.uri to a Milvus server (docs/configuration.md)")
        self._timed("finish vectors")

    def _commit(self, router: GraphRouter) -> None:
        self.manifest = commit_graph(router, self.workspace, self.manifest)
        self.report.entities, self.report.relations = self.manifest.entities, self.manifest.relations
        self.report.graph_version = self.manifest.graph_version
        self._timed("commit graph")

    def _finish(self, run: RunFiles, cancelled: str = "") -> None:
        """Document statuses from the run's tables (a Ray task for a run on Ray Data)."""
        if self.report.stages == "driver":
            counts = finish_documents(run, cancelled)
        else:
            counts = executors.finish_remotely(run, cancelled, self.task_args)
        self.report.docs_failed += counts["docs_failed"]
        self.report.errors.extend(counts["errors"])
        if counts["errors_total"] > len(counts["errors"]):
            self.report.errors.append({"file_path": "", "error": f"... and {counts['errors_total'] - len(counts['errors'])} "
                                       "more failed documents (`lightrag-ray status` lists them)"})
        self._timed("record documents")

    # ---- helpers ----------------------------------------------------------------------
    def _check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise IndexCancelled(CANCELLED)

    def _open_graph(self) -> GraphRouter:
        if self.open_graph is None:
            raise ValueError("an index run needs the workspace's graph: pass router= or open_graph= "
                             "(lightrag_ray.service.indexing.index_paths does)")
        return self.open_graph(self.settings, self.report.chunks)

    def _vector_sink(self, pool: EmbeddingPool) -> tuple[VectorSink, VectorStore | None]:
        """Where the embedding actors store vectors: the caller's, or one opened for this run
        (with the writer that owns it, closed by the run). The model's dimension must be the
        one the workspace's vectors were stored with."""
        dim = pool.warm_up()
        manifests.check_embedding_dim(self.manifest, dim, self.settings.embedding.model)
        self.manifest = self.manifest.model_copy(update={"embedding_dim": dim})
        if self.vectors is not None:
            return self.vectors, None
        return open_vector_sink(self.settings, dim, actor_options=niceness_options(self.niceness))
