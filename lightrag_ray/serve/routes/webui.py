"""LightRAG's built WebUI and the server routes it calls besides the resources.

The WebUI at ``/webui/`` (and ``/`` redirecting to it), as LightRAG Server serves it: the index
page gets the runtime config (``window.__LIGHTRAG_CONFIG__``) in place of its placeholder, so
the WebUI calls the API at this origin; hashed assets are cached. The replica's ``webui_dir``
is its folder (None: no WebUI), which must exist on the nodes running ingress replicas (see
serve.webui_source). Also ``/ui/customization`` (answered as LightRAG Server does without a
customization bundle), the login routes and ``/health``.

There are no user accounts, so like LightRAG Server without ``AUTH_ACCOUNTS`` both
``/auth-status`` and ``/login`` hand out a guest token (``auth_mode: disabled``). The token
is never checked: without an API key every request passes; with one, the key stays
required on every route (X-API-Key), as in LightRAG 1.5, where a guest token
authenticates nothing once an API key is set.
"""

# No `from __future__ import annotations`: FastAPI must see the real types of the route parameters.
import base64
import importlib.metadata
import json
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from fastapi.security import OAuth2PasswordRequestForm

from lightrag_ray.serve.http_guard import AUTHORISED
from lightrag_ray.serve.routes.replica import ReplicaDep, current_space

router = APIRouter(tags=["webui"])
VERSION = importlib.metadata.version("lightrag-ray")
WEBUI_PATH = "/webui"
PLACEHOLDER = "<!-- __LIGHTRAG_RUNTIME_CONFIG__ -->"
NO_CACHE = {"Cache-Control": "no-cache, no-store, must-revalidate", "Pragma": "no-cache", "Expires": "0"}


def _b64(value: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(value, separators=(",", ":")).encode()).decode()


# JWT-shaped so the WebUI can read its subject and role; unsigned, since nothing checks it.
GUEST_TOKEN = f"{_b64({'alg': 'none', 'typ': 'JWT'})}.{_b64({'sub': 'guest', 'role': 'guest', 'metadata': {'auth_mode': 'disabled'}})}."


def guest_login(api_key: str | None) -> dict[str, Any]:
    """LightRAG's guest login answer (``/login``; ``/auth-status`` adds ``auth_configured``)."""
    message = "Authentication is disabled. Using guest access."
    if api_key:
        message += " This server requires its API key (X-API-Key) on every other route: set it in the WebUI's settings."
    return {"access_token": GUEST_TOKEN, "token_type": "bearer", "auth_mode": "disabled", "message": message,
            "core_version": VERSION, "api_version": VERSION, "webui_title": "lightrag-ray",
            "webui_description": "LightRAG on Ray"}


def runtime_config(root_path: str) -> str:
    """The script LightRAG Server puts in place of the index page's placeholder."""
    config = json.dumps({"apiPrefix": root_path, "webuiPrefix": f"{root_path}{WEBUI_PATH}/", "webuiTitle": None})
    return "<script>window.__LIGHTRAG_CONFIG__ = " + config.replace("</", "<\\/") + ";</script>"


def webui_file(folder: Path, path: str) -> Path:
    """The file of ``folder`` a request path names (the index page for the folder itself);
    404 for anything else, including paths that climb out of the folder."""
    root = folder.resolve()
    target = (root / (path or "index.html")).resolve()
    if not target.is_relative_to(root) or not target.is_file():
        raise HTTPException(404, f"no such WebUI file: {path}")
    return target


# ---- login and status ------------------------------------------------------------------------
@router.get("/auth-status")
async def auth_status(replica: ReplicaDep) -> dict[str, Any]:
    """Whether logging in is needed (never: there are no accounts) and a guest token; no key needed."""
    return {"auth_configured": False, **guest_login(replica.api_key)}


@router.post("/login")
async def login(replica: ReplicaDep, form: OAuth2PasswordRequestForm = Depends()) -> dict[str, Any]:
    """LightRAG's login form; without accounts any name and password get the guest token."""
    return guest_login(replica.api_key)


@router.get("/auth/verify")
async def verify_credentials() -> dict[str, str]:
    """200 once the guard has let the key through; the WebUI's key dialog reads the 403's
    ``API Key required`` / ``Invalid API Key`` otherwise."""
    return {"status": "ok"}


@router.get("/health")
async def health(request: Request, replica: ReplicaDep) -> dict[str, Any]:
    """Liveness (no API key needed); with a key (or on a server without keys) also the named
    workspace's graph version, counts and models, and the node of the ingress replica that answered."""
    if not request.scope.get(AUTHORISED, False):
        return {"status": "healthy"}
    space = await current_space(request, replica)
    return {**await space.writer.health(), "workspace_name": space.name, "served_by": replica.node_id}


# ---- the WebUI's files -----------------------------------------------------------------------
@router.get("/", include_in_schema=False)
async def root_redirect(request: Request, replica: ReplicaDep) -> RedirectResponse:
    """To the WebUI when it is served, else to the API docs (as LightRAG Server does)."""
    root = request.scope.get("root_path", "")
    return RedirectResponse(f"{root}{WEBUI_PATH}/" if replica.webui_dir else f"{root}/docs")


@router.get("/ui/customization", include_in_schema=False)
async def ui_customization() -> JSONResponse:
    """No customization bundle: the WebUI shows its own texts under this server's name."""
    brand = {"title": "lightrag-ray", "description": "LightRAG on Ray"}
    return JSONResponse({"customized": False, "brand": brand}, headers={"Cache-Control": "no-store"})


@router.get(WEBUI_PATH + "/{path:path}", include_in_schema=False)
async def webui(request: Request, path: str, replica: ReplicaDep) -> Response:
    """A file of the built WebUI; the index page with the runtime config."""
    if not replica.webui_dir:
        raise HTTPException(404, "the WebUI is off: start the server with --webui (lightrag-ray serve --webui)")
    folder = Path(replica.webui_dir)
    if not folder.is_dir():
        raise HTTPException(503, f"the WebUI folder {folder} is missing on this node")
    target = webui_file(folder, path)
    if target.suffix == ".html":
        page = target.read_text(encoding="utf-8").replace(PLACEHOLDER, runtime_config(request.scope.get("root_path", "")))
        return Response(page, media_type="text/html", headers=NO_CACHE)
    cache = {"Cache-Control": "public, max-age=31536000, immutable"} if path.startswith("assets/") else {}
    return FileResponse(target, headers=cache)
