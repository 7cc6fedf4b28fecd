"""An indexing run's scratch tables, ``runs/<run_id>/`` in the workspace.

The workers of a run write here what the driver must not carry: the chunk rows the run cut
(``chunks/``, read back by its extraction stage), the documents it saw (``documents/``) and
the outcome of every chunk (``outcomes/``). The commit turns them into document statuses and
moves the chunk rows into the workspace's chunks table; a run that dies leaves its folder,
which the next run removes (its extractions are cached in ``extractions/``, which is what
resuming needs).
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from lightrag_ray.storage.workspace import Workspace

RUNS = "runs"
DOCUMENTS_SCHEMA = pa.schema([("doc_id", pa.string()), ("file_path", pa.string()), ("chunks", pa.int64()),
                              ("error", pa.string()), ("content_summary", pa.string()), ("content_length", pa.int64())])
OUTCOMES_SCHEMA = pa.schema([("chunk_id", pa.string()), ("doc_id", pa.string()), ("error", pa.string())])


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]


class RunFiles:
    """The scratch tables of run ``run_id`` (picklable: workers write them). ``workspace``: the
    run's open Workspace in its own process; a worker opens its own once."""

    def __init__(self, workspace_uri: str, run_id: str, workspace: Workspace | None = None) -> None:
        self.workspace_uri = workspace_uri
        self.run_id = run_id
        self._workspace = workspace

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_workspace": None}

    @property
    def workspace(self) -> Workspace:
        if self._workspace is None:
            self._workspace = Workspace(self.workspace_uri)
        return self._workspace

    def folder(self, table: str) -> str:
        return self.workspace.path(RUNS, self.run_id, table)

    def append(self, table: str, rows: list[dict[str, Any]], schema: pa.Schema | None = None) -> None:
        """Add a part file to one of the run's tables."""
        self.workspace.append_rows(rows, RUNS, self.run_id, table, schema=schema)

    def parts(self, table: str) -> list[str]:
        """Paths of the part files of one of the run's tables."""
        return self.workspace.list_files(RUNS, self.run_id, table)

    def read(self, table: str, schema: pa.Schema, columns: list[str] | None = None) -> pa.Table:
        """One of the run's tables (empty when nothing was written to it)."""
        parts = self.parts(table)
        if not parts:
            return schema.empty_table().select(columns or schema.names)
        return pads.dataset(parts, schema=schema, filesystem=self.workspace.fs, format="parquet").to_table(columns=columns)

    def adopt_chunks(self, table: str = "chunks") -> None:
        """Move the run's chunk parts into the workspace's chunks table (at its commit)."""
        workspace = self.workspace
        workspace.fs.create_dir(workspace.path("chunks"), recursive=True)
        for path in self.parts(table):
            workspace.fs.move(path, workspace.path("chunks", f"part-{self.run_id}-{path.rsplit('/', 1)[-1]}"))

    def remove(self) -> None:
        """Delete the run's folder."""
        workspace = self.workspace
        if workspace.exists(RUNS, self.run_id):
            workspace.fs.delete_dir(workspace.path(RUNS, self.run_id))


def remove_stale_runs(workspace: Workspace, keep: str) -> None:
    """Delete the folders of runs other than ``keep`` (runs that died; one writer at a time)."""
    selector = pafs.FileSelector(workspace.path(RUNS), allow_not_found=True)
    for info in workspace.fs.get_file_info(selector):
        if info.type == pafs.FileType.Directory and info.base_name != keep:
            workspace.fs.delete_dir(info.path)


def stale_chunk_parts(workspace: Workspace, keep: str) -> list[str]:
    """The chunk parts of runs other than ``keep`` (runs that died: their chunks' extractions
    are cached, and migrating the cache needs their texts)."""
    selector = pafs.FileSelector(workspace.path(RUNS), allow_not_found=True)
    found = []
    for info in workspace.fs.get_file_info(selector):
        if info.type == pafs.FileType.Directory and info.base_name != keep:
            found += workspace.list_files(RUNS, info.base_name, "chunks")
    return found
