"""A simulated OpenAI-compatible LLM server for tests and benchmarks (stdlib only).

It serves real HTTP on 127.0.0.1 from a daemon thread, so Ray actors in other processes
can call it while the caller inspects what it was asked. It recognises the prompts of
lightrag-ray (``## ...`` headings) and of lightrag-hku 1.5.x (``---Role---`` /
``---Task---`` sections) and answers both deterministically: extraction records derived
from the passage (``derive_records``), ``<|COMPLETE|>`` to gleaning, JSON keywords, short
summaries. Latency is fixed per request, optionally per kind and per output word; failures
can be injected per kind of request with ``add_rule``; requests are recorded and counted.

Run standalone: ``python -m tests.scripted_llm --port 8011 --latency 0.5`` (also
``--token-latency S``, ``--kind-latency keywords=0``); control it with ``POST /admin/rules``
(JSON list of rules, replacing the current ones), ``POST /admin/config`` (any of
``latency_s``, ``token_latency_s``, ``kind_latency``, ``timeout_sleep_s``),
``POST /admin/reset`` and ``GET /admin/counts`` (``snapshot()``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Iterator
from typing import Any

from lightrag_ray.core.prompts import COMPLETE, EXTRACT_HEADING, FIELD_SEP, GLEAN_HEADING, SUMMARY_HEADING

KEYWORDS_HEADING = "## Query keywords"
ANSWER_PREFIX = "Answer based on the context [1]."
MALFORMED_TEXT = "I am sorry <|# entity | Broken Thing |#> relation<|without end"
ACTIONS = ("429", "500", "timeout", "malformed", "empty")
KINDS = ("extract", "glean", "summary", "keywords", "answer")
SYSTEMS = ("ray", "hku")

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
# lightrag-hku 1.5.x (lightrag/prompt.py): the passage fenced with ``` under ---Input Text---
_HKU_PASSAGE = re.compile(r"---Input Text---\n```\n(.*?)\n```\n\n---Output---", re.S)
_HKU_GLEAN = "Based on the last extraction task"
_HKU_SUMMARY = "Description List:"
_HKU_QUERY = re.compile(r"User Query:(.*?)(?:\n\n---Output---|\Z)", re.S)


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


def _contents(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("content") or "") for m in messages]


def _last_user(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def classify_system(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """(system, kind): system "hku" for lightrag-hku's prompts, else "ray"; kind one of KINDS."""
    contents = _contents(messages)
    last_user = _last_user(messages)
    if _HKU_GLEAN in last_user and "---Task---" in last_user:
        return "hku", "glean"
    if _HKU_PASSAGE.search(last_user):
        return "hku", "extract"
    if _HKU_SUMMARY in last_user and any("---Task---" in c for c in contents):
        return "hku", "summary"
    if "User Query:" in last_user and "high_level_keywords" in last_user:
        return "hku", "keywords"
    if any("---Role---" in c for c in contents):
        return "hku", "answer"
    if any(KEYWORDS_HEADING in c for c in contents):
        return "ray", "keywords"
    if GLEAN_HEADING in last_user:
        return "ray", "glean"
    if any(SUMMARY_HEADING in c for c in contents):
        return "ray", "summary"
    system = any(m.get("role") == "system" and EXTRACT_HEADING in str(m.get("content")) for m in messages)
    return "ray", "extract" if system and _PASSAGE.search(last_user) else "answer"


def classify(messages: list[dict[str, Any]]) -> str:
    """The kind of request: extract, glean, summary, keywords or answer."""
    return classify_system(messages)[1]


def _descriptions(last_user: str, system: str) -> list[str]:
    """The descriptions a summary request lists: ``- `` lines (ray) or JSON lines (hku)."""
    if system == "ray":
        return [line[2:].strip() for line in last_user.splitlines() if line.startswith("- ")]
    found = []
    for line in (line.strip() for line in last_user.split(_HKU_SUMMARY, 1)[-1].splitlines()):
        if line.startswith("{"):
            try:
                found.append(str(json.loads(line).get("Description", "")))
            except ValueError:
                found.append(line)
    return found


