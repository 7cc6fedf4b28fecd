"""ASGI middleware in front of every route: the guard (API key, workspace, request body size)
and CORS."""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from fastapi.middleware.cors import CORSMiddleware
from starlette.exceptions import HTTPException

from lightrag_ray.serve.workspace_routing import ALLOWED_KEY, WorkspaceDenied, check_access, requested_workspace
from lightrag_ray.service.workspaces import InvalidWorkspaceName, check_name

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ErrorBody = Callable[[str, int, str], dict[str, Any]]  # (path, status, message) -> JSON body
OPEN_PATHS = frozenset({"/health", "/docs", "/redoc", "/openapi.json",
                        "/auth-status", "/login",  # no key needed (these two hand out a guest token only)
                        "/", "/webui", "/ui/customization"})  # nor for the WebUI's files and texts
OPEN_PREFIXES = ("/webui/",)
ANY_WORKSPACE_PATHS = OPEN_PATHS - {"/health"}  # a key bound to other workspaces may still fetch these
AUTHORISED = "lightrag.authorised"  # set on the scope: whether the request presented a valid key
DEFAULT_CORS_ORIGINS = ("*",)  # LightRAG Server's default (CORS_ORIGINS unset)


def detail_body(_path: str, _status: int, message: str) -> dict[str, Any]:
    """FastAPI's error body, ``{"detail": message}``."""
    return {"detail": message}


def route_path(scope: Scope) -> str:
    """The request's path inside the app (no root path, no trailing slash)."""
    return scope.get("path", "").removeprefix(scope.get("root_path", "")).rstrip("/") or "/"


async def _reply(send: Send, status: int, body: dict[str, Any], headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *headers]})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def presented_key(headers: dict[bytes, bytes]) -> str:
    """The key from ``X-API-Key`` or ``Authorization: Bearer`` (what OpenAI clients send)."""
    key = headers.get(b"x-api-key", b"").decode("latin-1")
    if not key:
        auth = headers.get(b"authorization", b"").decode("latin-1")
        key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    return key


def has_key(headers: dict[bytes, bytes], api_key: str | None) -> bool:
    """Whether the request may pass: no key is configured, or it presents that key."""
    return not api_key or hmac.compare_digest(presented_key(headers).encode(), api_key.encode())


@dataclass(frozen=True)
class Access:
    """What the guard enforces: the app's key (every workspace), keys bound to some workspaces
    (key -> names) and the largest body."""

    api_key: str | None = None
    max_body_bytes: int = 50 * 1024 * 1024
    workspace_keys: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def keys_configured(self) -> bool:
        return bool(self.api_key or self.workspace_keys)

    def grant(self, headers: dict[bytes, bytes]) -> tuple[bool, frozenset[str] | None]:
        """(whether the request's key is valid, the workspaces it is bound to; None: every one)."""
        if not self.keys_configured() or (self.api_key and has_key(headers, self.api_key)):
            return True, None
        presented = presented_key(headers).encode()
        for key, names in self.workspace_keys.items():
            if hmac.compare_digest(presented, key.encode()):
                return True, names
        return False, None


def key_error(headers: dict[bytes, bytes]) -> str:
    """Why a request's key is refused (LightRAG's wording), and how to send it."""
    reason = "Invalid API Key" if presented_key(headers) else "API Key required"
    return f"{reason}: send it as X-API-Key or Authorization: Bearer"


class RequestGuard:
    """Rejects requests without a valid API key (the status ``denied_status`` gives for the
    path: 403 as LightRAG Server answers, or 401 as OpenAI does), an invalid workspace name
    (400), a key bound to other workspaces than the one named (403; routes check the default
    workspace and a chat model's) and bodies over the limit
    (413), with the body ``error_body`` gives for the path.

    The limit holds for chunked uploads too: the body is counted as the route reads it.
    """

    def __init__(self, app: Any, settings: Callable[[], Access],
                 error_body: ErrorBody = detail_body, denied_status: Callable[[str], int] = lambda _path: 403) -> None:
        self.app = app
        self.denied_status = denied_status
        self.settings = settings  # read per request: the Serve replica sets them after import
        self.error_body = error_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        access = self.settings()
        max_body = access.max_body_bytes
        headers = dict(scope.get("headers") or [])
        path = route_path(scope)
        valid, allowed = access.grant(headers)
        if path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES) and not valid:
            status = self.denied_status(path)
            challenge = ((b"www-authenticate", b"Bearer"),) if status == 401 else ()
            await _reply(send, status, self.error_body(path, status, key_error(headers)), challenge)
            return
        scope = {**scope, AUTHORISED: valid, ALLOWED_KEY: allowed}
        named = requested_workspace(scope)  # none: the routes check the workspace they resolve
        try:
            if named:
                check_name(named)
                if path not in ANY_WORKSPACE_PATHS and not path.startswith(OPEN_PREFIXES):
                    check_access(scope, named)
        except InvalidWorkspaceName as exc:
            await _reply(send, 400, self.error_body(path, 400, str(exc)))
            return
        except WorkspaceDenied as exc:
            await _reply(send, 403, self.error_body(path, 403, str(exc)))
            return
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body:
            await _reply(send, 413, self.error_body(path, 413, f"request body over the limit of {max_body} bytes"))
            return
        seen = 0

        async def counting_receive() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > max_body:  # FastAPI turns this into the 413 response
                    raise HTTPException(413, f"request body over the limit of {max_body} bytes")
            return message

        await self.app(scope, counting_receive, send)


class LazyCORS:
    """CORS with LightRAG's policy for the origins the app is configured with, built on the
    first request (the Serve replica sets its settings after this module is imported)."""

    def __init__(self, app: Any, origins: Callable[[], list[str]]) -> None:
        self.app = app
        self.origins = origins
        self.cors: CORSMiddleware | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.cors is None:
            origins = list(self.origins())
            # credentials only for an explicit origin list: "*" with credentials is not allowed by browsers
            self.cors = CORSMiddleware(self.app, allow_origins=origins, allow_credentials=bool(origins) and "*" not in origins,
                                       allow_methods=["*"], allow_headers=["*"], expose_headers=["X-New-Token"])
        await self.cors(scope, receive, send)
