"""Bringing a workspace indexed by an earlier version up to this one (`lightrag-ray upgrade`):
collections without BM25 text get it (storage.vectors.add_text_search). An index run does the
same step before it writes; this command does it alone, with no document read and no LLM call."""

from __future__ import annotations

from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.service.opening import open_workspace
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.vectors import add_text_search, lite_file_in_use
from lightrag_ray.storage.workspace import Workspace


def upgrade_workspace(settings: Settings) -> dict[str, Any]:
    """Give ``settings.workspace``'s vector collections BM25 text search where they lack it;
    nothing else may write to the workspace meanwhile. Returns the rows copied per collection
    (none: it had it already) and the collections that now search text."""
    workspace = Workspace(settings.workspace)
    if not manifests.exists(workspace):
        raise FileNotFoundError(f"{settings.workspace} is not a lightrag-ray workspace (no manifest.json)")
    manifest = manifests.load(workspace)
    if not manifest.is_indexed():
        raise FileNotFoundError(f"{settings.workspace} holds no index yet; run `lightrag-ray index` first")
    if lite_file_in_use(settings.milvus_uri()):
        raise RuntimeError(f"workspace {settings.workspace} is in use by another process (a running `lightrag-ray "
                           "serve` or index); stop it first, or let its next insert upgrade it")
    opened = open_workspace(settings, "writer", embedding_dim=manifest.embedding_dim, workspace=workspace, manifest=manifest)
    try:
        store = opened.vector_store()
        copied = add_text_search(store, opened.graph_writer().export)
        return {"workspace": settings.workspace, "rows_copied": copied, "text_search": store.text_kinds()}
    finally:
        opened.close()
