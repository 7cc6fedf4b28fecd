"""The workspace an indexing run writes into, as its caller opened it. The run opens the parts
it needs through it (shards, vector sink) when a stage first needs them and closes none of
them: the caller does, having opened them."""

from __future__ import annotations

from typing import Any, Protocol

from lightrag_ray.config import Settings
from lightrag_ray.storage.graph.writer import GraphRouter
from lightrag_ray.storage.manifest import Manifest
from lightrag_ray.storage.vector_owner import VectorSink
from lightrag_ray.storage.workspace import Workspace


class RunTarget(Protocol):
    """A workspace opened as its writer: kept open between runs with readers (the Serve app's,
    service.opening.OpenWorkspace) or opened on demand for one run (service.indexing.WriterOnDemand)."""

    @property
    def settings(self) -> Settings:
        """The workspace's settings (``graph.num_shards``: its own count once it has one)."""

    @property
    def workspace(self) -> Workspace:
        """The workspace's files."""

    @property
    def kept(self) -> bool:
        """Readers see the graph while a run writes: the run writes in a job published at its
        commit, and its vectors are flushed, not closed, when it is done with them."""

    def read_manifest(self) -> Manifest:
        """The manifest, created or checked against the settings (a run reads it once)."""

    def graph(self, chunks: int, manifest: Manifest) -> GraphRouter:
        """The shards' router, opened on the first call; ``chunks``: how many the run indexes
        (picks the shard count of a new workspace, recorded in ``manifest``)."""

    def vector_sink(self, dim: int, actor_options: dict[str, Any]) -> VectorSink:
        """Where the embedding actors store vectors of dimension ``dim``; ``actor_options``: of a
        store owner opened for the run (its niceness)."""

    def finish_vectors(self) -> None:
        """The run has written its last vector: make them searchable (a kept store flushes; one
        opened for the run is closed, a Milvus Lite owner indexing them as it closes)."""
