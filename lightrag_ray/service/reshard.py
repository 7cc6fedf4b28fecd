"""Moving a workspace's graph to another number of shards (`lightrag-ray reshard`)."""

from __future__ import annotations

from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph.reshard import reshard
from lightrag_ray.storage.vectors import lite_file_in_use
from lightrag_ray.storage.workspace import Workspace


def reshard_workspace(settings: Settings, num_shards: int) -> dict[str, Any]:
    """Repartition ``settings.workspace``'s graph over ``num_shards`` shards (crash-safe: the old
    layout stays valid until the new manifest is written); nothing may use the workspace
    meanwhile. Returns the shard counts before and after and the new graph version."""
    workspace = Workspace(settings.workspace)
    if not manifests.exists(workspace):
        raise FileNotFoundError(f"{settings.workspace} is not a lightrag-ray workspace (no manifest.json)")
    if lite_file_in_use(settings.milvus_uri()):
        raise RuntimeError(f"workspace {settings.workspace} is in use by another process (a running `lightrag-ray "
                           "serve` or index); stop it first")
    before = manifests.load(workspace).num_shards
    manifest = reshard(workspace, num_shards)
    return {"workspace": settings.workspace, "shards_before": before, "shards": manifest.num_shards,
            "graph_version": manifest.graph_version, "entities": manifest.entities, "relations": manifest.relations}
