"""Simulated OpenAI-compatible LLM for benchmarks: answers lightrag-ray's AND lightrag-hku's prompts.

tests/scripted_llm.py recognises only lightrag-ray's prompts (by their ``## ...`` headings);
lightrag-hku's prompts (``---Role---`` / ``---Task---`` sections, the passage fenced with
```` ``` ```` under ``---Input Text---``) would all count as "answer" there. This server
classifies both, and answers both with the same deterministic records derived from the
passage text (``tests.scripted_llm.derive_records``: capitalised phrases as entities,
same-sentence co-occurrence as relations) in LightRAG's record format
(``entity<|#|>name<|#|>type<|#|>description``,
``relation<|#|>src<|#|>tgt<|#|>keywords<|#|>description``, ended by ``<|COMPLETE|>``), so
both systems build comparable graphs. Gleaning answers only ``<|COMPLETE|>``, keyword
requests get JSON, summaries are short.

Fixed latency per request (``--latency``, default 0.5 s) plus optional latency per output
word (``--token-latency``) and per kind (``--kind-latency keywords=0``); unlimited
concurrency (one thread per connection). Requests are counted by kind.

Run: ``.venv/bin/python scripts/sim_llm.py --port 8011 --latency 0.5``
Admin: ``GET /admin/counts`` -> {"counts": {kind: n}, "total", "in_flight", "max_in_flight",
"prompt_words": {kind: n}, "completion_words": {kind: n}, "systems": {"ray"|"hku": n}};
``POST /admin/reset``; ``POST /admin/config`` {"latency_s", "token_latency_s", "kind_latency": {kind: s}}.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.scripted_llm import (  # noqa: E402
    BackgroundServer,
    _Handler as ScriptedHandler,
    answer_for as ray_answer_for,
    capitalised_phrases,
    classify as ray_classify,
    extraction_answer,
)

COMPLETE = "<|COMPLETE|>"
KINDS = ("extract", "glean", "summary", "keywords", "answer")

# lightrag-hku (lightrag/prompt.py, 1.5.x) markers
_HKU_PASSAGE = re.compile(r"---Input Text---\n```\n(.*?)\n```\n\n---Output---", re.S)
_HKU_GLEAN = "Based on the last extraction task"
_HKU_SUMMARY = "Description List:"
_HKU_QUERY = re.compile(r"User Query:(.*?)(?:\n\n---Output---|\Z)", re.S)


def _contents(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m.get("content") or "") for m in messages]


def _last_user(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def classify(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """(system, kind): system is "hku" for lightrag-hku's prompts, else "ray"."""
    last = _last_user(messages)
    if _HKU_GLEAN in last and "---Task---" in last:
        return "hku", "glean"
    if _HKU_PASSAGE.search(last):
        return "hku", "extract"
    if _HKU_SUMMARY in last and "---Task---" in "\n".join(_contents(messages)):
        return "hku", "summary"
    if "User Query:" in last and "high_level_keywords" in last:
        return "hku", "keywords"
    if any("---Role---" in c for c in _contents(messages)):
        return "hku", "answer"
    return "ray", ray_classify(messages)


def _hku_summary(last: str) -> str:
    block = last.split(_HKU_SUMMARY, 1)[-1]
    fragments = []
    for line in block.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                fragments.append(str(json.loads(line).get("Description", "")))
            except ValueError:
                fragments.append(line)
    return f"Summary of {len(fragments)} descriptions: " + " ".join(fragments)[:150]


def _keywords(question: str) -> str:
    words: list[str] = []
    for word in re.findall(r"\b[a-z]+\b", question):
        if word not in words:
            words.append(word)
    high = sorted(words, key=len, reverse=True)[:3]
    return json.dumps({"high_level_keywords": high, "low_level_keywords": capitalised_phrases(question)})


def answer(system: str, kind: str, messages: list[dict[str, Any]]) -> str:
    """The deterministic answer to one request."""
    if system == "ray":
        return ray_answer_for(kind, messages)
    last = _last_user(messages)
    if kind == "extract":
        match = _HKU_PASSAGE.search(last)
        return extraction_answer(match.group(1) if match else "")
    if kind == "glean":
        return COMPLETE
    if kind == "summary":
        return _hku_summary(last)
    if kind == "keywords":
        match = _HKU_QUERY.search(last)
        return _keywords(match.group(1).strip() if match else last)
    return f"Answer based on the context [1]. {last[:200]}"


