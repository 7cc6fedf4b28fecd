"""LightRAG's built WebUI at ``/webui/`` (and ``/`` redirecting to it), as LightRAG Server
serves it: the index page gets the runtime config (``window.__LIGHTRAG_CONFIG__``) in place
of its placeholder, so the WebUI calls the API at this origin; hashed assets are cached.
Also the two routes only the WebUI calls: ``/ui/customization`` (answered as LightRAG Server
does without a customization bundle) and ``/documents/supported_file_types`` (its upload
dialog's allowlist).

``WebUIRoutes`` is mixed into the Serve ingress, which sets ``webui_dir`` (None: no WebUI);
the folder must exist on the nodes running ingress replicas (see webui_source).
"""

# No `from __future__ import annotations`: FastAPI must see the real types of the route parameters.
import json
from pathlib import Path

from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response

from lightrag_ray.index.documents import SUPPORTED_SUFFIXES

router = APIRouter(include_in_schema=False)
WEBUI_PATH = "/webui"
PLACEHOLDER = "<!-- __LIGHTRAG_RUNTIME_CONFIG__ -->"
NO_CACHE = {"Cache-Control": "no-cache, no-store, must-revalidate", "Pragma": "no-cache", "Expires": "0"}


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


class WebUIRoutes:
    """The WebUI routes, as methods of the Serve ingress class that inherits them."""

    webui_dir: str | None

    @router.get("/")
    async def root_redirect(self, request: Request) -> RedirectResponse:
        """To the WebUI when it is served, else to the API docs (as LightRAG Server does)."""
        root = request.scope.get("root_path", "")
        return RedirectResponse(f"{root}{WEBUI_PATH}/" if self.webui_dir else f"{root}/docs")

    @router.get("/ui/customization")
    async def ui_customization(self) -> JSONResponse:
        """No customization bundle: the WebUI shows its own texts under this server's name."""
        brand = {"title": "lightrag-ray", "description": "LightRAG on Ray"}
        return JSONResponse({"customized": False, "brand": brand}, headers={"Cache-Control": "no-store"})

    @router.get("/documents/supported_file_types")
    async def supported_file_types(self) -> JSONResponse:
        """The file suffixes uploads accept (no parser engines to choose from)."""
        body = {"supported_extensions": sorted(SUPPORTED_SUFFIXES), "engines": {}}
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    @router.get(WEBUI_PATH + "/{path:path}")
    async def webui(self, request: Request, path: str) -> Response:
        """A file of the built WebUI; the index page with the runtime config."""
        if not self.webui_dir:
            raise HTTPException(404, "the WebUI is off: start the server with --webui (lightrag-ray serve --webui)")
        folder = Path(self.webui_dir)
        if not folder.is_dir():
            raise HTTPException(503, f"the WebUI folder {folder} is missing on this node")
        target = webui_file(folder, path)
        if target.suffix == ".html":
            page = target.read_text(encoding="utf-8").replace(PLACEHOLDER, runtime_config(request.scope.get("root_path", "")))
            return Response(page, media_type="text/html", headers=NO_CACHE)
        cache = {"Cache-Control": "public, max-age=31536000, immutable"} if path.startswith("assets/") else {}
        return FileResponse(target, headers=cache)


def install(api: FastAPI) -> None:
    """Serve the WebUI routes on ``api`` (for an ingress class inheriting WebUIRoutes)."""
    api.include_router(router)
