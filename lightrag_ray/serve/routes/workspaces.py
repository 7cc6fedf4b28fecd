"""The app's workspaces: ``GET /workspaces`` lists them (those the request's key may use) with
their counts; ``DELETE /workspaces/{name}`` deletes one with everything in it. A workspace is
created by its first insert (any insert route with its name)."""

# No `from __future__ import annotations`: FastAPI must see the real types of the route parameters.
from typing import Any

from fastapi import APIRouter, HTTPException, Request

from lightrag_ray.serve.owner import raise_refusal
from lightrag_ray.serve.routes.replica import ReplicaDep, workspace_errors
from lightrag_ray.serve.workspace_routing import ALLOWED_KEY, check_access
from lightrag_ray.service.workspaces import check_name

router = APIRouter(tags=["workspaces"])


@router.get("/workspaces")
async def list_workspaces(request: Request, replica: ReplicaDep) -> dict[str, Any]:
    """Every workspace the key may use: name, folder, documents by status, entities, relations,
    whether it is open now."""
    allowed = request.scope.get(ALLOWED_KEY)
    rows = await replica.owner.workspaces.remote()
    return {"workspaces": [row for row in rows if allowed is None or row["name"] in allowed]}


@router.delete("/workspaces/{name}")
async def delete_workspace(name: str, request: Request, replica: ReplicaDep) -> dict[str, Any]:
    """Delete workspace ``name``: its documents, graph, vectors and files (409 while an insert
    job runs in it)."""
    from lightrag_ray.service.workspace_service import WriteBusy

    try:
        with workspace_errors():
            check_access(request.scope, check_name(name))
            deleted = raise_refusal(await replica.owner.delete_workspace.remote(name))
    except WriteBusy as exc:
        raise HTTPException(409, str(exc), headers={"Retry-After": "5"}) from None
    await replica.forget(name)
    return deleted
