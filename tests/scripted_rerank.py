"""A scripted rerank server for tests (stdlib HTTP on 127.0.0.1): the Cohere/Jina ``/rerank`` API
that vLLM, Jina and Cohere v2 serve.

``POST /v1/rerank`` with ``{"model", "query", "documents": [...], "top_n"}`` answers
``{"id", "model", "results": [{"index", "document": {"text"}, "relevance_score"}, ...], "usage"}``,
best first, cut to ``top_n``. A document's score (``score``) is how many distinct words of the
query it holds, plus a fraction below one hashed from its text that breaks ties. Requests are
counted and their bodies and ``Authorization`` headers kept; ``fail_next`` makes the next
requests answer 429, 500, a malformed body or a late one.

    with ScriptedRerank() as server:
        RerankConfig(backend="http", base_url=server.url, model="scripted-rerank")
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from typing import Any

from tests.scripted_llm import BackgroundServer, JSONHandler

FAILURES = ("429", "500", "malformed", "late")


def words(text: str) -> set[str]:
    """The distinct lower-case words of ``text``."""
    return set(re.findall(r"\w+", text.lower()))


def score(query: str, document: str) -> float:
    """The scripted relevance: query words in the document, ties broken by a hash of its text."""
    tie = int(hashlib.md5(document.encode()).hexdigest()[:8], 16) / 2**32
    return len(words(query) & words(document)) + tie


class _Handler(JSONHandler):
    def do_POST(self) -> None:  # noqa: N802
        owner: ScriptedRerank = self.server.owner
        if self.path.rstrip("/") != "/v1/rerank":
            self._json(404, {"error": {"message": f"no route POST {self.path}"}})
            return
        body = self._body()
        failure = owner._record(body, self.headers.get("Authorization", ""))
        query, documents = body.get("query"), body.get("documents")
        if not isinstance(query, str) or not isinstance(documents, list) or not documents:
            self._json(400, {"error": {"message": "'query' must be a string and 'documents' a non-empty list"}})
            return
        try:
            if failure == "429":
                self._json(429, {"error": {"message": "rate limited (scripted)"}}, {"Retry-After": "0"})
            elif failure == "500":
                self._json(500, {"error": {"message": "internal error (scripted)"}})
            elif failure == "malformed":
                self._json(200, {"results": [{"index": len(documents), "relevance_score": "high"}]})
            else:
                if failure == "late":
                    time.sleep(owner.late_s)
                scores = [score(query, str(document)) for document in documents]
                ranked = sorted(range(len(documents)), key=lambda i: -scores[i])[: body.get("top_n") or len(documents)]
                self._json(200, {"id": f"rerank-{owner.requests}", "model": body.get("model"),
                                 "results": [{"index": i, "document": {"text": documents[i]},
                                              "relevance_score": scores[i]} for i in ranked],
                                 "usage": {"total_tokens": sum(len(str(d).split()) for d in documents)}})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (it timed out)


class ScriptedRerank(BackgroundServer):
    """The rerank server on ``host``:``port`` (0: a free port); ``url`` ends in ``/v1``."""

    handler = _Handler

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self.port = port
        self.host = host
        self.late_s = 2.0  # how long a "late" answer waits
        self.requests = 0
        self.bodies: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        self._failures: list[str] = []
        self._lock = threading.Lock()

    def fail_next(self, failure: str, times: int = 1) -> None:
        """Answer the next ``times`` requests with ``failure`` (one of FAILURES)."""
        if failure not in FAILURES:
            raise ValueError(f"failure must be one of {FAILURES}, got {failure!r}")
        with self._lock:
            self._failures += [failure] * times

    def reset(self) -> None:
        """Forget the requests and pending failures."""
        with self._lock:
            self.requests = 0
            self.bodies.clear()
            self.authorizations.clear()
            self._failures.clear()

    def _record(self, body: Any, authorization: str) -> str | None:
        """Count a request; the failure it gets, if one is pending."""
        with self._lock:
            self.requests += 1
            self.bodies.append(body)
            self.authorizations.append(authorization)
            return self._failures.pop(0) if self._failures else None
