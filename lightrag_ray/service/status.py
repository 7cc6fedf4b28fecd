"""What a workspace holds, read from its files alone (no Ray, no Milvus lock): the CLI's
`status` and the Serve app's `/health` both build on ``counts``."""

from __future__ import annotations

from typing import Any

from lightrag_ray.storage import doc_status, sources
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.vectors import LITE_COMFORTABLE_VECTORS, is_server_uri
from lightrag_ray.storage.workspace import Workspace


def counts(workspace: Workspace, manifest: manifests.Manifest | None = None) -> dict[str, Any]:
    """Documents by status, graph size and version, shards and embedding model (cheap: the
    manifest and the document table)."""
    manifest = manifest or manifests.load(workspace)
    return {
        "graph_version": manifest.graph_version,
        "documents": doc_status.counts(doc_status.load(workspace)),
        "entities": manifest.entities,
        "relations": manifest.relations,
        "shards": manifest.num_shards,
        "embedding_model": manifest.embedding_model,
        "embedding_dim": manifest.embedding_dim,
    }


def workspace_status(uri: str, milvus_uri: str | None = None) -> dict[str, Any]:
    """``counts`` plus distinct chunks, each failed document's error, and hints (e.g. a Milvus
    Lite collection grown past what Lite searches quickly)."""
    workspace = Workspace(uri)
    if not manifests.exists(workspace):
        raise FileNotFoundError(f"{uri} is not a lightrag-ray workspace (no manifest.json); run `lightrag-ray index` first")
    manifest = manifests.load(workspace)
    docs = doc_status.load(workspace)
    chunk_ids = {row["chunk_id"] for row in workspace.read_rows("chunks")}
    sizes = {"entities": manifest.entities, "relations": manifest.relations, "chunks": len(chunk_ids)}
    hints = []
    if milvus_uri is not None and not is_server_uri(milvus_uri) and max(sizes.values()) > LITE_COMFORTABLE_VECTORS:
        biggest = max(sizes, key=lambda kind: sizes[kind])
        hints.append(
            f"the {biggest} collection holds {sizes[biggest]:,} vectors; Milvus Lite searches it slowly past "
            f"{LITE_COMFORTABLE_VECTORS:,} (see docs/configuration.md): set vectors.uri to a Milvus server "
            "(http://HOST:19530) and index into a new workspace")
    found = counts(workspace, manifest)
    return {
        "workspace": uri,
        "documents": found["documents"],
        "chunks": len(chunk_ids),
        **{key: found[key] for key in ("entities", "relations", "graph_version", "shards", "embedding_model",
                                       "embedding_dim")},
        "last_sync": sources.last_sync(workspace),
        "errors": [{"file_path": d["file_path"], "error": d["error"]} for d in docs.values() if d["error"]],
        "hints": hints,
    }
