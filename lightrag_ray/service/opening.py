"""Opening a workspace: the one place that reconciles its manifest, its graph shards and its
vector store with the settings, for each kind of user.

- ``reader`` (a Serve ingress replica): the shards' READ operations (ShardReader) and, with a
  Milvus server, a searchable store; nothing is written.
- ``writer`` (an indexing run, the Serve app's workspace owner): the manifest created or
  checked against the settings, and the shard actors owned through a GraphRouter
  (``keep_alive``: detached shards that outlive a crashed owner, for the Serve app); given the
  embedder's dimension, also the vector store as a sink the embedding actors write to (a Milvus
  Lite file in its own owner actor, detached and named with ``keep_alive``).
- ``session`` (one process answering queries, e.g. the CLI): the writer's router (the process
  owns the shards), the readers' lookups and the vector store opened in this process.

In every role the workspace's recorded shard count wins over the settings'.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal

from lightrag_ray.config import Settings
from lightrag_ray.core.errors import required
from lightrag_ray.ray_runtime import ensure_ray, named_actor
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph.reader import ShardReader
from lightrag_ray.storage.graph.writer import GraphRouter
from lightrag_ray.storage.vector_contract import VectorStore
from lightrag_ray.storage.vector_owner import ActorVectorWriter, VectorSink, open_vector_sink
from lightrag_ray.storage.vectors import is_server_uri, open_store
from lightrag_ray.storage.workspace import Workspace

Role = Literal["reader", "writer", "session"]
ROLES: tuple[Role, ...] = ("reader", "writer", "session")


@dataclass
class OpenWorkspace:
    """What ``open_workspace`` opened; ``close`` releases what this process owns."""

    settings: Settings  # graph.num_shards: the workspace's own count
    workspace: Workspace
    manifest: manifests.Manifest
    router: GraphRouter | None = None  # writer, session: the shard actors, owned
    reader: ShardReader | None = None  # reader, session
    vectors: VectorStore | None = None  # session, a reader of a Milvus server (MilvusStore); a writer given a dimension
    sink: VectorSink | None = None  # a writer given a dimension: where embedding actors store vectors

    def graph_reader(self) -> ShardReader:
        """The readers' handle on the shards (opened for a reader or a session)."""
        return required(self.reader, "a graph reader (the workspace was opened as its writer)")

    def graph_writer(self) -> GraphRouter:
        """The writer's router (opened for a writer or a session)."""
        return required(self.router, "the shards' router (the workspace was opened as a reader)")

    def writer_sink(self) -> VectorSink:
        """Where the embedding actors store vectors (opened for a writer given a dimension)."""
        return required(self.sink, "a vector sink (open the workspace as its writer with embedding_dim)")

    def vector_store(self) -> VectorStore:
        """The vector store opened in this process."""
        return required(self.vectors, "a vector store in this process")

    # ---- as an indexing run's target (index.target.RunTarget): a writer's parts its caller keeps
    @property
    def kept(self) -> bool:
        """Open before the run and after it (the Serve app's owner: readers see its graph)."""
        return True

    def read_manifest(self) -> manifests.Manifest:
        """The manifest as it is now (deletes and graph edits commit between runs), checked
        against the settings; kept as ``manifest``."""
        self.manifest = manifests.open_for_settings(self.workspace, self.settings)
        return self.manifest

    def graph(self, chunks: int, manifest: manifests.Manifest) -> GraphRouter:
        """The router opened with the workspace (its shard count is recorded)."""
        return self.graph_writer()

    def vector_sink(self, dim: int, actor_options: dict[str, Any]) -> VectorSink:
        """The sink opened with the workspace (for the embedder's dimension it was opened with)."""
        return self.writer_sink()

    def finish_vectors(self) -> None:
        """The run's vectors flushed: the store stays open for the lookups."""
        self.writer_sink().flush()

    def close(self) -> None:
        """Stop the shard actors this process owns and release the vector store."""
        if self.router is not None:
            self.router.close()
        if self.vectors is not None:
            self.vectors.close()


def vector_owner_name(workspace_uri: str) -> str:
    """Ray actor name of the owner of a workspace's Milvus Lite file (kept by the Serve app)."""
    return f"vectors-{hashlib.md5(workspace_uri.encode()).hexdigest()[:10]}"


