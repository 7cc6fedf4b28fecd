"""OpenAI's error contract on the /v1 routes: ``{"error": {"message", "type", "param", "code"}}``.

The shape is chosen by the request path, so errors raised before a route runs (API key,
body size, body validation) get it too; every other route keeps FastAPI's ``{"detail"}``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from lightrag_ray.serve.http_guard import route_path

OPENAI_PREFIX = "/v1"
_DEFAULT_CODES = {401: "invalid_api_key"}


class OpenAIError(HTTPException):
    """An HTTP error carrying OpenAI's ``param`` and ``code`` as well."""

    def __init__(self, status_code: int, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(status_code, message)
        self.param = param
        self.code = code


def is_openai_path(path: str) -> bool:
    """Whether ``path`` (inside the app) is one of the OpenAI-compatible routes."""
    return path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/")


def error_type(status: int) -> str:
    """OpenAI's error ``type`` for an HTTP status."""
    if status == 429:
        return "rate_limit_error"
    return "server_error" if status >= 500 else "invalid_request_error"


def openai_error(status: int, message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """An OpenAI error body."""
    return {"error": {"message": message, "type": error_type(status), "param": param,
                      "code": code or _DEFAULT_CODES.get(status)}}


def error_body(path: str, status: int, message: str) -> dict[str, Any]:
    """The error body for a request to ``path``: OpenAI's under /v1, else ``{"detail": message}``."""
    return openai_error(status, message) if is_openai_path(path) else {"detail": message}


def error_response(request: Request, status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """An error response in the shape ``request``'s route promises."""
    return JSONResponse(error_body(route_path(request.scope), status, message), status_code=status, headers=headers)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    if not is_openai_path(route_path(request.scope)):
        return await http_exception_handler(request, exc)
    body = openai_error(exc.status_code, str(exc.detail), getattr(exc, "param", None), getattr(exc, "code", None))
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


def validation_message(errors: list[dict[str, Any]]) -> tuple[str, str | None]:
    """A readable message for pydantic's errors, and the parameter of the first one."""
    described, params = [], []
    for error in errors:
        param = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        params.append(param)
        described.append(f"{param}: {error.get('msg')}" if param else str(error.get("msg")))
    return "invalid request body: " + "; ".join(described), (params[0] if params else None) or None


async def _invalid_body(request: Request, exc: RequestValidationError) -> Response:
    """400 ``invalid_request_error`` (OpenAI's status) instead of FastAPI's 422, on /v1 only."""
    if not is_openai_path(route_path(request.scope)):
        return await request_validation_exception_handler(request, exc)
    errors = list(exc.errors())
    message, param = validation_message(errors)
    code = "missing_required_parameter" if errors and errors[0].get("type") == "missing" else None
    return JSONResponse(openai_error(400, message, param, code), status_code=400)


def install_error_handlers(api: FastAPI) -> None:
    """Give HTTP and validation errors on /v1 OpenAI's shape; other routes keep FastAPI's."""
    api.add_exception_handler(HTTPException, _http_error)
    api.add_exception_handler(RequestValidationError, _invalid_body)
