"""What the routes use of the Serve ingress replica that answers a request, and the FastAPI
dependency that hands it to them (tests override it with an in-process replica)."""

# No `from __future__ import annotations`: FastAPI reads the route modules' annotations.
from typing import Annotated, Any, Protocol

from fastapi import Depends, HTTPException

from lightrag_ray.config import Settings
from lightrag_ray.models.llm import LLMClient
from lightrag_ray.query.engine import QueryEngine


class Replica(Protocol):
    """The ingress replica (serve.app.Ingress) as the routes see it."""

    settings: Settings
    llm: LLMClient | None  # None: no LLM configured (answers refused, context still served)
    workspace: Any  # the workspace deployment's handle: the writer, documents, health
    api_key: str | None
    input_dir: str  # the folder /documents/scan indexes
    webui_dir: str | None  # the built WebUI's folder, None: no WebUI
    node_id: str

    async def engine(self) -> QueryEngine:
        """The query engine, opened on first use."""


async def current_replica() -> Replica:
    """The ingress replica answering this request (Serve's servable object)."""
    from ray import serve

    return serve.get_replica_context().servable_object


ReplicaDep = Annotated[Replica, Depends(current_replica)]


def need_llm(replica: Replica) -> None:
    """503 when the replica has no LLM to write answers."""
    if replica.llm is None:
        raise HTTPException(503, "no LLM configured: set llm.backend and llm.base_url in the app's "
                                 "settings, or use /query/data for the context alone")
