"""A scripted OpenAI-compatible LLM server for tests and benchmarks (stdlib only).

It serves real HTTP on 127.0.0.1 from a daemon thread, so Ray actors in other
processes can call it while the test inspects what it was asked. Answers are
deterministic functions of the prompt (see ``derive_records``), and failures can be
injected per kind of request with ``add_rule``.

Run standalone: ``python -m tests.scripted_llm --port 8000 --latency 0.5``; control it
with ``POST /admin/rules`` (JSON list of rules, replacing the current ones),
``POST /admin/config`` ({"latency_s": .., "timeout_sleep_s": ..}), ``POST /admin/reset``
and ``GET /admin/counts``.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lightrag_ray.prompts import COMPLETE, EXTRACT_HEADING, FIELD_SEP, GLEAN_HEADING, SUMMARY_HEADING

KEYWORDS_HEADING = "## Query keywords"
ANSWER_PREFIX = "Answer based on the context [1]."
MALFORMED_TEXT = "I am sorry <|# entity | Broken Thing |#> relation<|without end"
ACTIONS = ("429", "500", "timeout", "malformed", "empty")
KINDS = ("extract", "glean", "summary", "keywords", "answer")

STOPWORDS = frozenset(
    """The A An It Its He She They We I You His Her Their Our My Your But And Or So If Then
    In On At Of For From To By With As After Before During Since Until This That These Those
    There Here When What Where Which Who Whom Why How While Although Though However Also
    Some Many Most All Each Every One No Not Yes Is Was Are Were Be Been Do Does Did
    Such Both Either Neither Other Another Only Even Just Yet Still Now Once""".split()
)
_PHRASE = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_PASSAGE = re.compile(r"<input_text>\n(.*?)\n</input_text>", re.S)


def capitalised_phrases(text: str) -> list[str]:
    """Distinct capitalised phrases in order, leading stopwords stripped, stopword-only dropped."""
    found: list[str] = []
    for match in _PHRASE.finditer(text):
        words = match.group(0).split()
        while words and words[0] in STOPWORDS:
            words.pop(0)
        name = " ".join(words)
        if name and name not in found:
            found.append(name)
    return found


def split_sentences(passage: str) -> list[str]:
    """Sentences of ``passage`` with whitespace collapsed."""
    sentences = (" ".join(part.split()) for part in _SENTENCE_END.split(passage.strip()))
    return [s for s in sentences if s]


def theme_keywords(sentence: str) -> str:
    """Up to three of the sentence's longest lower-case words (ties by order), comma-separated."""
    words = list(dict.fromkeys(re.findall(r"\b[a-z]{4,}\b", sentence)))
    return ", ".join(sorted(words, key=lambda w: (-len(w), words.index(w)))[:3]) or "co-occurrence"


