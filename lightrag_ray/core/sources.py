"""Where documents come from, and what a sync changes (pure logic over plain rows).

A *source* is one file or object (or one record of a record file, or one upload) and names
the document its content makes (``doc_id``, a content hash). Two sources with the same content
share one document; a document lives while at least one source names it. Running ``index``
again over the same paths compares the listing with the sources recorded:

- a file whose size and modification time did not change is not read (``plan_reads``);
- a file that was read maps its sources to new documents (``plan_sync``): an edited one
  replaces its old version, a new file naming a known document re-points it (a move, a
  copy), a file that failed before replaces its error;
- a recorded file under the given paths that is gone is removed with ``prune`` (or
  re-pointed when its content turned up elsewhere in the same run, a move); a record gone
  from a record file that was read is removed;
- the documents no source names any more are removed.

A document's file path (what citations show) is the smallest path of its sources, which is
also what indexing the final corpus from scratch records (files are read in sorted order).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]
FILE, UPLOAD, TEXT = "file", "upload", "text"  # a scanned or listed file; an uploaded file; inserted text
UNKNOWN = -1  # size or modification time not recorded (a workspace adopted from before sources)


def normalise_source(path: str) -> str:
    """One spelling per file: an absolute, normalised local path, or the URI as given (without
    a trailing slash; ``file://`` paths become local ones)."""
    if "://" in path and not path.startswith("file://"):
        return path.rstrip("/")
    return os.path.normpath(os.path.abspath(path.removeprefix("file://")))


def record_source(file: str, display: str, file_path: str) -> str:
    """The source of one document of ``file`` read under the name ``display``: the file itself,
    or ``file#KEY`` for the record ``display#KEY`` of a record file."""
    return file + file_path[len(display):] if file_path.startswith(display) else file


def under(file: str, roots: Iterable[str]) -> bool:
    """Whether ``file`` is one of ``roots`` (normalised) or lies inside one of them."""
    return any(file == root or file.startswith(root.rstrip("/") + "/") for root in roots)


@dataclass(frozen=True)
class Listed:
    """A file found by listing the given paths: its path as given (read by the run), its
    normalised name, size and modification time (nanoseconds)."""

    path: str
    file: str
    size: int
    mtime_ns: int


def plan_reads(listed: list[Listed], known: list[Row], settled: set[str]) -> tuple[list[Listed], list[Listed]]:
    """(files to read, files left alone): a file is left alone when it was recorded with the
    same size and modification time and every document its sources name is ``settled``
    (processed); anything else (new, changed, failed before, recorded without its size) is read."""
    recorded: dict[str, list[Row]] = {}
    for row in known:
        recorded.setdefault(row["file"], []).append(row)
    read: list[Listed] = []
    alone: list[Listed] = []
    for item in listed:
        rows = recorded.get(item.file, [])
        same = bool(rows) and all(r["size"] == item.size and r["mtime_ns"] == item.mtime_ns
                                  and r["size"] != UNKNOWN and r["doc_id"] in settled for r in rows)
        (alone if same else read).append(item)
    return read, alone


@dataclass
class SyncPlan:
    """What a sync does: the sources table after it, the documents no source names any more,
    each remaining touched document's file path, and what happened to every source."""

    sources: list[Row] = field(default_factory=list)
    removed_docs: set[str] = field(default_factory=set)
    file_paths: dict[str, str] = field(default_factory=dict)  # doc id -> its file path, for the docs touched
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)  # "old -> new"
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0

    def summary(self) -> dict[str, Any]:
        """Counts and the sources of each outcome (for reports, ``--dry-run`` and ``status``)."""
        return {"added": self.added, "replaced": self.replaced, "moved": self.moved, "removed": self.removed,
                "unchanged": self.unchanged, "documents_removed": len(self.removed_docs)}


def plan_sync(known: list[Row], seen: list[Row], missing_files: set[str], prune: bool, alone: int = 0) -> SyncPlan:
    """The sync of ``seen`` (the source rows of the files read) and of the ``missing_files``
    (recorded under the given paths, not listed) into the ``known`` sources. ``alone``: files
    left unread (counted as unchanged)."""
    plan = SyncPlan(unchanged=alone)
    read_files = {row["file"] for row in seen}
    before = {row["source"]: row for row in known}
    now = {row["source"]: row for row in seen}
    seen_docs = {row["doc_id"] for row in seen}
    gone = [row for row in known if row["file"] in missing_files]
    moved_from = {row["doc_id"]: row for row in gone if row["doc_id"] in seen_docs}
    for row in gone:
        if row["doc_id"] in moved_from:
            continue  # re-pointed below
        if prune:
            plan.removed.append(row["source"])
        else:
            now.setdefault(row["source"], row)
    for source, row in now.items():
        old = before.get(source)
        if old is None:
            origin = moved_from.get(row["doc_id"])
            if origin is not None:
                plan.moved.append(f"{origin['source']} -> {source}")
            else:
                plan.added.append(source)
        elif old["doc_id"] != row["doc_id"]:
            plan.replaced.append(source)
        elif row["file"] in read_files:
            plan.unchanged += 1
    plan.removed += [row["source"] for row in known if row["file"] in read_files and row["source"] not in now]
    kept = [row for row in known if row["file"] not in read_files and row["file"] not in missing_files]
    plan.sources = sorted([*kept, *now.values()], key=lambda row: row["source"])
    named = {row["doc_id"] for row in plan.sources}
    plan.removed_docs = {row["doc_id"] for row in known} - named
    touched = ({row["doc_id"] for row in seen} | {row["doc_id"] for row in gone}) - plan.removed_docs
    for row in plan.sources:
        if row["doc_id"] in touched:
            current = plan.file_paths.get(row["doc_id"])
            if current is None or row["file_path"] < current:
                plan.file_paths[row["doc_id"]] = row["file_path"]
    return plan
