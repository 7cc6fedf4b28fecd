"""Indexing files into a workspace opened as its writer (the CLI's `index`, the Python API)."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.index.pipeline import IndexReport, IndexRun
from lightrag_ray.index.progress import Progress, print_progress
from lightrag_ray.service.opening import OpenWorkspace, open_workspace
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph.writer import GraphRouter
from lightrag_ray.storage.vector_contract import VectorStore
from lightrag_ray.storage.vector_owner import VectorSink, open_vector_sink
from lightrag_ray.storage.workspace import Workspace


class WriterOnDemand:
    """A workspace opened as its writer for one run (index.target.RunTarget), part by part as
    the run first needs each: nothing is read or started before the run asks (a run with nothing
    new starts no shard actor). ``close`` releases what was opened."""

    kept = False  # no readers: the run writes the shards directly, and closes the vector store to index it

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.opened: OpenWorkspace | None = None
        self.vectors: VectorStore | None = None  # the owner of the run's vector sink

    @functools.cached_property
    def workspace(self) -> Workspace:
        """The workspace's files (built on first use: its folder is created then)."""
        return Workspace(self.settings.workspace)

    def read_manifest(self) -> manifests.Manifest:
        """The manifest, created from the settings for a new workspace, else checked against them."""
        return manifests.open_for_settings(self.workspace, self.settings)

    def graph(self, chunks: int, manifest: manifests.Manifest) -> GraphRouter:
        """The shards, the workspace opened as its writer (with this Workspace and ``manifest``)."""
        if self.opened is None:
            self.opened = open_workspace(self.settings, "writer", chunks=chunks, workspace=self.workspace,
                                         manifest=manifest)
        return self.opened.graph_writer()

    def vector_sink(self, dim: int, actor_options: dict[str, Any]) -> VectorSink:
        """A vector store opened for the run (a Milvus Lite file in an owner actor, or a server's client)."""
        sink, self.vectors = open_vector_sink(self.settings, dim, actor_options=actor_options)
        return sink

    def finish_vectors(self) -> None:
        """The store closed: a Milvus Lite owner flushes and indexes the run's vectors first."""
        if self.vectors is not None:
            self.vectors.close()
            self.vectors = None

    def close(self) -> None:
        """Release the vector store and stop the shard actors, if the run opened them."""
        self.finish_vectors()
        if self.opened is not None:
            self.opened.close()
            self.opened = None


def index_paths(paths: list[str], settings: Settings, progress: Progress | None = print_progress,
                opened: OpenWorkspace | None = None, **options: Any) -> IndexReport:
    """Index files or folders into ``settings.workspace`` (incremental and resumable).

    ``opened``: the workspace as its writer, kept open by the caller (the Serve app's: its
    readers see the run once it commits); None: opened on demand for the run, and closed at its
    end. ``options``: IndexRun's (``embedding_pool=``, ``display_names=``, ``niceness=``,
    ``stop=``, ``prune=``, ...).
    """
    if opened is not None:
        if opened.settings.workspace != settings.workspace:
            raise ValueError(f"the opened workspace is {opened.settings.workspace}, not {settings.workspace}")
        return IndexRun(opened, progress, **options).run(paths)
    with contextlib.closing(WriterOnDemand(settings)) as own:
        return IndexRun(own, progress, **options).run(paths)


def preview_paths(paths: list[str], settings: Settings, prune: bool = False, relative_to: str | None = None
                  ) -> dict[str, Any]:
    """What indexing ``paths`` would add, replace, move and remove (``index --dry-run``), with
    ``documents``: the rows (doc_id, file_path, error, source) of the files it would read;
    changes nothing."""
    changes, docs = IndexRun(WriterOnDemand(settings), None, prune=prune, relative_to=relative_to).preview(paths)
    keep = ("doc_id", "file_path", "error", "source")
    return {**changes, "documents": [{key: doc[key] for key in keep} for doc in docs]}
