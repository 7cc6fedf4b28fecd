"""Find input files and turn their bytes into document rows (or clear per-file errors).

Supported: .txt/.md (one document per file), .json (a list of strings or objects, or an
object mapping titles to texts), .jsonl (one string or object per line), .parquet (one
document per row), and .pdf .docx .pptx .xlsx .html/.htm (one document per file, converted
to text by ``converters``). Objects carry their text in one of TEXT_FIELDS; a title/id, when
present, becomes part of the document's file path so citations can name it.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lightrag_ray.core.ids import doc_id
from lightrag_ray.core.sources import Listed, normalise_source
from lightrag_ray.index.converters import CONVERTED_SUFFIXES, ConversionError, to_text

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst")
RECORD_SUFFIXES = (".json", ".jsonl", ".ndjson", ".parquet")
SUPPORTED_SUFFIXES = TEXT_SUFFIXES + RECORD_SUFFIXES + CONVERTED_SUFFIXES
TEXT_FIELDS = ("text", "content", "context", "page_content", "body")
NAME_FIELDS = ("id", "doc_id", "title", "name")


class DocumentError(ValueError):
    """A file that cannot become a document; the message says why and what to do."""


@dataclass
class InputFiles:
    """The files an indexing run reads, and those it cannot (as per-file errors)."""

    files: list[str] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    stats: dict[str, tuple[int, int]] = field(default_factory=dict)  # file -> (size, mtime in ns), from the listing

    def listed(self) -> list[Listed]:
        """The files with their normalised names, sizes and modification times (no file is opened)."""
        return [Listed(path, normalise_source(path), *self.stats[path]) for path in self.files]


def unsupported_error(path: str) -> dict[str, str]:
    """The per-file error of a file whose type cannot be indexed."""
    suffix = PurePosixPath(path).suffix.lower() or "(no extension)"
    return {"file_path": path, "error": f"unsupported file type {suffix}: convert it to text "
            f"({' '.join(SUPPORTED_SUFFIXES)}) first"}


def _local(path: str) -> str | None:
    """The real local path of ``path`` (None for a remote URI)."""
    if "://" in path and not path.startswith("file://"):
        return None
    return os.path.realpath(path.removeprefix("file://"))


def _inside(path: str, folder: str | None) -> bool:
    real = _local(path)
    return folder is not None and real is not None and (real == folder or real.startswith(folder + os.sep))


def input_filesystem(path: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem of an input path (local, or a URI such as s3://...) and the path inside it."""
    return pafs.FileSystem.from_uri(path) if "://" in path else (pafs.LocalFileSystem(), path)


def read_input(path: str) -> bytes:
    """The bytes of one input file (local or URI)."""
    fs, inner = input_filesystem(path)
    with fs.open_input_stream(inner) as src:
        return src.read()


def list_input_files(paths: list[str], exclude: str | None = None) -> InputFiles:
    """Every file under ``paths`` (files or directories, local or URIs), sorted: supported
    ones to read, others as per-file errors. Hidden files are left out, and so is the
    folder ``exclude`` (the workspace) when it lies inside a folder given, so an index
    never reads its own files. Raises FileNotFoundError for a path that does not exist."""
    found = InputFiles()
    skip = _local(exclude) if exclude else None
    for path in paths:
        fs, inner = input_filesystem(path)
        info = fs.get_file_info(inner)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"input not found: {path}")
        prefix = path[: len(path) - len(inner)] if "://" in path else ""
        if info.type == pafs.FileType.File:
            entries = [(path, info)]
        else:
            own = None if _inside(path, skip) else skip  # a folder inside the workspace was asked for
            selector = pafs.FileSelector(inner, recursive=True)
            entries = [(prefix + e.path, e) for e in fs.get_file_info(selector) if e.type == pafs.FileType.File
                       and not _hidden(e.path[len(inner):]) and not _inside(prefix + e.path, own)]
        for entry, entry_info in entries:
            if entry.lower().endswith(SUPPORTED_SUFFIXES):
                found.files.append(entry)
                found.stats[entry] = (int(entry_info.size), int(entry_info.mtime_ns or 0))
            else:
                found.errors.append(unsupported_error(entry))
    found.files = sorted(dict.fromkeys(found.files))
    found.errors = sorted({e["file_path"]: e for e in found.errors}.values(), key=lambda e: e["file_path"])
    return found