class SimLLM(BackgroundServer):
    """The server state: latency settings and counters. ``start()`` serves from a daemon thread."""

    def __init__(self, latency_s: float = 0.5, token_latency_s: float = 0.0, port: int = 0,
                 host: str = "127.0.0.1", kind_latency: dict[str, float] | None = None) -> None:
        self.latency_s = latency_s
        self.token_latency_s = token_latency_s
        self.kind_latency: dict[str, float] = dict(kind_latency or {})
        self.host, self.port = host, port
        self.model = "sim"
        self._lock = threading.Lock()
        self.reset()


    def reset(self) -> None:
        with self._lock:
            self.counts: dict[str, int] = {}
            self.systems: dict[str, int] = {}
            self.prompt_words: dict[str, int] = {}
            self.completion_words: dict[str, int] = {}
            self.in_flight = getattr(self, "in_flight", 0)
            self.max_in_flight = self.in_flight

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"counts": dict(self.counts), "total": sum(self.counts.values()), "systems": dict(self.systems),
                    "prompt_words": dict(self.prompt_words), "completion_words": dict(self.completion_words),
                    "in_flight": self.in_flight, "max_in_flight": self.max_in_flight,
                    "latency_s": self.latency_s, "token_latency_s": self.token_latency_s,
                    "kind_latency": dict(self.kind_latency)}

    def configure(self, body: dict[str, Any]) -> None:
        if "latency_s" in body:
            self.latency_s = float(body["latency_s"])
        if "token_latency_s" in body:
            self.token_latency_s = float(body["token_latency_s"])
        if "kind_latency" in body:
            self.kind_latency = {str(k): float(v) for k, v in dict(body["kind_latency"]).items()}

    def serve(self, messages: list[dict[str, Any]]) -> tuple[str, int, int]:
        """Classify, count, wait the latency, answer: (text, prompt words, completion words)."""
        system, kind = classify(messages)
        text = answer(system, kind, messages)
        prompt_words = sum(len(c.split()) for c in _contents(messages))
        completion_words = len(text.split())
        with self._lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.systems[system] = self.systems.get(system, 0) + 1
            self.prompt_words[kind] = self.prompt_words.get(kind, 0) + prompt_words
            self.completion_words[kind] = self.completion_words.get(kind, 0) + completion_words
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            delay = self.kind_latency.get(kind, self.latency_s) + self.token_latency_s * completion_words
            if delay > 0:
                time.sleep(delay)
        finally:
            with self._lock:
                self.in_flight -= 1
        return text, prompt_words, completion_words

class _Handler(ScriptedHandler):
    """The scripted server's handler (JSON replies, GET /v1/models and /admin/counts) with
    this server's POST routes."""

    def do_POST(self) -> None:  # noqa: N802
        sim = self.server.owner
        path = self.path.rstrip("/")
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError as exc:
            self._json(400, {"error": {"message": f"invalid JSON: {exc}"}})
            return
        try:
            if path == "/v1/chat/completions":
                self._chat(sim, body)
            elif path == "/admin/reset":
                sim.reset()
                self._json(200, {"reset": True})
            elif path == "/admin/config":
                sim.configure(dict(body or {}))
                self._json(200, sim.snapshot())
            else:
                self._json(404, {"error": {"message": f"no route POST {self.path}"}})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except (TypeError, ValueError) as exc:
            self._json(400, {"error": {"message": str(exc)}})

    def _chat(self, sim: SimLLM, body: Any) -> None:
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages:
            self._json(400, {"error": {"message": "'messages' must be a non-empty list"}})
            return
        text, prompt_words, completion_words = sim.serve(messages)
        if body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for i in range(0, len(text), 64):
                chunk = {"model": sim.model, "choices": [{"index": 0, "delta": {"content": text[i:i + 64]}}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            return
        self._json(200, {
            "id": f"chatcmpl-sim-{id(body)}", "object": "chat.completion", "created": int(time.time()),
            "model": sim.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_words, "completion_tokens": completion_words,
                      "total_tokens": prompt_words + completion_words},
        })


SimLLM.handler = _Handler  # defined after SimLLM, which it serves


def _kind_latency(items: list[str]) -> dict[str, float]:
    result = {}
    for item in items:
        kind, _, value = item.partition("=")
        if kind not in KINDS or not value:
            raise SystemExit(f"--kind-latency wants KIND=SECONDS with KIND in {KINDS}, got {item!r}")
        result[kind] = float(value)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per request (0.5)")
    parser.add_argument("--token-latency", type=float, default=0.0, help="extra seconds per output word (0)")
    parser.add_argument("--kind-latency", nargs="*", default=[], metavar="KIND=S",
                        help="per-kind latency overriding --latency, e.g. keywords=0")
    args = parser.parse_args(argv)
    sim = SimLLM(args.latency, args.token_latency, args.port, args.host, _kind_latency(args.kind_latency)).start()
    print(f"simulated LLM serving on {sim.url} (latency {args.latency} s)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()


if __name__ == "__main__":
    main()
