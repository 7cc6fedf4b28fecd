"""Ollama's error contract on the /api routes: ``{"error": message}``, and 400 for an invalid
body (as Ollama answers). The shape is chosen by the request path, so errors raised before a
route runs (API key, body size, body validation) get it too."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from lightrag_ray.models.llm import LLMError
from lightrag_ray.serve.http_guard import ErrorBody, route_path
from lightrag_ray.serve.openai_errors import validation_message
from lightrag_ray.storage.graph.reader import GraphUnavailableError

OLLAMA_PREFIX = "/api"
Handler = Callable[[Request, Exception], Awaitable[Response]]


def is_ollama_path(path: str) -> bool:
    """Whether ``path`` (inside the app) is one of the Ollama-compatible routes."""
    return path == OLLAMA_PREFIX or path.startswith(OLLAMA_PREFIX + "/")


def ollama_error_body(fallback: ErrorBody) -> ErrorBody:
    """The error bodies of ``fallback``, but Ollama's ``{"error": message}`` on /api."""
    def body(path: str, status: int, message: str) -> dict[str, Any]:
        return {"error": message} if is_ollama_path(path) else fallback(path, status, message)

    return body


def _ollama_shaped(fallback: Handler) -> Handler:
    """``fallback`` (status, message and headers stay its own), with Ollama's body on /api."""
    async def handle(request: Request, exc: Exception) -> Response:
        response = await fallback(request, exc)
        if not is_ollama_path(route_path(request.scope)) or not isinstance(response, JSONResponse):
            return response
        headers = {k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")}
        return JSONResponse({"error": str(json.loads(response.body)["detail"])}, response.status_code, headers)

    return handle


def _invalid_body(fallback: Handler) -> Handler:
    """400 with Ollama's body for an invalid body on /api (as Ollama answers), ``fallback`` elsewhere."""
    async def handle(request: Request, exc: Exception) -> Response:
        if not is_ollama_path(route_path(request.scope)):
            return await fallback(request, exc)
        errors = exc.errors() if isinstance(exc, RequestValidationError) else []
        return JSONResponse({"error": validation_message(list(errors))[0]}, 400)

    return handle


def install_error_handlers(api: FastAPI) -> None:
    """Give errors on /api Ollama's body. Call it once the app's own exception handlers are
    added: on /api their bodies become Ollama's (a KeyError if one is missing)."""
    for exc_class in (HTTPException, LLMError, GraphUnavailableError):
        api.add_exception_handler(exc_class, _ollama_shaped(api.exception_handlers[exc_class]))
    api.add_exception_handler(RequestValidationError, _invalid_body(api.exception_handlers[RequestValidationError]))