def derive_records(passage: str) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The entities and relations the scripted LLM extracts from ``passage``."""
    entities: dict[str, dict[str, str]] = {}
    relations: dict[frozenset[str], dict[str, str]] = {}
    for sentence in split_sentences(passage):
        names = capitalised_phrases(sentence)
        quoted = sentence[:200]
        for name in names:
            entities.setdefault(
                name, {"name": name, "type": "concept", "description": f'{name} appears in: "{quoted}"'}
            )
        firsts = names[:6]
        for i, source in enumerate(firsts):
            for target in firsts[i + 1:]:
                relations.setdefault(frozenset((source, target)), {
                    "source": source,
                    "target": target,
                    "keywords": theme_keywords(sentence),
                    "description": f'{source} and {target} appear together: "{quoted}"',
                })
    return list(entities.values()), list(relations.values())


def extraction_answer(passage: str) -> str:
    """The record text of ``derive_records(passage)``, ended by COMPLETE."""
    entities, relations = derive_records(passage)
    lines = [FIELD_SEP.join(("entity", e["name"], e["type"], e["description"])) for e in entities]
    lines += [
        FIELD_SEP.join(("relation", r["source"], r["target"], r["keywords"], r["description"]))
        for r in relations
    ]
    return "\n".join([*lines, COMPLETE])


def _last_user(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def classify(messages: list[dict[str, Any]]) -> str:
    """The kind of request: extract, glean, summary, keywords or answer."""
    contents = [str(m.get("content") or "") for m in messages]
    last_user = _last_user(messages)
    if any(KEYWORDS_HEADING in c for c in contents):
        return "keywords"
    if GLEAN_HEADING in last_user:
        return "glean"
    if any(SUMMARY_HEADING in c for c in contents):
        return "summary"
    system = any(m.get("role") == "system" and EXTRACT_HEADING in str(m.get("content")) for m in messages)
    if system and _PASSAGE.search(last_user):
        return "extract"
    return "answer"


def answer_for(kind: str, messages: list[dict[str, Any]]) -> str:
    """The deterministic answer to a request of ``kind``."""
    last_user = _last_user(messages)
    if kind == "extract":
        match = _PASSAGE.search(last_user)
        return extraction_answer(match.group(1) if match else "")
    if kind == "glean":
        return COMPLETE
    if kind == "summary":
        fragments = [line[2:].strip() for line in last_user.splitlines() if line.startswith("- ")]
        return f"Summary of {len(fragments)} descriptions: " + " ".join(fragments)[:150]
    if kind == "keywords":
        question = last_user.rsplit("Question:", 1)[-1]
        words: list[str] = []
        for word in re.findall(r"\b[a-z]+\b", question):
            if word not in words:
                words.append(word)
        high = sorted(words, key=len, reverse=True)[:3]
        return json.dumps({"high_level_keywords": high, "low_level_keywords": capitalised_phrases(question)})
    return f"{ANSWER_PREFIX} {last_user[:200]}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    owner: Any  # the object whose state the handler serves


class BackgroundServer:
    """Serves ``handler`` on ``host``:``port`` (0: any free port) from a daemon thread."""

    handler: type[BaseHTTPRequestHandler]
    host: str
    port: int
    _server: _Server | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> Any:
        """Bind the port and serve from a daemon thread."""
        self._server = _Server((self.host, self.port), self.handler)
        self._server.owner = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence access logs
        pass

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"null")

    def do_GET(self) -> None:  # noqa: N802
        llm = self.server.owner
        if self.path.rstrip("/") == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": llm.model, "object": "model", "owned_by": "tests"}]})
        elif self.path.rstrip("/") == "/admin/counts":
            self._json(200, llm.snapshot())
        else:
            self._json(404, {"error": {"message": f"no route GET {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802
        llm = self.server.owner
        path = self.path.rstrip("/")
        try:
            body = self._body()
        except ValueError as exc:
            self._json(400, {"error": {"message": f"invalid JSON: {exc}"}})
            return
        try:
            if path == "/v1/chat/completions":
                self._chat(llm, body)
            elif path == "/admin/rules":
                rules = [dict(rule) for rule in body or []]
                bad = [r.get("action") for r in rules if r.get("action", "500") not in ACTIONS]
                if bad:
                    raise ValueError(f"unknown actions {bad}; use one of {ACTIONS}")
                llm.clear_rules()
                for rule in rules:
                    llm.add_rule(**rule)
                self._json(200, {"rules": len(body or [])})
            elif path == "/admin/config":
                for key in ("latency_s", "timeout_sleep_s"):
                    if key in (body or {}):
                        setattr(llm, key, float(body[key]))
                self._json(200, {"latency_s": llm.latency_s, "timeout_sleep_s": llm.timeout_sleep_s})
            elif path == "/admin/reset":
                llm.reset()
                self._json(200, {"reset": True})
            else:
                self._json(404, {"error": {"message": f"no route POST {self.path}"}})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. it timed out)
        except (TypeError, ValueError) as exc:
            self._json(400, {"error": {"message": str(exc)}})

    def _chat(self, llm: ScriptedLLM, body: Any) -> None:
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages:
            self._json(400, {"error": {"message": "'messages' must be a non-empty list"}})
            return
        kind = classify(messages)
        action = llm._record(kind, messages)
        llm._enter()
        try:
            if llm.latency_s > 0:
                time.sleep(llm.latency_s)
            if action == "429":
                self._json(429, {"error": {"message": "rate limited (scripted)"}}, {"Retry-After": "0"})
                return
            if action == "500":
                self._json(500, {"error": {"message": "internal error (scripted)"}})
                return
            if action == "timeout":
                time.sleep(llm.timeout_sleep_s)
            text = MALFORMED_TEXT if action == "malformed" else answer_for(kind, messages)
            if body.get("stream"):
                self._sse(llm, None if action == "empty" else text)
            else:
                choices = [] if action == "empty" else [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ]
                prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages)
                completion_tokens = len(text.split())
                self._json(200, {
                    "id": f"chatcmpl-scripted-{id(body)}", "object": "chat.completion",
                    "created": int(time.time()), "model": llm.model, "choices": choices,
                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                              "total_tokens": prompt_tokens + completion_tokens},
                })
        finally:
            llm._leave()

    def _sse(self, llm: ScriptedLLM, text: str | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        pieces = [text[i:i + 24] for i in range(0, len(text), 24)] if text is not None else []
        chunks = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces] or [{"choices": []}]
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps({'model': llm.model, **chunk})}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class ScriptedLLM(BackgroundServer):
    """An OpenAI-compatible server answering deterministically; ``url`` ends in ``/v1``."""

    handler = _Handler

    def __init__(self, latency_s: float = 0.0, port: int = 0, host: str = "127.0.0.1") -> None:
        self.latency_s = latency_s
        self.timeout_sleep_s = 5.0
        self.model = "scripted"
        self.host = host
        self.port = port
        self.requests: list[tuple[str, list[dict[str, Any]]]] = []
        self.injected = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._rules: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def add_rule(self, kind: str | None = "extract", contains: str = "", action: str = "500", times: int = 1) -> None:
        """Give ``action`` to the first ``times`` requests of ``kind`` (None: any) containing ``contains``."""
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
        with self._lock:
            self._rules.append({"kind": kind, "contains": contains, "action": action, "left": int(times)})

    def clear_rules(self) -> None:
        with self._lock:
            self._rules.clear()

    def reset(self) -> None:
        """Forget recorded requests, counters and rules."""
        with self._lock:
            self.requests.clear()
            self._rules.clear()
            self.injected = 0
            self.max_in_flight = self.in_flight

    def counts(self) -> dict[str, int]:
        """Number of requests seen per kind."""
        with self._lock:
            result: dict[str, int] = {}
            for kind, _ in self.requests:
                result[kind] = result.get(kind, 0) + 1
            return result

    def snapshot(self) -> dict[str, Any]:
        """Counts, injected failures and concurrency, as served by ``GET /admin/counts``."""
        counts = self.counts()
        with self._lock:
            return {"counts": counts, "total": len(self.requests), "injected": self.injected,
                    "in_flight": self.in_flight, "max_in_flight": self.max_in_flight}

    def _record(self, kind: str, messages: list[dict[str, Any]]) -> str | None:
        """Record a request; return the injected action for it, if a rule matches."""
        text = "\n".join(str(m.get("content") or "") for m in messages)
        with self._lock:
            self.requests.append((kind, messages))
            for rule in self._rules:
                if rule["left"] > 0 and rule["kind"] in (None, kind) and rule["contains"] in text:
                    rule["left"] -= 1
                    self.injected += 1
                    return str(rule["action"])
        return None

    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


def main(argv: list[str] | None = None) -> None:
    """Serve a ScriptedLLM until killed."""
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible LLM server for tests.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency", type=float, default=0.0, help="Seconds to wait before each answer.")
    args = parser.parse_args(argv)
    llm = ScriptedLLM(latency_s=args.latency, port=args.port, host=args.host).start()
    print(f"scripted LLM serving on {llm.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        llm.stop()


if __name__ == "__main__":
    main()
