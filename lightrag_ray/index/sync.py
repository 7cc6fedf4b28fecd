"""The sync side of an indexing run, in the driver (metadata only; core.sources decides).

1. ``SourceSync(...)``: from the listing and the sources table, the files to read (new, changed,
   failed before) and the recorded files under the given paths that are gone; files whose size
   and modification time did not change are not opened.
2. ``plan(run)``, once the files read are chunked: the sync plan from the run's ``sources``
   table; the chunk rows of the documents that leave; the documents re-pointed to another file
   path (a move), whose chunk rows go through the run again with their new path (their texts
   are cached, so no LLM call).
3. The run removes ``graph_chunks`` from the shards and ``vector_chunks`` from Milvus inside the
   same write job that merges the new versions, and commits them together (with readers, the
   vectors are retired at the new version and deleted once it is published: index.pipeline).
4. ``finish()``, after the commit: the old chunk rows out of the parts that hold them, the
   removed documents out of the status table, the new sources table, the last sync's summary.

Every step can be repeated: a run killed before ``finish`` leaves the sources table as it was,
so running it again makes the same plan and the idempotent removals and merges change nothing
twice.
"""

from __future__ import annotations

from typing import Any

from lightrag_ray.core.sources import FILE, SyncPlan, normalise_source, plan_reads, plan_sync, under
from lightrag_ray.index.documents import InputFiles
from lightrag_ray.index.stages.chunk import PART_ROWS
from lightrag_ray.index.stages.read import file_rows
from lightrag_ray.storage import chunk_table, doc_status, sources
from lightrag_ray.storage.run_files import DOCUMENTS_SCHEMA, RunFiles
from lightrag_ray.storage.workspace import Workspace

Row = dict[str, Any]
REPORTED_SOURCES = 50  # sources named per outcome in a run's report and in `status` (all in --dry-run)


class SourceSync:
    """One run's sync of the sources under ``paths`` (see the module doc)."""

    def __init__(self, workspace: Workspace, paths: list[str], inputs: InputFiles, prune: bool) -> None:
        self.workspace = workspace
        self.prune = prune
        self.docs = doc_status.load(workspace)
        roots = [normalise_source(path) for path in paths]
        recorded = sources.load(workspace)
        self.known = recorded + sources.adopted(self.docs, recorded, roots)
        settled = {doc for doc, row in self.docs.items() if row["status"] == doc_status.PROCESSED}
        listed = inputs.listed()
        self.to_read, alone = plan_reads(listed, self.known, settled)
        self.alone = len(alone)
        alone_files = {item.file for item in alone}
        self.alone_docs = len({row["doc_id"] for row in self.known if row["file"] in alone_files})
        present = {item.file for item in listed}
        self.missing = {row["file"] for row in self.known
                        if row["kind"] == FILE and row["file"] not in present and under(row["file"], roots)}
        self.result = SyncPlan()
        self.dropped: list[Row] = []  # stored chunk rows (id, part) that leave the chunks table
        self.graph_chunks: list[str] = []  # chunk ids whose mentions leave the graph before the merge
        self.vector_chunks: list[str] = []  # chunk ids whose vectors leave Milvus
        self.moved_docs: set[str] = set()  # documents re-pointed to another file path

    @property
    def files(self) -> list[Row]:
        """The file rows the run reads."""
        return file_rows(self.to_read)

    @property
    def removes(self) -> bool:
        """Whether the graph or Milvus lose anything in this run."""
        return bool(self.graph_chunks)

    def preview(self, docs: list[Row]) -> SyncPlan:
        """The plan of this sync without doing it (``index --dry-run``), from the document rows
        of the files it reads (read and hashed by the caller); nothing is written."""
        seen = [{name: doc[name] for name in sources.SCHEMA.names} for doc in docs]
        return plan_sync(self.known, seen, self.missing, self.prune, self.alone)

    def plan(self, run: RunFiles) -> int:
        """The plan, once the run's files are chunked; the re-pointed documents' chunk rows are
        added to the run's tables. Returns the chunks added."""
        seen = run.read("sources", sources.SCHEMA).to_pylist()
        self.result = plan_sync(self.known, seen, self.missing, self.prune, self.alone)
        chunked = set(run.read("documents", DOCUMENTS_SCHEMA, ["doc_id"])["doc_id"].to_pylist())
        paths = self.result.file_paths
        # stored rows only of documents that leave or were indexed before (never of the run's new
        # ones: a one-document insert must not scan the chunk table)
        stored = chunk_table.chunks_of(self.workspace, self.result.removed_docs | (set(paths) - chunked))
        # re-pointed: a document whose file path changed, or with chunk rows under another path
        # (a run killed after its commit, before its chunk rows were moved)
        misplaced = {row["doc_id"] for row in stored if row["doc_id"] in paths and row["file_path"] != paths[row["doc_id"]]}
        moved = {doc: path for doc, path in paths.items()
                 if doc not in chunked and self.docs.get(doc, {}).get("status") == doc_status.PROCESSED
                 and (self.docs[doc]["file_path"] != path or doc in misplaced)}
        removed = [row for row in stored if row["doc_id"] in self.result.removed_docs]
        stored = [row for row in stored if row["doc_id"] in moved]
        self.dropped = removed + stored
        self.vector_chunks = sorted({row["chunk_id"] for row in removed})
        self.graph_chunks = sorted({row["chunk_id"] for row in self.dropped})
        rows = list({row["chunk_id"]: {**{k: v for k, v in row.items() if k != chunk_table.PART},
                                       "file_path": moved[row["doc_id"]]} for row in stored}.values())
        for start in range(0, len(rows), PART_ROWS):
            run.append("chunks", rows[start : start + PART_ROWS])
        run.append("documents", [{**{k: self.docs[doc].get(k) for k in DOCUMENTS_SCHEMA.names}, "file_path": path,
                                  "error": ""} for doc, path in moved.items()], DOCUMENTS_SCHEMA)
        self.moved_docs = set(moved)
        return len(rows)

    def finish(self, llm: dict[str, Any]) -> None:
        """After the commit: the chunks table, the status table and the sources table follow
        (``llm``: the run's LLM usage, for the last sync's record)."""
        chunk_table.drop_rows(self.workspace, self.dropped)
        gone = self.result.removed_docs & set(self.docs)
        if gone:
            doc_status.remove(self.workspace, gone)
        sources.save(self.workspace, self.result.sources)
        sources.save_last_sync(self.workspace, self.summary(), llm)

    def summary(self, limit: int | None = REPORTED_SOURCES) -> dict[str, Any]:
        """Counts per outcome and the sources of each (the first ``limit``)."""
        found = self.result.summary()
        lists = {key: value for key, value in found.items() if isinstance(value, list)}
        return {**{key: len(value) if isinstance(value, list) else value for key, value in found.items()},
                "sources": {key: value[:limit] for key, value in lists.items()}}
