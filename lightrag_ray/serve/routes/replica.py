"""What the routes use of the Serve ingress replica that answers a request and of the workspace
the request names, and the FastAPI dependencies that hand them over (tests override
``current_replica`` with an in-process replica)."""

# No `from __future__ import annotations`: FastAPI reads the route modules' annotations.
import contextlib
from collections.abc import Iterator
from typing import Annotated, Any, Protocol

from fastapi import Depends, HTTPException, Request

from lightrag_ray.config import Settings
from lightrag_ray.models.llm import LLMClient
from lightrag_ray.query.engine import QueryEngine
from lightrag_ray.serve.owner import WorkspaceCalls
from lightrag_ray.serve.workspace_routing import WorkspaceDenied, check_access, requested_workspace
from lightrag_ray.service.workspaces import InvalidWorkspaceName, UnknownWorkspace, check_name


class Space(Protocol):
    """One workspace as a request sees it."""

    name: str
    settings: Settings  # the workspace's own (its folder, shards, vector collections)
    writer: WorkspaceCalls  # the workspace owner's calls for this workspace (serve.owner.WriterHandle)
    input_dir: str  # the folder /documents/scan indexes

    async def engine(self) -> QueryEngine:
        """The workspace's query engine, opened on first use."""


class Replica(Protocol):
    """The ingress replica (serve.app.Ingress) as the routes see it."""

    settings: Settings
    llm: LLMClient | None  # None: no LLM configured (answers refused, context still served)
    owner: Any  # the workspace owner's handle (every workspace)
    api_key: str | None
    webui_dir: str | None  # the built WebUI's folder, None: no WebUI
    node_id: str

    async def space(self, name: str, create: bool = False) -> Space:
        """Workspace ``name`` ("" the default); UnknownWorkspace when the app holds none of
        that name (``create``: a new one is made)."""

    async def forget(self, name: str) -> None:
        """Drop what this replica keeps of workspace ``name`` (deleted)."""


async def current_replica() -> Replica:
    """The ingress replica answering this request (Serve's servable object)."""
    from ray import serve

    return serve.get_replica_context().servable_object


ReplicaDep = Annotated[Replica, Depends(current_replica)]


async def named_space(request: Request, replica: Replica, name: str = "", create: bool = False) -> Space:
    """Workspace ``name`` (checked: 400 for an invalid name, 403 for a key bound to others), or
    the one the request's header or path names (the guard checked those); 404 for a workspace
    the app does not hold."""
    with workspace_errors():
        if name:
            check_access(request.scope, check_name(name))
        space = await replica.space(name or requested_workspace(request.scope), create)
        check_access(request.scope, space.name)  # the default workspace, when none was named
        return space


@contextlib.contextmanager
def workspace_errors() -> Iterator[None]:
    """An invalid workspace name as HTTP 400, a key bound to other workspaces as 403, an
    unknown workspace as 404."""
    try:
        yield
    except InvalidWorkspaceName as exc:
        raise HTTPException(400, str(exc)) from None
    except WorkspaceDenied as exc:
        raise HTTPException(403, str(exc)) from None
    except UnknownWorkspace as exc:
        raise HTTPException(404, str(exc)) from None


async def current_space(request: Request, replica: ReplicaDep) -> Space:
    """The workspace the request names (404 when the app holds none of that name)."""
    return await named_space(request, replica)


async def writable_space(request: Request, replica: ReplicaDep) -> Space:
    """The workspace the request names, created by this first insert when new."""
    return await named_space(request, replica, create=True)


SpaceDep = Annotated[Space, Depends(current_space)]
NewSpaceDep = Annotated[Space, Depends(writable_space)]


def need_llm(replica: Replica) -> None:
    """503 when the replica has no LLM to write answers."""
    if replica.llm is None:
        raise HTTPException(503, "no LLM configured: set llm.backend and llm.base_url in the app's "
                                 "settings, or use /query/data for the context alone")
