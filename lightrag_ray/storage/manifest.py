"""The workspace manifest (``manifest.json``): what the workspace was built with and the
state of its graph. Read and written only here."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from lightrag_ray.config import ChunkingConfig, Settings
from lightrag_ray.storage.workspace import Workspace

SCHEMA_VERSION = 1
FILE = "manifest.json"
# Settings a workspace is bound to: changing one would mix incompatible data.
BINDING_FIELDS = ("embedding_model", "chunking", "num_shards")


class WorkspaceMismatchError(RuntimeError):
    """The workspace was built with settings that cannot be mixed with the current ones."""


class Manifest(BaseModel):
    """Everything ``manifest.json`` records; unknown keys of newer versions are ignored."""

    model_config = ConfigDict(extra="ignore")

    schema_version: int = SCHEMA_VERSION
    embedding_model: str | None = None
    embedding_dim: int | None = None
    chunking: ChunkingConfig | None = None
    num_shards: int | None = None
    graph_version: int = 0
    entities: int = 0
    relations: int = 0
    aliases_linked: bool = False  # every entity went through an alias pass (False: built before aliases existed)

    def is_indexed(self) -> bool:
        """Whether an indexing run has stored vectors (so queries can open it)."""
        return self.embedding_dim is not None


def settings_manifest(settings: Settings) -> Manifest:
    """The binding fields of a manifest built with ``settings``."""
    return Manifest(
        embedding_model=f"{settings.embedding.backend}:{settings.embedding.model}",
        chunking=settings.chunking,
        num_shards=None if settings.graph.num_shards == "auto" else settings.graph.num_shards,
    )


def exists(workspace: Workspace) -> bool:
    """Whether the workspace has a manifest (anything was ever indexed into it)."""
    return workspace.exists(FILE)


def load(workspace: Workspace) -> Manifest:
    """The manifest, or an empty one when the workspace has none yet."""
    data = workspace.read_bytes(FILE)
    return Manifest.model_validate(json.loads(data)) if data else Manifest()


def save(workspace: Workspace, manifest: Manifest) -> None:
    """Write the manifest atomically."""
    data: dict[str, Any] = manifest.model_dump(mode="json")
    workspace.write_bytes(json.dumps(data, indent=2, sort_keys=True).encode(), FILE)


def open_for(workspace: Workspace, wanted: Manifest) -> Manifest:
    """The workspace's manifest, created from ``wanted`` if absent; raises
    WorkspaceMismatchError when a binding field was recorded with another value."""
    if not exists(workspace):
        save(workspace, wanted)
        return wanted
    manifest = load(workspace)
    for name in BINDING_FIELDS:
        recorded, asked = getattr(manifest, name), getattr(wanted, name)
        if recorded is not None and asked is not None and recorded != asked:
            fix = (f"Use the same setting, or move the graph with `lightrag-ray reshard --workspace {workspace.uri} "
                   f"--shards {asked}`." if name == "num_shards" else "Use the same setting, or index into a new workspace.")
            raise WorkspaceMismatchError(
                f"workspace {workspace.uri} was built with {name}={_shown(recorded)}, but the current "
                f"settings say {_shown(asked)}. {fix}"
            )
    return manifest


def open_for_settings(workspace: Workspace, settings: Settings) -> Manifest:
    """The manifest a writer with ``settings`` works with (``open_for`` their binding fields)."""
    return open_for(workspace, settings_manifest(settings))


def check_embedding_dim(manifest: Manifest, dim: int, model: str | None = None) -> None:
    """Refuse an embedder whose dimension differs from the one the vectors were stored with."""
    if manifest.embedding_dim not in (None, dim):
        raise WorkspaceMismatchError(
            f"the workspace was embedded with {manifest.embedding_model} (dimension "
            f"{manifest.embedding_dim}); the configured model{f' {model}' if model else ''} gives {dim}"
        )


def record_graph(workspace: Workspace, counts: dict[str, int], manifest: Manifest | None = None) -> Manifest:
    """Store new entity/relation counts and advance the graph version by one (on top of
    ``manifest`` when the caller holds a newer one than the file, e.g. a new dimension)."""
    manifest = manifest or load(workspace)
    manifest = manifest.model_copy(update={**counts, "graph_version": manifest.graph_version + 1})
    save(workspace, manifest)
    return manifest


def _shown(value: Any) -> str:
    return repr(value.model_dump() if isinstance(value, BaseModel) else value)
