"""LightRAG Server's graph-editing routes: edit, create, delete and merge entities and
relations (``/graph/entity/edit``, ``/graph/relation/edit``, ``/graph/entity/create``,
``/graph/relation/create``, ``/graph/entities/merge``, ``/graph/entity/delete`` and
``/graph/relation/delete``, the latter two also under their older names
``/documents/delete_entity`` and ``/documents/delete_relation``).

``GraphEditRoutes`` is mixed into the Serve ingress (which supplies the workspace handle);
``install`` puts its routes on the app. The workspace owner does the edits (index.graph_editor)
one write at a time: while an insert job runs an edit is refused with 409, as LightRAG refuses
one while its pipeline is busy; a refused edit gets LightRAG's status and message.
"""

# No `from __future__ import annotations`: FastAPI must see the real types of the route parameters.
from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException

from lightrag_ray.core.manual_edits import GraphEditError
from lightrag_ray.serve.api_models import (
    DeleteEntityRequest,
    DeleteRelationRequest,
    EntityCreateRequest,
    EntityEditRequest,
    EntityMergeRequest,
    RelationCreateRequest,
    RelationEditRequest,
)

router = APIRouter(tags=["graph"])


def deleted(message: str) -> dict[str, Any]:
    """LightRAG's DeletionResult of a graph deletion (``doc_id`` is empty: no document was deleted)."""
    return {"status": "success", "doc_id": "", "message": message, "status_code": 200, "file_path": None}


class GraphEditRoutes:
    """The graph-editing routes, as methods of the Serve ingress class that inherits them."""

    workspace: Any  # the workspace deployment's handle

    async def _edit(self, operation: str, *args: Any) -> Any:
        """Run a GraphEditor operation on the workspace owner; its refusals become HTTP errors."""
        from lightrag_ray.serve.workspace_service import WriteBusy

        try:
            return await self.workspace.edit_graph.remote(operation, *args)
        except GraphEditError as exc:
            cause = getattr(exc, "cause", None) or exc
            raise HTTPException(cause.status, str(cause)) from None
        except WriteBusy as exc:
            cause = getattr(exc, "cause", None) or exc
            raise HTTPException(409, f"Pipeline is busy with another operation: {cause}",
                                headers={"Retry-After": "5"}) from None

    @router.post("/graph/entity/edit")
    async def edit_entity(self, request: EntityEditRequest) -> dict[str, Any]:
        """Change an entity's description, type, sources or name (renaming into an existing
        entity merges into it when ``allow_merge``); the entity is re-embedded."""
        result = await self._edit("edit_entity", request.entity_name, request.updated_data,
                                  request.allow_rename, request.allow_merge)
        summary = result.pop("operation_summary")
        message = (f"Entity merged successfully into '{summary['final_entity']}'" if summary["merged"]
                   else "Entity updated successfully")
        return {"status": "success", "message": message, "data": result, "operation_summary": summary}

    @router.post("/graph/relation/edit")
    async def edit_relation(self, request: RelationEditRequest) -> dict[str, Any]:
        """Change a relation's description, keywords, weight or sources; it is re-embedded."""
        result = await self._edit("edit_relation", request.source_id, request.target_id, request.updated_data)
        return {"status": "success", "message": "Relation updated successfully", "data": result}

    @router.post("/graph/entity/create")
    async def create_entity(self, request: EntityCreateRequest) -> dict[str, Any]:
        """Add an entity (400 if one of that name exists)."""
        result = await self._edit("create_entity", request.entity_name, request.entity_data)
        return {"status": "success", "message": f"Entity '{result['entity_name']}' created successfully", "data": result}

    @router.post("/graph/relation/create")
    async def create_relation(self, request: RelationCreateRequest) -> dict[str, Any]:
        """Relate two existing entities (400 if either is missing or they are related already)."""
        result = await self._edit("create_relation", request.source_entity, request.target_entity,
                                  request.relation_data)
        return {"status": "success", "data": result,
                "message": f"Relation created successfully between '{request.source_entity}' and '{request.target_entity}'"}

    @router.post("/graph/entities/merge")
    async def merge_entities(self, request: EntityMergeRequest) -> dict[str, Any]:
        """Merge entities into one: their relations move to it, the merged ones disappear."""
        result = await self._edit("merge_entities", request.entities_to_change, request.entity_to_change_into)
        return {"status": "success", "data": result, "message": f"Successfully merged {len(request.entities_to_change)} "
                f"entities into '{result['entity_name']}'"}

    @router.delete("/graph/entity/delete")
    @router.delete("/documents/delete_entity")
    async def delete_entity(self, request: DeleteEntityRequest) -> dict[str, Any]:
        """Delete an entity with all its relations (404 if there is none of that name)."""
        return deleted(await self._edit("delete_entity", request.entity_name))

    @router.delete("/graph/relation/delete")
    @router.delete("/documents/delete_relation")
    async def delete_relation(self, request: DeleteRelationRequest) -> dict[str, Any]:
        """Delete the relation between two entities (404 if there is none)."""
        return deleted(await self._edit("delete_relation", request.source_entity, request.target_entity))


def install(api: FastAPI) -> None:
    """Serve the graph-editing routes on ``api`` (for an ingress class inheriting GraphEditRoutes)."""
    api.include_router(router)
