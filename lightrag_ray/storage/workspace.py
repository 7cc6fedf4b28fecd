"""The workspace: Parquet tables and a manifest under a local path or pyarrow URI.

    docs/docs.parquet          doc_id, file_path, status, error, chunks, content_hash, updated
    chunks/part-*.parquet      chunk rows (deduplicated by chunk_id on read)
    extractions/part-*.parquet the LLM cache: chunk_id, fingerprint, entities/relations JSON
    graph/shard-KKKK-of-NNNN/  a base plus one delta per committed job (storage/graph/snapshot.py)
    manifest.json              see storage/manifest.py
"""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


class Workspace:
    """Read and write the workspace tables; every write is atomic per file."""

    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/")
        if "://" in self.uri and not self.uri.startswith("file://"):
            self.fs, self.root = pafs.FileSystem.from_uri(self.uri)
        else:
            self.fs, self.root = pafs.LocalFileSystem(), self.uri.removeprefix("file://")
        self.fs.create_dir(self.root, recursive=True)

    def path(self, *parts: str) -> str:
        """Path of a file or folder inside the workspace."""
        return "/".join([self.root, *parts])

    def exists(self, *parts: str) -> bool:
        return self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound

    # ---- files ------------------------------------------------------------------
    def write_bytes(self, data: bytes, *parts: str) -> None:
        """Write a file atomically (temporary name, then rename)."""
        target = self.path(*parts)
        self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        tmp = f"{target}.tmp-{uuid.uuid4().hex}"
        with self.fs.open_output_stream(tmp) as out:
            out.write(data)
        self.fs.move(tmp, target)

    def read_bytes(self, *parts: str) -> bytes | None:
        if not self.exists(*parts):
            return None
        with self.fs.open_input_stream(self.path(*parts)) as src:
            return src.read()

    def write_rows(self, rows: list[dict[str, Any]], *parts: str, schema: pa.Schema | None = None) -> None:
        """Write rows as one Parquet file (atomically)."""
        table = pa.Table.from_pylist(rows, schema=schema)
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        self.write_bytes(sink.getvalue().to_pybytes(), *parts)

    def append_rows(self, rows: list[dict[str, Any]], *table: str, schema: pa.Schema | None = None) -> None:
        """Add a part file to an append-only table (a folder: ``table``'s parts joined)."""
        if rows:
            self.write_rows(rows, *table, f"part-{uuid.uuid4().hex}.parquet", schema=schema)

    def list_files(self, *parts: str, suffix: str = ".parquet") -> list[str]:
        """Full paths of the files ending in ``suffix`` of a table (a file, or a folder of parts)."""
        target = self.path(*parts)
        info = self.fs.get_file_info(target)
        if info.type == pafs.FileType.NotFound:
            return []
        if info.type == pafs.FileType.File:
            return [target]
        selector = pafs.FileSelector(target, recursive=False)
        return sorted(f.path for f in self.fs.get_file_info(selector) if f.path.endswith(suffix))

    def delete_file(self, full_path: str) -> None:
        self.fs.delete_file(full_path)

    def read_rows(self, *parts: str) -> list[dict[str, Any]]:
        """All rows of a Parquet file or of every part file in a folder ([] if absent)."""
        files = self.list_files(*parts)
        rows: list[dict[str, Any]] = []
        for name in files:
            with self.fs.open_input_file(name) as src:
                rows.extend(pq.read_table(src).to_pylist())
        return rows
