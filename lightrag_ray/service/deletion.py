"""Delete documents: drop their chunks' contributions and re-derive only what they touched."""

from __future__ import annotations

from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.index.stages.summarise import summarise_changed
from lightrag_ray.models.embedding import Embedder
from lightrag_ray.storage import doc_status
from lightrag_ray.storage.graph.writer import GraphRouter
from lightrag_ray.storage.vectors import VectorWriter, write_graph_changes
from lightrag_ray.storage.workspace import Workspace


def delete_documents(
    workspace: Workspace, router: GraphRouter, vectors: VectorWriter, embedder: Embedder, doc_ids: list[str],
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Remove documents from status, chunks, graph and vectors in one pass.

    Entities and relations that other chunks also mention keep those mentions (and are
    re-embedded with their new description, summarised again through ``settings``' LLM when
    still over the limits); those left with none disappear.
    """
    docs = doc_status.load(workspace)
    missing = [d for d in doc_ids if d not in docs]
    wanted = set(doc_ids) - set(missing)
    chunk_rows = workspace.read_rows("chunks")
    doomed = sorted({row["chunk_id"] for row in chunk_rows if row["doc_id"] in wanted})
    with router.job():  # readers see the graph without these documents once all of it is done
        router.remove_chunks(doomed)
        if settings is not None:
            summarise_changed(settings, router)
        changes = router.take_changes()
        write_graph_changes(vectors, embedder.embed, changes)
        vectors.delete("chunks", doomed)
        vectors.flush()
        router.commit(workspace)
    kept = [row for row in chunk_rows if row["doc_id"] not in wanted]
    old_parts = workspace.list_files("chunks")
    workspace.append_rows(list({row["chunk_id"]: row for row in kept}.values()), "chunks")
    for part in old_parts:
        workspace.delete_file(part)
    doc_status.remove(workspace, wanted)
    return {
        "deleted": sorted(wanted), "not_found": missing, "chunks": len(doomed),
        "entities_removed": sum(1 for i in changes["removed"] if i.startswith("ent-")),
        "relations_removed": sum(1 for i in changes["removed"] if i.startswith("rel-")),
        "entities_updated": len(changes["entities"]), "relations_updated": len(changes["relations"]),
    }
