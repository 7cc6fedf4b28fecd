"""Stage ``read``: input files (local or URIs) -> document rows (doc_id, file_path, text, error,
and the source fields of core.sources: source, kind, file, size, mtime_ns)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lightrag_ray.core.sources import FILE, TEXT, UPLOAD, Listed, record_source
from lightrag_ray.index.documents import parse_file, read_input

Row = dict[str, Any]


class ReadFiles:
    """File rows (``file_rows``) -> document rows; a file named in ``display_names`` (by its base
    name: an insert job's inbox copy) is recorded under the name given there instead of its path,
    with a source of ``display_kind``: inserted text (TEXT: the copy itself, so it never replaces
    another document) or an upload (UPLOAD: its name, so an upload of the same name replaces it).
    Never raises: a file that cannot become a document gives a row with ``error``."""

    def __init__(self, display_names: dict[str, str] | None = None, display_kind: str = TEXT,
                 relative_to: str | None = None) -> None:
        """``relative_to``: a folder whose files are named by their path inside it (a scanned
        input folder), still as file sources."""
        self.display_names = display_names or {}
        self.display_kind = display_kind
        self.folder = None if relative_to is None else relative_to.rstrip("/") + "/"

    def __call__(self, rows: list[Row]) -> list[Row]:
        docs = []
        for row in rows:
            name = self.display_names.get(row["path"].rsplit("/", 1)[-1])
            kind = FILE if name is None else self.display_kind
            if name is None and self.folder is not None and row["path"].startswith(self.folder):
                name = row["path"][len(self.folder):]
            display = row["path"] if name is None else name
            file = {FILE: row["file"], TEXT: f"{TEXT}:{row['file']}", UPLOAD: f"{UPLOAD}:{name}"}[kind]
            for doc in parse_file(row["path"], read_input(row["path"]), name):
                docs.append({**doc, "source": record_source(file, display, doc["file_path"]), "file": file,
                             "kind": kind, "size": row["size"], "mtime_ns": row["mtime_ns"]})
        return docs


def file_rows(files: list[Listed]) -> list[Row]:
    """The rows the read stage takes: each file's path, normalised name, size and mtime."""
    return [{"path": f.path, "file": f.file, "size": f.size, "mtime_ns": f.mtime_ns} for f in files]


def path_batches(rows: list[Row], batch_files: int) -> Iterator[list[Row]]:
    """File rows, ``batch_files`` at a time."""
    for start in range(0, len(rows), batch_files):
        yield rows[start : start + batch_files]
