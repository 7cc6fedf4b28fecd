"""LightRAG Server's graph routes. Reads go through the query engine's reader, straight to
the shards as ``/query`` does: ``/graphs`` (the subgraph around a label), ``/graph/label/list``,
``/graph/label/popular``, ``/graph/label/search`` and ``/graph/entity/exists``. Edits are
write jobs of the workspace deployment (service.graph_edits): ``/graph/entity/edit``,
``/graph/relation/edit``, ``/graph/entity/create``, ``/graph/relation/create``,
``/graph/entities/merge``, ``/graph/entity/delete`` and ``/graph/relation/delete``, the latter
two also under their older names ``/documents/delete_entity`` and ``/documents/delete_relation``.
While an insert job runs an edit is refused with 409, as LightRAG refuses one while its
pipeline is busy; a refused edit gets LightRAG's status and message.
"""

# No `from __future__ import annotations`: FastAPI must see the real types of the route parameters.
from typing import Any

from fastapi import APIRouter, HTTPException, Query

from lightrag_ray.core.manual_edits import GraphEditError
from lightrag_ray.core.subgraph import search_labels, subgraph
from lightrag_ray.serve.api_models import (
    DeleteEntityRequest,
    DeleteRelationRequest,
    EntityCreateRequest,
    EntityEditRequest,
    EntityMergeRequest,
    RelationCreateRequest,
    RelationEditRequest,
)
from lightrag_ray.serve.routes.replica import Space, SpaceDep

router = APIRouter(tags=["graph"])


# ---- reads -----------------------------------------------------------------------------------
@router.get("/graphs")
async def graphs(space: SpaceDep, label: str = Query(..., min_length=1), max_depth: int = Query(3, ge=1, le=10),
                 max_nodes: int = Query(1000, ge=1, le=10000)) -> dict[str, Any]:
    """The subgraph around entity ``label`` (``*``: the best-connected entities)."""
    return await subgraph((await space.engine()).graph, label, max_depth, max_nodes)


@router.get("/graph/label/list")
async def labels(space: SpaceDep) -> list[str]:
    """All entity names."""
    return await (await space.engine()).graph.labels()


@router.get("/graph/label/popular")
async def popular_labels(space: SpaceDep, limit: int = Query(300, ge=1, le=1000)) -> list[str]:
    """The best-connected entity names, most relations first."""
    graph = await subgraph((await space.engine()).graph, "*", 1, limit)
    return [node["id"] for node in graph["nodes"]]


@router.get("/graph/label/search")
async def label_search(space: SpaceDep, q: str = Query(...), limit: int = Query(50, ge=1, le=100)) -> list[str]:
    """Entity names holding ``q`` (any case), best matches first."""
    return search_labels(await (await space.engine()).graph.labels(), q, limit)


@router.get("/graph/entity/exists")
async def entity_exists(space: SpaceDep, name: str = Query(..., min_length=1)) -> dict[str, bool]:
    """Whether an entity has exactly this name."""
    return {"exists": name in set(await (await space.engine()).graph.labels())}


# ---- edits -----------------------------------------------------------------------------------
def deleted(message: str) -> dict[str, Any]:
    """LightRAG's DeletionResult of a graph deletion (``doc_id`` is empty: no document was deleted)."""
    return {"status": "success", "doc_id": "", "message": message, "status_code": 200, "file_path": None}


async def _edit(space: Space, operation: str, *args: Any) -> Any:
    """Run a graph edit (service.graph_edits) on the workspace owner; its refusals become HTTP errors."""
    from lightrag_ray.service.workspace_service import WriteBusy

    try:
        return await space.writer.edit_graph(operation, *args)
    except GraphEditError as exc:
        raise HTTPException(exc.status, str(exc)) from None
    except WriteBusy as exc:
        raise HTTPException(409, f"Pipeline is busy with another operation: {exc}",
                            headers={"Retry-After": "5"}) from None


@router.post("/graph/entity/edit")
async def edit_entity(request: EntityEditRequest, space: SpaceDep) -> dict[str, Any]:
    """Change an entity's description, type, sources or name (renaming into an existing
    entity merges into it when ``allow_merge``); the entity is re-embedded."""
    result = await _edit(space, "edit_entity", request.entity_name, request.updated_data,
                         request.allow_rename, request.allow_merge)
    summary = result.pop("operation_summary")
    message = (f"Entity merged successfully into '{summary['final_entity']}'" if summary["merged"]
               else "Entity updated successfully")
    return {"status": "success", "message": message, "data": result, "operation_summary": summary}


@router.post("/graph/relation/edit")
async def edit_relation(request: RelationEditRequest, space: SpaceDep) -> dict[str, Any]:
    """Change a relation's description, keywords, weight or sources; it is re-embedded."""
    result = await _edit(space, "edit_relation", request.source_id, request.target_id, request.updated_data)
    return {"status": "success", "message": "Relation updated successfully", "data": result}


@router.post("/graph/entity/create")
async def create_entity(request: EntityCreateRequest, space: SpaceDep) -> dict[str, Any]:
    """Add an entity (400 if one of that name exists)."""
    result = await _edit(space, "create_entity", request.entity_name, request.entity_data)
    return {"status": "success", "message": f"Entity '{result['entity_name']}' created successfully", "data": result}


@router.post("/graph/relation/create")
async def create_relation(request: RelationCreateRequest, space: SpaceDep) -> dict[str, Any]:
    """Relate two existing entities (400 if either is missing or they are related already)."""
    result = await _edit(space, "create_relation", request.source_entity, request.target_entity,
                         request.relation_data)
    return {"status": "success", "data": result,
            "message": f"Relation created successfully between '{request.source_entity}' and '{request.target_entity}'"}


@router.post("/graph/entities/merge")
async def merge_entities(request: EntityMergeRequest, space: SpaceDep) -> dict[str, Any]:
    """Merge entities into one: their relations move to it, the merged ones disappear."""
    result = await _edit(space, "merge_entities", request.entities_to_change, request.entity_to_change_into)
    return {"status": "success", "data": result, "message": f"Successfully merged {len(request.entities_to_change)} "
            f"entities into '{result['entity_name']}'"}


@router.delete("/graph/entity/delete")
@router.delete("/documents/delete_entity")
async def delete_entity(request: DeleteEntityRequest, space: SpaceDep) -> dict[str, Any]:
    """Delete an entity with all its relations (404 if there is none of that name)."""
    return deleted(await _edit(space, "delete_entity", request.entity_name))


@router.delete("/graph/relation/delete")
@router.delete("/documents/delete_relation")
async def delete_relation(request: DeleteRelationRequest, space: SpaceDep) -> dict[str, Any]:
    """Delete the relation between two entities (404 if there is none)."""
    return deleted(await _edit(space, "delete_relation", request.source_entity, request.target_entity))