def _question(last_user: str, system: str) -> str:
    """The question of a keyword request."""
    if system == "ray":
        return last_user.rsplit("Question:", 1)[-1]
    match = _HKU_QUERY.search(last_user)
    return match.group(1).strip() if match else last_user


def answer_for(kind: str, messages: list[dict[str, Any]], system: str = "ray") -> str:
    """The deterministic answer to a request of ``kind`` in ``system``'s prompt format."""
    last_user = _last_user(messages)
    if kind == "extract":
        match = (_PASSAGE if system == "ray" else _HKU_PASSAGE).search(last_user)
        return extraction_answer(match.group(1) if match else "")
    if kind == "glean":
        return COMPLETE
    if kind == "summary":
        fragments = _descriptions(last_user, system)
        return f"Summary of {len(fragments)} descriptions: " + " ".join(fragments)[:150]
    if kind == "keywords":
        question = _question(last_user, system)
        words = list(dict.fromkeys(re.findall(r"\b[a-z]+\b", question)))
        high = sorted(words, key=len, reverse=True)[:3]
        return json.dumps({"high_level_keywords": high, "low_level_keywords": capitalised_phrases(question)})
    return f"{ANSWER_PREFIX} {last_user[:200]}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    owner: Any  # the object whose state the handler serves

    def process_request(self, request: Any, client_address: Any) -> None:
        """Count the connection (a client that reuses its connections opens few), then serve it."""
        self.owner.connections += 1
        super().process_request(request, client_address)


