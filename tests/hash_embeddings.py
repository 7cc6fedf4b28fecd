"""An instant OpenAI-compatible embeddings server for tests and benchmarks (stdlib HTTP).

``POST /v1/embeddings`` answers every input with a deterministic unit vector: the bag of
hashed words of ``tests.memory_stores.HashingEmbedder`` (texts sharing words are close), so
an indexing run can use ``embedding.backend: openai`` without loading a model and the
embedding stage costs only the HTTP round trips. It speaks what
``lightrag_ray.models.embedding.OpenAIEmbedder`` sends (``{"model", "input": [texts]}``)
and what the OpenAI API allows besides (``input`` as one string, ``dimensions``,
``encoding_format`` ``float`` or ``base64``); answers are
``{"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...]}],
"model", "usage"}``. ``GET /v1/models`` lists the served model; ``GET /admin/counts``
gives the requests and texts served.

    with HashEmbeddings(dim=384) as server:
        EmbeddingConfig(backend="openai", base_url=server.url, model="hash-384")

Run standalone: ``python -m tests.hash_embeddings --port 8012 --dim 384``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np

from tests.memory_stores import HashingEmbedder
from tests.scripted_llm import BackgroundServer


def hash_vectors(texts: list[str], dim: int) -> np.ndarray:
    """Unit vectors (float32, one row per text): hashed word counts, L2-normalised; a text
    without words gets the unit vector of a bucket chosen by hashing its raw text."""
    vectors = HashingEmbedder(dim).embed_now(texts)
    for row in np.flatnonzero(~vectors.any(axis=1)):
        vectors[row, int(hashlib.md5(texts[row].encode()).hexdigest()[:8], 16) % dim] = 1.0
    return vectors


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no access log
        pass

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": {"message": message, "type": "invalid_request_error"}})

    def do_GET(self) -> None:  # noqa: N802
        owner: HashEmbeddings = self.server.owner
        path = self.path.rstrip("/")
        if path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": owner.model, "object": "model", "owned_by": "tests"}]})
        elif path == "/admin/counts":
            self._json(200, owner.counts())
        else:
            self._error(404, f"no route GET {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        owner: HashEmbeddings = self.server.owner
        if self.path.rstrip("/") != "/v1/embeddings":
            self._error(404, f"no route POST {self.path}")
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
        except ValueError as exc:
            self._error(400, f"invalid JSON: {exc}")
            return
        texts = body.get("input") if isinstance(body, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            self._error(400, "'input' must be a string or a non-empty list of strings")
            return
        dim = body.get("dimensions") or owner.dim
        if not isinstance(dim, int) or dim <= 0:
            self._error(400, "'dimensions' must be a positive integer")
            return
        started = time.perf_counter()
        vectors = hash_vectors(texts, dim)
        as_base64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(v.tobytes()).decode() if as_base64 else v.tolist()}
                for i, v in enumerate(vectors)]
        words = sum(len(t.split()) for t in texts)
        owner._count(len(texts), time.perf_counter() - started)
        self._json(200, {"object": "list", "data": data, "model": body.get("model") or owner.model,
                         "usage": {"prompt_tokens": words, "total_tokens": words}})


class HashEmbeddings(BackgroundServer):
    """The embeddings server on ``host``:``port`` (0: a free port); ``url`` ends in ``/v1``."""

    handler = _Handler

    def __init__(self, dim: int = 384, port: int = 0, host: str = "127.0.0.1", model: str | None = None) -> None:
        self.dim = dim
        self.port = port
        self.host = host
        self.model = model or f"hash-{dim}"
        self._lock = threading.Lock()
        self._requests = self._texts = 0
        self._busy_s = 0.0

    def _count(self, texts: int, seconds: float) -> None:
        with self._lock:
            self._requests += 1
            self._texts += texts
            self._busy_s += seconds

    def counts(self) -> dict[str, Any]:
        """Requests and texts served, and the seconds spent computing vectors."""
        with self._lock:
            return {"requests": self._requests, "texts": self._texts, "busy_s": round(self._busy_s, 3),
                    "dim": self.dim, "model": self.model}


def main(argv: list[str] | None = None) -> None:
    """Serve hash embeddings until killed."""
    parser = argparse.ArgumentParser(description="Instant OpenAI-compatible embeddings (hashed bag of words).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--dim", type=int, default=384, help="vector dimension (384)")
    args = parser.parse_args(argv)
    server = HashEmbeddings(args.dim, args.port, args.host).start()
    server.serve_until_interrupted(f"hash embeddings serving on {server.url} (dimension {args.dim})")


if __name__ == "__main__":
    main()
