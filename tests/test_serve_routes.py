"""The routes over the real FastAPI app of serve.app, in this process, their replica an
in-memory query engine: every answering route goes through the engine's one answering step."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from ray.exceptions import ActorDiedError

from lightrag_ray.query.engine import Prepared, QueryEngine, QueryParam
from lightrag_ray.serve.app import http_app
from lightrag_ray.serve.owner import WorkspaceCalls
from lightrag_ray.serve.routes.replica import current_replica
from tests.test_query_engine import CannedLLM, _engine

ANSWER = "Canned answer citing [1]."


class InProcessSpace:
    """One workspace as the routes see it (serve.routes.replica.Space), over an engine on
    in-memory stores; ``writer``: what the owner's calls answer (None: no owner)."""

    def __init__(self, engine: QueryEngine, writer: Any = None) -> None:
        self.name = "default"
        self.query_engine = engine
        self.settings = engine.settings
        self.writer = writer
        self.input_dir = "inputs"

    async def engine(self) -> QueryEngine:
        return self.query_engine


class InProcessReplica:
    """The ingress replica as the routes see it (serve.routes.replica.Replica), its one
    workspace an InProcessSpace."""

    def __init__(self, engine: QueryEngine, writer: Any = None) -> None:
        self.settings = engine.settings
        self.llm = engine.llm
        self.owner = None
        self.api_key = None
        self.webui_dir = None
        self.node_id = "in-process"
        self.default = InProcessSpace(engine, writer)

    async def space(self, name: str, create: bool = False) -> InProcessSpace:
        return self.default

    async def forget(self, name: str) -> None:
        return None


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


class _DeadOwner(WorkspaceCalls):
    """The workspace owner's calls as they fail when its replica dies during the call."""

    async def run(self, method: Any, *args: Any) -> Any:
        raise ActorDiedError()


def test_a_back_end_replica_dying_during_a_call_is_a_503_with_retry_after():
    """Serve replaces a killed owner, but a call it was answering fails with ActorDiedError:
    every contract's route answers 503 + Retry-After (a retry reaches the new replica), never a 500."""
    engine, _ = _engine(llm=CannedLLM(ANSWER))
    app = http_app()
    app.dependency_overrides[current_replica] = lambda: InProcessReplica(engine, writer=_DeadOwner())
    with TestClient(app) as client:
        for method, path, body in (("GET", "/documents/pipeline_status", None), ("GET", "/documents", None),
                                   ("DELETE", "/documents/delete_document", {"doc_ids": ["doc-1"]}),
                                   ("GET", "/documents/track_status/insert-1", None), ("GET", "/health", None)):
            response = client.request(method, path, json=body)
            assert response.status_code == 503, (path, response.status_code, response.text)
            assert response.headers["retry-after"] == "1", path
            assert "restarted" in response.json()["detail"], path
