"""Which workspace a request is for, and whether its key may use it.

A request names its workspace with the ``LIGHTRAG-WORKSPACE`` header (LightRAG Server's name)
or a ``/w/{name}/`` path prefix in front of any route; neither means the app's default
workspace. ``WorkspacePrefix`` (ASGI middleware) strips the prefix, so every route answers
under it unchanged; the guard (serve.http_guard) then checks the name and the key: a key bound
to some workspaces gets 403 on every other one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from lightrag_ray.service.workspaces import check_name

WORKSPACE_HEADER = b"lightrag-workspace"
SCOPE_KEY = "lightrag.workspace"  # the requested name ("" for the default), set on the ASGI scope
ALLOWED_KEY = "lightrag.allowed"  # the workspaces the request's key is bound to (None: every one)
_PREFIX = re.compile(r"^/w/([^/]*)(/.*)?$")


class WorkspaceDenied(PermissionError):
    """A key bound to other workspaces (HTTP 403)."""


def requested_workspace(scope: Mapping[str, Any]) -> str:
    """The workspace a request names (its path prefix, else its header), "" for none."""
    if SCOPE_KEY in scope:
        return scope[SCOPE_KEY]
    headers = dict(scope.get("headers") or [])
    return headers.get(WORKSPACE_HEADER, b"").decode("latin-1").strip()


def check_access(scope: Mapping[str, Any], name: str) -> None:
    """WorkspaceDenied when the request's key is bound to workspaces other than ``name``."""
    allowed = scope.get(ALLOWED_KEY)
    if allowed is not None and name not in allowed:
        raise WorkspaceDenied(f"this API key is not valid for workspace {name!r}")


def bind_keys(bindings: Mapping[str, list[str]]) -> dict[str, frozenset[str]]:
    """Key -> the workspaces it may use, each name checked."""
    return {key: frozenset(check_name(name) for name in names) for key, names in bindings.items()}


class WorkspacePrefix:
    """Strips a leading ``/w/{name}`` from the path, keeping the name on the scope
    (``SCOPE_KEY``) and the prefix as the root path, so redirects and the WebUI stay under it."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        match = _PREFIX.match(scope.get("path", "")) if scope["type"] in ("http", "websocket") else None
        if match is not None:
            name, rest = match.group(1), match.group(2) or "/"
            prefix = f"{scope.get('root_path', '')}/w/{name}"
            scope = {**scope, "path": rest, "raw_path": rest.encode(), "root_path": prefix, SCOPE_KEY: name}
        await self.app(scope, receive, send)
