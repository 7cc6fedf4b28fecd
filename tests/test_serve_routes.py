"""The routes over the real FastAPI app of serve.app, in this process, their replica an
in-memory query engine: every answering route goes through the engine's one answering step."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from lightrag_ray.query.engine import Prepared, QueryEngine, QueryParam
from lightrag_ray.serve.app import http_app
from lightrag_ray.serve.routes.replica import current_replica
from tests.test_query_engine import CannedLLM, _engine

ANSWER = "Canned answer citing [1]."


class InProcessReplica:
    """The ingress replica as the routes see it (serve.routes.replica.Replica), over an
    engine on in-memory stores."""

    def __init__(self, engine: QueryEngine) -> None:
        self.query_engine = engine
        self.settings = engine.settings
        self.llm = engine.llm
        self.workspace = None
        self.api_key = None
        self.input_dir = "inputs"
        self.webui_dir = None
        self.node_id = "in-process"

    async def engine(self) -> QueryEngine:
        return self.query_engine


def test_answering_routes_share_one_answering_path(monkeypatch):
    """/query, /query/stream, /v1/chat/completions and /api/chat each prepare their answer once,
    through QueryEngine.prepare_answer (patched here once), with the question asked."""
    prepared: list[str] = []
    original = QueryEngine.prepare_answer

    async def recording(self: QueryEngine, question: str, param: QueryParam) -> Prepared:
        prepared.append(question)
        return await original(self, question, param)

    monkeypatch.setattr(QueryEngine, "prepare_answer", recording)
    engine, _ = _engine(llm=CannedLLM(ANSWER))
    app = http_app()
    app.dependency_overrides[current_replica] = lambda: InProcessReplica(engine)
    requests: dict[str, tuple[str, dict[str, Any]]] = {
        "/query": ("Who is Tiny Tim?", {"query": "Who is Tiny Tim?", "mode": "naive"}),
        "/query/stream": ("Who is Bob Cratchit?", {"query": "Who is Bob Cratchit?", "mode": "naive"}),
        "/v1/chat/completions": ("Who is Fred?", {
            "model": "lightrag-naive", "messages": [{"role": "user", "content": "Who is Fred?"}]}),
        "/api/chat": ("Who is Jacob Marley?", {
            "model": "lightrag:latest", "stream": False,
            "messages": [{"role": "user", "content": "/naive Who is Jacob Marley?"}]}),
    }
    with TestClient(app) as client:
        for path, (question, body) in requests.items():
            asked = len(prepared)
            response = client.post(path, json=body)
            assert response.status_code == 200, (path, response.text)
            assert prepared[asked:] == [question], path
            assert "Canned" in response.text, path  # the LLM's answer came back
