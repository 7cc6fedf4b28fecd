"""A shard replica's write-ahead log: every write since the last commit, so a replica that Ray
restarts (a lost node, a crash) ends in the same state without anyone replaying to it.

Writes reach a shard from many processes (extraction workers merge their records straight into
the shards, the driver adds summaries and alias links), so no single caller could replay them.
Each write is appended as one file, ``graph/<shard folder>/wal-r<replica>/<writer>-<seq>.pkl``
(the operation's name and arguments), before it is applied. ``writer`` names the writer session
(the GraphRouter that started the actor): a restarted actor, which gets the same constructor
arguments, replays its session's files in order; an actor of a new session deletes the files a
dead one left (a killed run's uncommitted writes never count). A commit or a rollback clears the
log. Every write is idempotent (merges are keyed by source chunk), so a write both logged and
retried by Ray after a restart changes nothing twice.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pyarrow.fs as pafs

from lightrag_ray.storage.workspace import Workspace


class WriteLog:
    """The log of one replica of one shard, for one writer session."""

    def __init__(self, workspace: Workspace, folder: str, replica: int, writer: str) -> None:
        self.workspace = workspace
        self.parts = ("graph", folder, f"wal-r{replica}")
        self.writer = writer
        self.next = 0

    def _files(self) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(self.workspace.path(*self.parts), allow_not_found=True)
        return [info for info in self.workspace.fs.get_file_info(selector)
                if info.type == pafs.FileType.File and info.base_name.endswith(".pkl")]

    def recover(self) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """(operation name, arguments) of this session's logged writes, in order; other
        sessions' files are deleted."""
        mine = []
        for info in self._files():
            writer, _, seq = info.base_name.removesuffix(".pkl").rpartition("-")
            if writer == self.writer:
                mine.append((int(seq), info.path))
            else:
                self.workspace.delete_file(info.path)
        for seq, path in sorted(mine):
            self.next = seq + 1
            with self.workspace.fs.open_input_stream(path) as src:
                yield pickle.loads(src.read())

    def append(self, name: str, args: tuple[Any, ...]) -> None:
        """Log one write (before it is applied)."""
        self.workspace.write_bytes(pickle.dumps((name, args), protocol=pickle.HIGHEST_PROTOCOL),
                                   *self.parts, f"{self.writer}-{self.next:012d}.pkl")
        self.next += 1

    def clear(self) -> None:
        """Forget every logged write (they were committed, or rolled back)."""
        for info in self._files():
            self.workspace.delete_file(info.path)
        self.next = 0
