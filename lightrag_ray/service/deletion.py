"""Delete documents: drop their chunks' contributions and re-derive only what they touched."""

from __future__ import annotations

from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.index.stages.summarise import summarise_changed
from lightrag_ray.models.embedding import Embedder
from lightrag_ray.storage import chunk_table, doc_status, sources
from lightrag_ray.storage.graph.writer import GraphRouter
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.vector_contract import VectorStore
from lightrag_ray.storage.vectors import delete_graph_vectors, retire_vectors, write_graph_changes
from lightrag_ray.storage.workspace import Workspace


def delete_documents(
    workspace: Workspace, router: GraphRouter, vectors: VectorStore, embedder: Embedder, doc_ids: list[str],
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Remove documents from status, chunks, graph, vectors and sources in one pass (the chunk
    parts that hold their rows are rewritten, no other).

    Entities and relations that other chunks also mention keep those mentions (and are
    re-embedded with their new description, summarised again through ``settings``' LLM when
    still over the limits); those left with none disappear.
    """
    docs = doc_status.load(workspace)
    missing = [d for d in doc_ids if d not in docs]
    wanted = set(doc_ids) - set(missing)
    stored = chunk_table.chunks_of(workspace, wanted, ["chunk_id", "doc_id"])
    doomed = sorted({row["chunk_id"] for row in stored})
    with router.job() as job:  # readers see the graph without these documents once all of it is done
        router.remove_chunks(doomed)
        # readers of the delete's version no longer see their passages, those of the version before do
        manifest = manifests.load(workspace)
        retire_vectors(vectors, "chunks", doomed, manifest.graph_version + 1)
        job.if_rolled_back(lambda: retire_vectors(vectors, "chunks", doomed, None))
        if settings is not None:
            summarise_changed(settings, router)
        changes = router.take_changes()
        write_graph_changes(vectors, embedder.embed, changes)
        vectors.flush()
        router.commit(workspace, manifest)
        job.after_publish(lambda: _delete_vectors(vectors, doomed, changes["removed"]))
    chunk_table.drop_rows(workspace, stored)
    doc_status.remove(workspace, wanted)
    sources.forget_documents(workspace, wanted)
    return {
        "deleted": sorted(wanted), "not_found": missing, "chunks": len(doomed),
        "entities_removed": sum(1 for i in changes["removed"] if i.startswith("ent-")),
        "relations_removed": sum(1 for i in changes["removed"] if i.startswith("rel-")),
        "entities_updated": len(changes["entities"]), "relations_updated": len(changes["relations"]),
    }


def _delete_vectors(vectors: VectorStore, chunk_ids: list[str], removed_ids: list[str]) -> None:
    """The deleted documents' chunk vectors and the removed items' vectors, once readers no longer see them."""
    vectors.delete("chunks", chunk_ids)
    delete_graph_vectors(vectors, removed_ids)
    vectors.flush()
