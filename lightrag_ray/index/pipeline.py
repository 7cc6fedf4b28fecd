"""The indexing pipeline: files -> chunks -> extraction -> sharded graph -> Milvus.

Ray Data reads, chunks and extracts (LLM actor pool), embedding actors embed; a small
run does the first three in this process instead (``local_stages``). The driver streams extraction results into the graph shards as they arrive, so the
LLM and the merge overlap. Every step is idempotent and keyed by content, so a run
that died is simply run again: processed documents are skipped and extracted chunks
come from the cache (``extractions/``) instead of the LLM.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import ray

from lightrag_ray.config import Settings
from lightrag_ray.core.chunking import chunk_text
from lightrag_ray.core.records import EntityRecord, RelationRecord
from lightrag_ray.index import local_stages
from lightrag_ray.index.aliases import link_aliases
from lightrag_ray.index.batch_llm import ProcessorRuns
from lightrag_ray.index.documents import list_input_files, parse_file
from lightrag_ray.index.embedding_pool import EmbeddingPool, Item
from lightrag_ray.index.fast_stage import extraction_stage_class
from lightrag_ray.index.llm_stages import SummarizeItems
from lightrag_ray.index.progress import Progress, StageProgress
from lightrag_ray.models.llm_processor import require_vllm, uses_processor
from lightrag_ray.ray_runtime import actor_pool, ensure_ray, niceness_options
from lightrag_ray.storage import doc_status, extraction_cache
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph_router import GraphRouter
from lightrag_ray.storage.vector_owner import ActorVectorWriter, VectorStoreActor
from lightrag_ray.storage.vectors import (
    VectorWriter,
    chunk_vector_item,
    delete_graph_vectors,
    graph_vector_items,
    is_server_uri,
    open_store,
    vector_rows,
)
from lightrag_ray.storage.workspace import Workspace


def print_progress(message: str) -> None:
    """Default progress sink: one line per step on stderr."""
    print(f"[lightrag-ray] {message}", file=sys.stderr, flush=True)


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
    alias_links: int = 0  # alias link ends made or removed by the alias pass (index.aliases)
    vectors_upserted: int = 0
    entities: int = 0
    relations: int = 0
    graph_version: int = 0
    seconds: float = 0.0
    stages: str = ""  # where reading, chunking, extraction and summaries ran: "driver" (a small run) or "ray-data"
    errors: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _read_documents(files: list[str], task_args: dict[str, Any], display_names: dict[str, str]) -> ray.data.Dataset:
    """Document rows of ``files``; a file whose name is in ``display_names`` is recorded
    (status, chunks, references) under the name given there instead of its path."""
    ds = ray.data.read_binary_files(files, include_paths=True, **task_args)

    def parse(row: dict[str, Any]) -> list[dict[str, Any]]:
        path = row["path"]
        return parse_file(path, row["bytes"], display_names.get(path.rsplit("/", 1)[-1]))

    return ds.flat_map(parse, **task_args).materialize()


def _blocks_of(rows: list[dict[str, Any]], rows_per_block: int) -> ray.data.Dataset:
    """``rows`` as blocks of ``rows_per_block`` rows, put by this process: they live in this
    node's object store (the head's, under a RayJob), so losing a worker node loses none of
    them, and no task has to build them (``from_pandas`` starts one-CPU tasks a busy
    cluster may never have free)."""
    return ray.data.from_items(rows, override_num_blocks=max(1, math.ceil(len(rows) / rows_per_block)))


def _records(rows: list[dict[str, Any]]) -> tuple[list[EntityRecord], list[RelationRecord]]:
    entities: list[EntityRecord] = []
    relations: list[RelationRecord] = []
    for row in rows:
        result = extraction_cache.from_row(row)
        entities.extend(result.entities)
        relations.extend(result.relations)
    return entities, relations


CANCELLED = "cancelled on request"


class IndexCancelled(RuntimeError):
    """The run was stopped through its ``stop`` event; its documents are marked failed."""


class IndexRun:
    """One run of the pipeline over a set of input paths."""

    def __init__(
        self, settings: Settings, progress: Progress | None = print_progress,
        router: GraphRouter | None = None, vectors: VectorWriter | None = None,
        display_names: dict[str, str] | None = None, niceness: int | None = None, stop: threading.Event | None = None,
        embedding_pool: EmbeddingPool | None = None,
    ) -> None:
        """``router``/``vectors``: reuse open ones (the Serve app) instead of opening them;
        ``embedding_pool``: an open pool (model loaded) that the run leases and leaves open
        (None: the run starts its own and closes it);
        ``display_names``: file name -> name to record instead of the file's path;
        ``niceness``: the niceness of this job's Ray workers (a background job on nodes that
        also answer queries; None: Ray's default; see ``niceness_options``); ``stop``: once set,
        the run stops after the current extraction batch (IndexCancelled)."""
        require_vllm(settings.llm)  # before any work: one clear line when vLLM is missing
        self.settings = settings
        self.display_names = display_names or {}
        self.niceness = niceness
        self.stop = stop
        self.background = niceness_options(niceness)
        self.task_args = {"num_cpus": settings.ray.task_cpus, **self.background}
        self.router = router
        self.vectors = vectors
        self.embedding_pool = embedding_pool
        self.writer: VectorWriter | None = None
        self._write_lock = threading.Lock()
        self._embed_error: BaseException | None = None
        self.say = progress or (lambda _message: None)
        self.report = IndexReport()
        self.workspace = Workspace(settings.workspace)
        self.manifest = manifests.open_for(self.workspace, manifests.settings_manifest(settings))
        self.processors = ProcessorRuns(settings, self.workspace, self.task_args) if uses_processor(settings.llm) else None
        self.settings_dict = settings.model_dump()
        self.local = False  # stages in this process (local_stages), decided per run by its input size

    # ---- stages ---------------------------------------------------------------------
    def _select_documents(self, docs: ray.data.Dataset | list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Documents to index now (new or not yet processed); records per-file errors."""
        known = doc_status.load(self.workspace)
        todo: dict[str, dict[str, Any]] = {}
        failures = []
        rows = docs if isinstance(docs, list) else docs.select_columns(["doc_id", "file_path", "error"],
                                                                       **self.task_args).iter_rows()
        for row in rows:
            if row["error"]:
                failures.append({"doc_id": row["doc_id"], "file_path": row["file_path"], "status": doc_status.FAILED,
                                 "error": row["error"], "chunks": 0})
                self.report.errors.append({"file_path": row["file_path"], "error": row["error"]})
            elif known.get(row["doc_id"], {}).get("status") == doc_status.PROCESSED or row["doc_id"] in todo:
                self.report.docs_skipped += 1
            else:
                todo[row["doc_id"]] = row
        if failures:
            doc_status.update(self.workspace, failures)
        self.report.docs_failed += len(failures)
        return todo

    def _chunk(self, docs: ray.data.Dataset | list[dict[str, Any]], todo: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        """This run's chunk rows, held by the driver, which also writes the chunks table.

        Four later steps read them (extraction input, chunk embedding, cached ids, chunks
        per document); the driver needs every row's text for the first two anyway, so it
        pulls them once instead of re-reading materialized blocks each time. That also keeps
        them safe from a lost worker node: materialized blocks live in the object store of
        the worker that cut them, and Ray Data cannot always rebuild them from lineage.
        """
        chunking = self.settings.chunking
        wanted = {doc: row["file_path"] for doc, row in todo.items()}

        def chunk(row: dict[str, Any]) -> list[dict[str, Any]]:
            if wanted.get(row["doc_id"]) != row["file_path"]:
                return []
            return chunk_text(
                row["doc_id"], row["text"], chunk_tokens=chunking.chunk_tokens,
                overlap_tokens=chunking.overlap_tokens, encoding=chunking.encoding, file_path=row["file_path"],
            )

        if isinstance(docs, list):
            rows = local_stages.chunk_documents(docs, chunk)
        else:
            rows = docs.flat_map(chunk, **self.task_args).take_all()
        self.workspace.append_rows(rows, "chunks")
        return rows

    def _extract(self, chunks: list[dict[str, Any]], router: GraphRouter) -> dict[str, list[str]]:
        """Merge cached extractions, extract the rest; returns errors per doc."""
        fingerprint = extraction_cache.extraction_fingerprint(self.settings)
        cache = extraction_cache.load_cache(self.workspace, fingerprint)
        ids = [row["chunk_id"] for row in chunks]
        cached = [cache[c] for c in ids if c in cache]
        self.report.chunks_cached = len(cached)
        for start in range(0, len(cached), 500):
            router.apply(*_records(cached[start : start + 500]))
        missing = set(ids) - cache.keys()
        errors: dict[str, list[str]] = defaultdict(list)
        if not missing:
            return errors
        self.say(f"extracting {len(missing)} chunks ({len(cached)} from cache)")
        progress = StageProgress(self.say, "extracting", len(missing), "chunks")
        for rows in self._extraction_batches([row for row in chunks if row["chunk_id"] in missing]):
            for row in rows:
                self.report.llm_requests += int(row["requests"])
                if row["error"]:
                    errors[row["doc_id"]].append(row["error"])
                    self.report.chunks_failed += 1
            good = [row for row in rows if not row["error"]]
            self.report.chunks_extracted += len(good)
            self.report.records_dropped += sum(int(row["dropped"]) for row in good)
            router.apply(*_records(good))
            progress.advance(len(rows))
            self._check_stop()
        return errors

    def _check_stop(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise IndexCancelled(CANCELLED)

    def _extraction_batches(self, todo: list[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
        """Extraction rows (cache columns + error) of the chunks ``todo``, batch by batch as
        they come: from a ray.data.llm processor (backends vllm, openai-batch) or actors."""
        if self.processors is not None and self.settings.extraction.mode == "llm":
            yield from self.processors.extract(todo)
            return
        if self.local:
            yield from local_stages.extract(self.settings, todo)
            return
        ex, llm = self.settings.extraction, self.settings.llm
        # One block per LLM batch: a block holding several batches is worked through by one
        # actor while the others idle (summaries are cut the same way).
        extracted = _blocks_of(todo, llm.max_concurrency).map_batches(
            extraction_stage_class(self.settings),
            fn_constructor_kwargs={"settings": self.settings_dict},
            batch_size=llm.max_concurrency,
            **actor_pool(ex.actors, ex.num_cpus, ex.num_gpus), **self.background,
        )
        for batch in extracted.iter_batches(batch_size=None, batch_format="pandas"):
            yield batch.to_dict("records")

    def _summarize(self, router: GraphRouter) -> None:
        graph = self.settings.graph
        todo = router.pending_summaries(graph.summary_max_fragments, graph.summary_max_tokens)
        if not todo or self.settings.llm.backend == "none":
            return
        self.say(f"summarising {len(todo)} long descriptions")
        ex = self.settings.extraction
        if self.processors is not None:
            results = self.processors.summarize(todo)
        elif self.local:
            results = local_stages.summarize(self.settings, todo)
        else:
            results = _blocks_of(todo, self.settings.llm.max_concurrency).map_batches(
                SummarizeItems,
                fn_constructor_kwargs={"settings": self.settings_dict},
                batch_size=self.settings.llm.max_concurrency,
                **actor_pool(ex.actors, ex.num_cpus, ex.num_gpus), **self.background,
            ).take_all()
        summaries = {row["hash"]: row["summary"] for row in results if not row["error"]}
        failed = len(results) - len(summaries)
        if failed:
            self.say(f"{failed} summaries failed; their descriptions stay unsummarised")
        self.report.summaries = len(summaries)
        router.add_summaries(summaries)

    def _embed_in_background(self, pool: EmbeddingPool, chunks: list[dict[str, Any]]) -> threading.Thread:
        """Embed and store the chunk vectors while the LLM extracts (errors surface in ``_embed``)."""

        def batches() -> Iterable[list[Item]]:
            for start in range(0, len(chunks), pool.batch_size):
                yield [chunk_vector_item(row) for row in chunks[start : start + pool.batch_size]]

        def work() -> None:
            try:
                self._embed_items(pool, batches(), StageProgress(self.say, "embedding chunks", len(chunks), "chunks"))
            except BaseException as error:  # noqa: BLE001 - re-raised by the main thread
                self._embed_error = error

        thread = threading.Thread(target=work, name="embed-chunks", daemon=True)
        thread.start()
        return thread

    def _embed_items(self, pool: EmbeddingPool, batches: Iterable[list[Item]], progress: StageProgress) -> None:
        """Embed ``batches`` (a bounded number in flight) and upsert their vectors."""
        for batch in batches:
            pool.submit(batch)
            for items, vectors in pool.completed(leave=pool.max_in_flight):
                self._write_vectors(items, vectors)
                progress.advance(len(items))
        for items, vectors in pool.completed():
            self._write_vectors(items, vectors)
            progress.advance(len(items))

    def _write_vectors(self, items: list[Item], vectors: Any) -> None:
        """Upsert vectors (from the chunk thread or the main one: one at a time)."""
        with self._write_lock:
            if self.writer is None:
                self.writer = self._vector_writer(int(vectors.shape[1]))
            else:  # opened early for the recorded dimension: the model must still give it
                manifests.check_embedding_dim(self.manifest, int(vectors.shape[1]), self.settings.embedding.model)
            for kind, kind_rows in vector_rows(items, list(vectors)).items():
                self.writer.upsert(kind, kind_rows)
            self.report.vectors_upserted += len(items)

    def _embed(self, pool: EmbeddingPool, chunk_thread: threading.Thread, router: GraphRouter) -> None:
        """Embed and store the changed entities and relations (beside the chunk thread, which
        may still wait for the vector store to open), then wait for the chunk vectors."""
        changes = router.take_changes()
        # shortest first across all calls: a batch of similar lengths pads little (random order: 1.7x slower)
        items = sorted(graph_vector_items(changes), key=lambda item: len(item["text"]))
        progress = StageProgress(self.say, "embedding entities and relations", len(items), "texts")
        batches = (items[start : start + pool.batch_size] for start in range(0, len(items), pool.batch_size))
        self._embed_items(pool, batches, progress)
        chunk_thread.join()
        if self._embed_error is not None:
            raise self._embed_error
        if changes["removed"]:
            self.writer = self.writer or self._vector_writer(self.manifest.embedding_dim)
            delete_graph_vectors(self.writer, changes["removed"])
        self._close_writer()  # flushed before the graph commits

    def _link_aliases(self, router: GraphRouter) -> None:
        """Link the run's new entities to their name variants (core.alias_rules); all of the
        graph's, the first time a workspace built before aliases existed is indexed into."""
        started = time.monotonic()
        self.report.alias_links = link_aliases(router, everything=not self.manifest.aliases_linked)
        self.manifest = self.manifest.model_copy(update={"aliases_linked": True})
        if self.report.alias_links:
            self.say(f"linked name variants: {self.report.alias_links} alias links ({time.monotonic() - started:.1f} s)")

    def _close_writer(self) -> None:
        if self.writer is not None and self.writer is not self.vectors:
            self.writer.close()
        self.writer = None

    def _vector_writer(self, dim: int) -> VectorWriter:
        manifests.check_embedding_dim(self.manifest, dim)
        self.manifest = self.manifest.model_copy(update={"embedding_dim": dim})
        if self.vectors is not None:
            return self.vectors
        vec = self.settings.vectors
        uri = self.settings.milvus_uri()
        if is_server_uri(uri):  # a server takes writes from any process: no owner actor to lose
            return open_store(self.settings, dim)
        actor = VectorStoreActor.options(num_cpus=0.1).remote(uri, dim, vec.collection_prefix, vec.token, vec.db_name)
        return ActorVectorWriter(actor)

    # ---- the run --------------------------------------------------------------------
    def run(self, paths: list[str]) -> IndexReport:
        """Index ``paths`` into the workspace and return what happened."""
        started = time.monotonic()
        inputs = list_input_files(paths, exclude=self.settings.workspace)  # before Ray: a wrong path fails fast
        files = inputs.files
        self.report.files = len(files)
        self.report.errors.extend(inputs.errors)
        if not files and not inputs.errors:
            raise FileNotFoundError(f"no files to index under {' '.join(paths)}")
        if not files:
            return self.report
        ensure_ray(self.settings)
        self.say(f"reading {len(files)} files" + (f" ({len(inputs.errors)} skipped: unsupported type)"
                                                  if inputs.errors else ""))
        self.local = local_stages.runs_locally(self.settings, files)
        self.report.stages = "driver" if self.local else "ray-data"
        if self.local:
            docs: ray.data.Dataset | list[dict[str, Any]] = local_stages.read_documents(files, self.display_names)
        else:
            docs = _read_documents(files, self.task_args, self.display_names)
        todo = self._select_documents(docs)
        self.report.docs_new = len(todo)
        if not todo:
            self.say(f"nothing new to index ({self.report.docs_skipped} documents already processed)")
            self.report.graph_version = self.manifest.graph_version
            self.report.entities, self.report.relations = self.manifest.entities, self.manifest.relations
            self.report.seconds = round(time.monotonic() - started, 2)
            return self.report
        # Started first, these load while the shards load theirs: the model, and (for a known
        # dimension) the vector store, which takes seconds for a Milvus Lite file of 0.5M rows.
        pool = (self.embedding_pool.lease() if self.embedding_pool is not None
                else EmbeddingPool(self.settings.embedding, self.niceness))
        router = None
        try:
            if self.manifest.embedding_dim is not None:
                self.writer = self._vector_writer(self.manifest.embedding_dim)
            router = self.router or GraphRouter(self.settings.workspace, self.settings.graph, self.settings.ray.namespace)
            chunks = self._chunk(docs, todo)
            self.report.chunks = len(chunks)
            self.say(f"{len(todo)} documents to index, {self.report.chunks} chunks")
            chunk_thread = self._embed_in_background(pool.lease(), chunks)  # its own batches in flight
            # A caller's router (the Serve app's) has readers: they see the graph of the last
            # finished run, published once it is committed (before its documents count as
            # processed), and a run that fails or is cancelled is undone (its extractions stay
            # cached, so running it again costs no LLM call). A run's own shards have no
            # readers until it ends.
            with router.job() if router is self.router else contextlib.nullcontext():
                try:
                    errors = self._extract(chunks, router)
                    self._summarize(router)
                    self._check_stop()
                except IndexCancelled:  # its documents are marked failed: run again to finish, or delete them
                    per_doc = Counter(row["doc_id"] for row in chunks)
                    self._record_documents(chunks, todo, {doc: [CANCELLED] * per_doc[doc] for doc in todo})
                    raise
                self._embed(pool, chunk_thread, router)
                self._link_aliases(router)
                self._commit_graph(router)
            self._record_documents(chunks, todo, errors)
        finally:
            pool.close()  # a caller's pool stays up: this run holds a lease of it
            self._close_writer()
            if router is not None and router is not self.router:
                router.close()
        self.report.seconds = round(time.monotonic() - started, 2)
        return self.report

    def _record_documents(self, chunks: list[dict[str, Any]], todo: dict, errors: dict[str, list[str]]) -> None:
        """Document statuses: processed, or failed with the first of their chunks' errors."""
        self.report.llm_tokens = self.processors.tokens if self.processors else 0
        per_doc = Counter(row["doc_id"] for row in chunks)
        changes = []
        for doc, row in todo.items():
            failed = errors.get(doc, [])
            error = ""
            if failed:
                error = (f"{len(failed)} of {per_doc[doc]} chunks failed (first: {failed[0]}); "
                         "index the document again to retry them (the chunks that succeeded are cached)")
                self.report.errors.append({"file_path": row["file_path"], "error": error})
            changes.append({
                "doc_id": doc, "file_path": row["file_path"], "chunks": per_doc[doc],
                "status": doc_status.FAILED if failed else doc_status.PROCESSED, "error": error,
            })
        self.report.docs_failed += sum(1 for c in changes if c["status"] == doc_status.FAILED)
        doc_status.update(self.workspace, changes)

    def _commit_graph(self, router: GraphRouter) -> None:
        """The shards' deltas, then the manifest's new graph version and counts (the commit
        point: a run killed before it leaves the graph as it was, and its documents unprocessed)."""
        extraction_cache.compact(self.workspace)
        self.manifest = router.commit(self.workspace, self.manifest)
        self.report.entities, self.report.relations = self.manifest.entities, self.manifest.relations
        self.report.graph_version = self.manifest.graph_version


def index_paths(
    paths: list[str], settings: Settings, progress: Progress | None = print_progress, **opened: Any
) -> IndexReport:
    """Index files or folders into ``settings.workspace`` (incremental and resumable).

    ``opened`` may pass ``router=``, ``vectors=`` and ``embedding_pool=`` that the caller
    keeps open, ``display_names=``, ``niceness=`` and ``stop=`` (see IndexRun).
    """
    return IndexRun(settings, progress, **opened).run(paths)