def _hidden(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/") if part)


def decode_text(data: bytes) -> str:
    """Bytes -> text, or DocumentError for empty, binary or non-UTF-8 input."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16")
    elif b"\x00" in data[:8192]:
        raise DocumentError("binary file (NUL bytes found): convert it to text (.txt/.md) before indexing")
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DocumentError(
                f"not valid UTF-8 (byte {exc.start}): re-encode the file as UTF-8, "
                "e.g. `iconv -f latin1 -t utf-8 FILE`"
            ) from None
    if not text.strip():  # checked after decoding: a BOM alone is no text either
        raise DocumentError("empty document: the file has no text to index")
    return text


def _record_text(record: Any) -> tuple[str | None, str]:
    """(name, text) of one JSON/parquet record."""
    if isinstance(record, DocumentError):
        raise record
    if isinstance(record, str):
        return None, record
    if isinstance(record, list) and all(isinstance(part, str) for part in record):
        return None, "".join(record)
    if isinstance(record, dict):
        name = next((str(record[f]) for f in NAME_FIELDS if record.get(f) not in (None, "")), None)
        for field in TEXT_FIELDS:
            value = record.get(field)
            if isinstance(value, str):
                return name, value
            if isinstance(value, list) and all(isinstance(part, str) for part in value):
                return name, "".join(value)
    raise DocumentError(f"record has no text field (looked for {', '.join(TEXT_FIELDS)})")


def _json_line(line: str) -> Any:
    """One JSON Lines record, or the DocumentError that makes it an error row."""
    try:
        return json.loads(line)
    except ValueError as exc:
        return DocumentError(f"invalid JSON line: {exc}")


def _records(path: str, data: bytes) -> list[tuple[str | None, Any]]:
    """(name, record) pairs of a record file."""
    lower = path.lower()
    if lower.endswith(".parquet"):
        return [(None, row) for row in pq.read_table(io.BytesIO(data)).to_pylist()]
    text = decode_text(data)
    if lower.endswith((".jsonl", ".ndjson")):
        lines = [line for line in text.splitlines() if line.strip()]
        return [(None, _json_line(line)) for line in lines]
    parsed = json.loads(text)
    if isinstance(parsed, dict) and not any(f in parsed for f in TEXT_FIELDS):
        return [(str(title), value) for title, value in parsed.items()]
    return [(None, item) for item in (parsed if isinstance(parsed, list) else [parsed])]


def _row(text: str, file_path: str, error: str | None = None) -> dict[str, Any]:
    ident = doc_id(text) if error is None else doc_id(f"error:{file_path}")
    return {"doc_id": ident, "file_path": file_path, "text": text, "error": error}


def parse_file(path: str, data: bytes, name: str | None = None) -> list[dict[str, Any]]:
    """Document rows (doc_id, file_path, text, error) of one file; never raises.

    ``path``'s suffix says how to read the file; the rows' file_path is ``name`` (default:
    ``path``). A file that cannot be read, or of an unsupported type, yields one row with
    ``error`` set; a record file with some bad records yields error rows for those and
    documents for the rest.
    """
    name = path if name is None else name
    lower = path.lower()
    try:
        if not lower.endswith(SUPPORTED_SUFFIXES):
            return [_row("", name, unsupported_error(path)["error"])]
        if lower.endswith(CONVERTED_SUFFIXES):
            return [_row(to_text(PurePosixPath(lower).suffix, data), name)]
        if not lower.endswith(RECORD_SUFFIXES):
            return [_row(decode_text(data), name)]
        rows = []
        for index, (title, record) in enumerate(_records(path, data)):
            where = f"{name}#{title if title is not None else index}"
            try:
                record_name, text = _record_text(record)
                where = f"{name}#{record_name}" if record_name and title is None else where
                rows.append(_row(decode_text(text.encode("utf-8")), where))
            except DocumentError as exc:
                rows.append(_row("", where, str(exc)))
        return rows or [_row("", name, "no documents found in the file")]
    except (DocumentError, ConversionError) as exc:
        return [_row("", name, str(exc))]
    except (ValueError, OSError, RecursionError) as exc:  # json/parquet syntax errors, deep nesting
        return [_row("", name, f"cannot parse {name}: {exc}")]