def kept_vector_sink(settings: Settings, dim: int, keep_alive: bool) -> tuple[VectorSink, VectorStore]:
    """A writer's vector sink and store: a Milvus server's client, or the actor owning the Lite
    file, searchable (it answers the Serve app's lookups); ``keep_alive``: detached and named, so
    it outlives a crashed owner, whose successor attaches to it."""
    if is_server_uri(settings.milvus_uri()) or not keep_alive:
        return open_vector_sink(settings, dim, searchable=True)
    name, namespace = vector_owner_name(settings.workspace), settings.ray.namespace
    actor = named_actor(name, namespace)
    if actor is None:  # none yet
        return open_vector_sink(settings, dim, searchable=True,
                                actor_options={"name": name, "namespace": namespace, "lifetime": "detached",
                                               "max_restarts": -1, "max_task_retries": -1})
    return VectorSink.of(settings, dim, actor), ActorVectorWriter(actor)


def with_shards(settings: Settings, num_shards: int) -> Settings:
    """``settings`` with ``num_shards`` graph shards."""
    if num_shards == settings.graph.num_shards:
        return settings
    return settings.model_copy(update={"graph": settings.graph.model_copy(update={"num_shards": num_shards})})


def bound_settings(settings: Settings) -> Settings:
    """``settings`` with ``graph.num_shards`` the workspace's own count (its manifest's), for
    opening its shards outside ``open_workspace``; unchanged when it records none yet."""
    recorded = manifests.load(Workspace(settings.workspace)).num_shards
    return settings if recorded is None else with_shards(settings, recorded)


def open_workspace(settings: Settings, role: Role, *, keep_alive: bool = False,
                   embedding_dim: int | None = None, chunks: int = 0, workspace: Workspace | None = None,
                   manifest: manifests.Manifest | None = None) -> OpenWorkspace:
    """Open ``settings.workspace`` for ``role`` (see the module doc). ``embedding_dim``: the
    embedder's dimension, checked against the manifest's; given to a writer, it also opens the
    vector store (a reader's or session's store takes the manifest's when it is not given).
    ``chunks``: how many chunks the writer is about to index, from which ``graph.num_shards:
    auto`` picks the shard count of a new workspace (which the writer records). ``workspace`` and
    ``manifest``: the caller's, already opened for this role (an indexing run's), not read again."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; one of {', '.join(ROLES)}")
    workspace = workspace or Workspace(settings.workspace)
    if manifest is None:
        manifest = (manifests.open_for_settings(workspace, settings) if role == "writer"
                    else manifests.load(workspace))
    if role == "session" and not manifest.is_indexed():
        raise FileNotFoundError(f"{settings.workspace} holds no index yet; run `lightrag-ray index` first")
    if embedding_dim is not None:
        manifests.check_embedding_dim(manifest, embedding_dim, settings.embedding.model)
    num_shards = manifest.num_shards
    if num_shards is None:  # a new workspace
        num_shards = settings.graph.shards_for(chunks)
        manifest = manifest.model_copy(update={"num_shards": num_shards})
        if role == "writer":
            manifests.save(workspace, manifest)
    settings = with_shards(settings, num_shards)
    opened = OpenWorkspace(settings, workspace, manifest)
    ensure_ray(settings)
    # A writer's store is opened here only for a caller that keeps it (the Serve app's owner);
    # an indexing run opens its own sink once it knows the dimension (index.pipeline).
    dim = embedding_dim if role == "writer" else embedding_dim or manifest.embedding_dim
    try:
        if role in ("writer", "session"):
            opened.router = GraphRouter(settings.workspace, settings.graph, settings.ray.namespace, keep_alive=keep_alive)
        if role in ("reader", "session"):
            opened.reader = ShardReader.for_settings(settings)
        if role == "writer" and dim is not None:
            opened.sink, opened.vectors = kept_vector_sink(settings, dim, keep_alive)
        elif dim is not None and (role == "session" or is_server_uri(settings.milvus_uri())):
            opened.vectors = open_store(settings, dim)
    except BaseException:
        opened.close()
        raise
    return opened
