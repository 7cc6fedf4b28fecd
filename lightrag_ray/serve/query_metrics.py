"""ASGI middleware counting the query routes' requests for Prometheus: route, mode (which the
engine notes in the request's ``QueryRecord``), status and wall time, the whole streamed answer
included (query.query_metrics has the engine's side)."""

from __future__ import annotations

import time
from typing import Any

from lightrag_ray.metrics.client import metrics
from lightrag_ray.query.query_metrics import CURRENT, QueryRecord
from lightrag_ray.serve.http_guard import Receive, Scope, Send, route_path
from lightrag_ray.serve.workspace_routing import SCOPE_KEY

QUERY_ROUTES = frozenset({"/query", "/query/stream", "/query/data", "/v1/chat/completions", "/api/chat",
                          "/api/generate"})
UNNAMED = "unknown"  # the workspace label of a request that failed before its query began


class QueryMetrics:
    """Records ``query_requests`` and ``query_latency_seconds`` for every request to a query route."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = route_path(scope) if scope["type"] == "http" else ""
        if path not in QUERY_ROUTES:
            await self.app(scope, receive, send)
            return
        record = QueryRecord(workspace=scope.get(SCOPE_KEY) or UNNAMED)
        status = 500  # unless the app answers: an exception left for Starlette's last handler

        async def sending(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        token = CURRENT.set(record)
        started = time.perf_counter()
        try:
            await self.app(scope, receive, sending)
        finally:
            CURRENT.reset(token)
            metrics().count("query_requests", 1, workspace=record.workspace, route=path, mode=record.mode,
                            status=str(status))
            metrics().observe("query_latency_seconds", time.perf_counter() - started, mode=record.mode)