class BackgroundServer:
    """Serves ``handler`` on ``host``:``port`` (0: any free port) from a daemon thread."""

    handler: type[BaseHTTPRequestHandler]
    host: str
    port: int
    _server: _Server | None = None
    _thread: threading.Thread | None = None
    connections = 0  # accepted so far

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

    def serve_until_interrupted(self, banner: str) -> None:
        """Print ``banner`` and serve until Ctrl-C (the command-line use), then stop."""
        print(banner, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

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


class JSONHandler(BaseHTTPRequestHandler):
    """What the scripted servers' handlers share: HTTP/1.1, no access log, JSON in and out."""

    protocol_version = "HTTP/1.1"
    server: Any

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


class _Handler(JSONHandler):
    server: _Server

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
                self._json(200, {"rules": len(rules)})
            elif path == "/admin/config":
                self._json(200, llm.configure(dict(body or {})))
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
        system, kind = classify_system(messages)
        action = llm._record(kind, messages)
        text = None
        if action == "malformed":
            text = MALFORMED_TEXT
        elif action not in ("429", "500", "empty"):
            text = answer_for(kind, messages, system)
        prompt_words = sum(len(c.split()) for c in _contents(messages))
        completion_words = len(text.split()) if text is not None else 0
        llm._enter(system, kind, prompt_words, completion_words)
        try:
            llm._open.wait()
            delay = llm.delay(kind, completion_words)
            if delay > 0:
                time.sleep(delay)
            if action == "429":
                self._json(429, {"error": {"message": "rate limited (scripted)"}}, {"Retry-After": "0"})
            elif action == "500":
                self._json(500, {"error": {"message": "internal error (scripted)"}})
            else:
                if action == "timeout":
                    time.sleep(llm.timeout_sleep_s)
                if body.get("stream"):
                    wanted = bool((body.get("stream_options") or {}).get("include_usage"))
                    self._sse(llm, text, llm._usage(kind, prompt_words, completion_words) if wanted else None)
                    return
                choices = [] if text is None else [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ]
                usage = llm._usage(kind, prompt_words, completion_words)
                self._json(200, {
                    "id": f"chatcmpl-scripted-{id(body)}", "object": "chat.completion",
                    "created": int(time.time()), "model": llm.model, "choices": choices,
                    **({"usage": usage} if usage else {}),
                })
        finally:
            llm._leave()

    def _sse(self, llm: ScriptedLLM, text: str | None, usage: dict[str, int] | None) -> None:
        """The answer as SSE chunks; ``usage`` in a last chunk with no choices (OpenAI's
        ``stream_options.include_usage``)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        pieces = [text[i:i + 24] for i in range(0, len(text), 24)] if text is not None else []
        chunks = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces] or [{"choices": []}]
        if usage:
            chunks.append({"choices": [], "usage": usage})
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps({'model': llm.model, **chunk})}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class ScriptedLLM(BackgroundServer):
    """An OpenAI-compatible server answering deterministically; ``url`` ends in ``/v1``.

    Each request waits ``kind_latency.get(kind, latency_s) + token_latency_s`` per word of
    the answer; an injected ``timeout`` waits ``timeout_sleep_s`` more. Answers report their
    ``usage`` (words as tokens; a stream when asked for it), counted in ``usage_sent``
    ({kind: {"prompt": n, "completion": n}}); ``usage = False`` leaves it out."""

    handler = _Handler

    def __init__(self, latency_s: float = 0.0, port: int = 0, host: str = "127.0.0.1", *,
                 token_latency_s: float = 0.0, kind_latency: dict[str, float] | None = None) -> None:
        self.latency_s = latency_s
        self.token_latency_s = token_latency_s
        self.kind_latency: dict[str, float] = dict(kind_latency or {})
        self.timeout_sleep_s = 5.0
        self.model = "scripted"
        self.host = host
        self.port = port
        self.requests: list[tuple[str, list[dict[str, Any]]]] = []
        self.injected = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.systems: dict[str, int] = {}
        self.prompt_words: dict[str, int] = {}
        self.completion_words: dict[str, int] = {}
        self.usage = True
        self.usage_sent: dict[str, dict[str, int]] = {}
        self._rules: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._open = threading.Event()
        self._open.set()

    def add_rule(self, kind: str | None = "extract", contains: str = "", action: str = "500", times: int = 1) -> None:
        """Give ``action`` to the first ``times`` requests of ``kind`` (None: any) containing ``contains``."""
        if action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {action!r}")
        with self._lock:
            self._rules.append({"kind": kind, "contains": contains, "action": action, "left": int(times)})

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Inside the block every request is recorded, then waits until the block ends: a job
        that reached the LLM stays there for as long as a test needs (no timing races)."""
        self._open.clear()
        try:
            yield
        finally:
            self._open.set()

    def clear_rules(self) -> None:
        """Drop every failure rule."""
        with self._lock:
            self._rules.clear()

    def reset(self) -> None:
        """Forget recorded requests, counters and rules (the latency settings stay)."""
        with self._lock:
            self.requests.clear()
            self._rules.clear()
            self.injected = 0
            self.systems.clear()
            self.prompt_words.clear()
            self.completion_words.clear()
            self.usage_sent.clear()
            self.max_in_flight = self.in_flight

    def configure(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Set any of latency_s, token_latency_s, kind_latency ({kind: s}), timeout_sleep_s, usage
        (whether answers report it); return config()."""
        for key in ("latency_s", "token_latency_s", "timeout_sleep_s"):
            if key in settings:
                setattr(self, key, float(settings[key]))
        if "usage" in settings:
            self.usage = bool(settings["usage"])
        if "kind_latency" in settings:
            self.kind_latency = {str(k): float(v) for k, v in dict(settings["kind_latency"]).items()}
        return self.config()

    def config(self) -> dict[str, Any]:
        """The latency settings."""
        return {"latency_s": self.latency_s, "token_latency_s": self.token_latency_s,
                "kind_latency": dict(self.kind_latency), "timeout_sleep_s": self.timeout_sleep_s,
                "usage": self.usage}

    def delay(self, kind: str, completion_words: int) -> float:
        """Seconds a request of ``kind`` with an answer of ``completion_words`` words waits."""
        return self.kind_latency.get(kind, self.latency_s) + self.token_latency_s * completion_words

    def counts(self) -> dict[str, int]:
        """Number of requests seen per kind."""
        with self._lock:
            result: dict[str, int] = {}
            for kind, _ in self.requests:
                result[kind] = result.get(kind, 0) + 1
            return result

    def snapshot(self) -> dict[str, Any]:
        """Counters and latency settings, as served by ``GET /admin/counts``: counts, total,
        injected, in_flight, max_in_flight, systems ({system: n}), prompt_words and
        completion_words ({kind: n}), usage_sent, then config()."""
        counts = self.counts()
        with self._lock:
            return {"counts": counts, "total": len(self.requests), "injected": self.injected,
                    "in_flight": self.in_flight, "max_in_flight": self.max_in_flight,
                    "systems": dict(self.systems), "prompt_words": dict(self.prompt_words),
                    "completion_words": dict(self.completion_words),
                    "usage_sent": {kind: dict(sent) for kind, sent in self.usage_sent.items()}, **self.config()}

    def sent_tokens(self, *kinds: str) -> tuple[int, int]:
        """(prompt, completion) tokens the answers of ``kinds`` (none given: all) reported."""
        with self._lock:
            sent = [v for k, v in self.usage_sent.items() if not kinds or k in kinds]
            return sum(v["prompt"] for v in sent), sum(v["completion"] for v in sent)

    def _usage(self, kind: str, prompt_words: int, completion_words: int) -> dict[str, int] | None:
        """The ``usage`` object of an answer (counted in ``usage_sent``), None when usage is off."""
        if not self.usage:
            return None
        with self._lock:
            sent = self.usage_sent.setdefault(kind, {"prompt": 0, "completion": 0})
            sent["prompt"] += prompt_words
            sent["completion"] += completion_words
        return {"prompt_tokens": prompt_words, "completion_tokens": completion_words,
                "total_tokens": prompt_words + completion_words}

    def _record(self, kind: str, messages: list[dict[str, Any]]) -> str | None:
        """Record a request; return the injected action for it, if a rule matches."""
        text = "\n".join(_contents(messages))
        with self._lock:
            self.requests.append((kind, messages))
            for rule in self._rules:
                if rule["left"] > 0 and rule["kind"] in (None, kind) and rule["contains"] in text:
                    rule["left"] -= 1
                    self.injected += 1
                    return str(rule["action"])
        return None

    def _enter(self, system: str, kind: str, prompt_words: int, completion_words: int) -> None:
        with self._lock:
            self.systems[system] = self.systems.get(system, 0) + 1
            self.prompt_words[kind] = self.prompt_words.get(kind, 0) + prompt_words
            self.completion_words[kind] = self.completion_words.get(kind, 0) + completion_words
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _kind_latency(items: list[str]) -> dict[str, float]:
    result = {}
    for item in items:
        kind, _, value = item.partition("=")
        if kind not in KINDS or not value:
            raise SystemExit(f"--kind-latency wants KIND=SECONDS with KIND in {KINDS}, got {item!r}")
        result[kind] = float(value)
    return result


def main(argv: list[str] | None = None) -> None:
    """Serve a ScriptedLLM until killed."""
    parser = argparse.ArgumentParser(description="Simulated OpenAI-compatible LLM server for tests and benchmarks.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds to wait before each answer (0)")
    parser.add_argument("--token-latency", type=float, default=0.0, help="extra seconds per output word (0)")
    parser.add_argument("--kind-latency", nargs="*", default=[], metavar="KIND=S",
                        help="per-kind latency overriding --latency, e.g. keywords=0")
    args = parser.parse_args(argv)
    llm = ScriptedLLM(args.latency, args.port, args.host, token_latency_s=args.token_latency,
                      kind_latency=_kind_latency(args.kind_latency)).start()
    llm.serve_until_interrupted(f"scripted LLM serving on {llm.url} (latency {args.latency} s)")


if __name__ == "__main__":
    main()
