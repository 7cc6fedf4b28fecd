"""Indexing files into a workspace opened as its writer (the CLI's `index`, the Python API)."""

from __future__ import annotations

from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.index.pipeline import IndexReport, IndexRun
from lightrag_ray.index.progress import Progress, print_progress
from lightrag_ray.service.opening import open_workspace
from lightrag_ray.storage.graph.writer import GraphRouter
from lightrag_ray.storage.manifest import Manifest
from lightrag_ray.storage.workspace import Workspace


def _writer_graph(settings: Settings, chunks: int, workspace: Workspace, manifest: Manifest) -> GraphRouter:
    """The run's own shards: the workspace opened as its writer, with the run's Workspace and manifest."""
    return open_workspace(settings, "writer", chunks=chunks, workspace=workspace, manifest=manifest).graph_writer()


def index_paths(
    paths: list[str], settings: Settings, progress: Progress | None = print_progress, **opened: Any
) -> IndexReport:
    """Index files or folders into ``settings.workspace`` (incremental and resumable).

    ``opened`` may pass ``router=``, ``vectors=``, ``workspace=`` and ``embedding_pool=`` that the
    caller keeps open, ``display_names=``, ``niceness=``, ``stop=`` and ``prune=`` (see IndexRun). Without a
    ``router`` the run opens the workspace as its writer once it has documents to index, and
    stops the shard actors at its end.
    """
    opened.setdefault("open_graph", _writer_graph)
    return IndexRun(settings, progress, **opened).run(paths)


def preview_paths(paths: list[str], settings: Settings, prune: bool = False, relative_to: str | None = None
                  ) -> dict[str, Any]:
    """What indexing ``paths`` would add, replace, move and remove (``index --dry-run``), with
    ``documents``: the rows (doc_id, file_path, error, source) of the files it would read;
    changes nothing."""
    changes, docs = IndexRun(settings, None, prune=prune, relative_to=relative_to).preview(paths)
    keep = ("doc_id", "file_path", "error", "source")
    return {**changes, "documents": [{key: doc[key] for key in keep} for doc in docs]}
