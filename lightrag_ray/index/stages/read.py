"""Stage ``read``: input files (local or URIs) -> document rows (doc_id, file_path, text, error)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lightrag_ray.index.documents import parse_file, read_input

Row = dict[str, Any]


class ReadFiles:
    """(path) rows -> document rows; a file named in ``display_names`` (by its base name) is
    recorded under the name given there instead of its path. Never raises: a file that cannot
    become a document gives a row with ``error``."""

    def __init__(self, display_names: dict[str, str] | None = None) -> None:
        self.display_names = display_names or {}

    def __call__(self, rows: list[Row]) -> list[Row]:
        return [doc for row in rows for doc in parse_file(
            row["path"], read_input(row["path"]), self.display_names.get(row["path"].rsplit("/", 1)[-1]))]


def path_batches(paths: list[str], batch_files: int) -> Iterator[list[Row]]:
    """(path) rows, ``batch_files`` at a time."""
    for start in range(0, len(paths), batch_files):
        yield [{"path": path} for path in paths[start : start + batch_files]]
