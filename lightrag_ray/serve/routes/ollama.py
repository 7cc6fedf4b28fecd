"""The Ollama-compatible API (LightRAG Server's way into Open WebUI): ``GET /api/version``,
``/api/tags``, ``/api/ps``, ``POST /api/chat`` and ``/api/generate`` (Ollama's error shape on
them: serve.ollama_errors).

A chat answers the last user message from the knowledge graph in the mode its prefix names
(``/local ...``; ``/bypass ...``: the LLM alone; ``/context ...``: the retrieved context as
the answer); ``/api/generate`` sends its prompt to the LLM alone, as LightRAG Server does
(Open WebUI asks it for titles and tags). Answers come from the engine's ``stream`` (the
context alone from its ``query`` without generation) and stream by default, as
newline-delimited JSON objects ending with one that is ``done``.
"""

# No `from __future__ import annotations`: FastAPI must see the real types of the route parameters.
import functools
import hashlib
import json
import re
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, NamedTuple

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from starlette.exceptions import HTTPException

from lightrag_ray.core.tokenizer import count_tokens
from lightrag_ray.models.llm import LLMError
from lightrag_ray.query.engine import AnswerUsage
from lightrag_ray.query.params import DEFAULT_MODE, MODES, QueryParam
from lightrag_ray.serve.api_models import OLLAMA_MODEL, OllamaChatRequest, OllamaGenerateRequest
from lightrag_ray.serve.deployments import llm_failure
from lightrag_ray.serve.routes.replica import Replica, ReplicaDep, Space, SpaceDep, need_llm

router = APIRouter(tags=["ollama"])
OLLAMA_VERSION = "0.9.3"  # the Ollama release whose API this one follows (clients check for a recent one)
NDJSON = "application/x-ndjson"
# Open WebUI's own tasks (chat title, tags, follow-ups) quote the chat like this: sent to the LLM alone.
OPEN_WEBUI_TASK = "<chat_history>\nUSER:"
_PREFIX = re.compile(r"/(?P<word>[a-z]*)(?:\[(?P<prompt>[^\]]*)\])?(?:\s+|$)")
_STARTED = datetime.now(timezone.utc).isoformat()


def model_card() -> dict[str, Any]:
    """Ollama's description of our one model, as /api/tags lists it."""
    return {"name": OLLAMA_MODEL, "model": OLLAMA_MODEL, "modified_at": _STARTED, "size": 0,
            "digest": hashlib.sha256(OLLAMA_MODEL.encode()).hexdigest(),
            "details": {"parent_model": "", "format": "lightrag-ray", "family": "lightrag", "families": ["lightrag"],
                        "parameter_size": "", "quantization_level": ""}}


class Ask(NamedTuple):
    """What a chat's last user message asks once its prefix is read."""

    question: str
    mode: str
    context_only: bool
    instructions: str  # the prompt in brackets: ``/local[answer in a table] ...``


def parse_prefix(text: str) -> Ask:
    """LightRAG Server's query prefix: ``/MODE``, ``/context`` or ``/MODEcontext`` (the context
    alone), optionally followed by ``[instructions]``; no prefix: the default mode."""
    match = _PREFIX.match(text)
    word = match["word"] if match else ""
    mode, context_only = word.removesuffix("context") or DEFAULT_MODE, word.endswith("context")
    if not match or not (word or match["prompt"]) or mode not in MODES or (context_only and mode == "bypass"):
        return Ask(text, DEFAULT_MODE, False, "")
    return Ask(text[match.end():], mode, context_only, match["prompt"] or "")


def _line(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False) + "\n"


async def _once(text: str) -> AsyncIterator[str]:
    yield text


@dataclass
class _Reply:
    """The objects of one answer: ``key`` is ``message`` (chat) or ``response`` (generate);
    counts in tokens (``used``: those of the answer call, from its text; none: the text counted as
    generated), durations in nanoseconds (the prompt's: until generation began)."""

    model: str
    key: str
    encoding: str
    used: Callable[[str], AnswerUsage] | None = None
    started: int = field(default_factory=time.perf_counter_ns)
    generating: int = 0  # when generation began (set once retrieval is done)

    def piece(self, text: str) -> dict[str, Any]:
        """An object carrying ``text``, not done."""
        content = {"role": "assistant", "content": text} if self.key == "message" else text
        return {"model": self.model, "created_at": datetime.now(timezone.utc).isoformat(), self.key: content,
                "done": False}

    def done(self, answer: str, text: str) -> dict[str, Any]:
        """The last object, carrying ``text``, with the counts of the prompt and of ``answer``."""
        now = time.perf_counter_ns()
        used = self.used(answer) if self.used else AnswerUsage(0, count_tokens(answer, self.encoding), True)
        return {**self.piece(text), "done": True, "done_reason": "stop", "total_duration": now - self.started,
                "load_duration": 0, "prompt_eval_count": used.prompt_tokens,
                "prompt_eval_duration": self.generating - self.started,
                "eval_count": used.completion_tokens, "eval_duration": now - self.generating}

    async def lines(self, pieces: AsyncIterable[str]) -> AsyncIterator[str]:
        """The answer as NDJSON lines: one per piece, then the done one (an error object
        instead, if the LLM fails)."""
        answer = []
        try:
            async for piece in pieces:
                answer.append(piece)
                yield _line(self.piece(piece))
        except LLMError as exc:
            yield _line({"error": llm_failure(exc)})
            return
        yield _line(self.done("".join(answer), ""))


@router.get("/api/version")
async def ollama_version() -> dict[str, str]:
    """The Ollama version this API follows."""
    return {"version": OLLAMA_VERSION}


@router.get("/api/tags")
async def ollama_tags() -> dict[str, Any]:
    """The one model, ``lightrag:latest``."""
    return {"models": [model_card()]}


@router.get("/api/ps")
async def ollama_ps() -> dict[str, Any]:
    """The running models: the one model, always loaded."""
    card = {key: value for key, value in model_card().items() if key != "modified_at"}
    return {"models": [{**card, "expires_at": "9999-12-31T23:59:59Z", "size_vram": 0}]}


@router.post("/api/chat", response_model=None)
async def ollama_chat(request: OllamaChatRequest, replica: ReplicaDep,
                      space: SpaceDep) -> dict[str, Any] | StreamingResponse:
    """Answer the last user message from the knowledge graph in the mode its prefix names;
    earlier turns are the history, system messages (and ``system``) instructions."""
    try:
        prompt = request.prompt()
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None
    ask = parse_prefix(prompt.question)
    if not ask.question.strip():
        raise HTTPException(400, "the last user message has no question after its prefix")
    mode = "bypass" if OPEN_WEBUI_TASK in ask.question else ask.mode
    instructions = "\n\n".join(filter(None, (prompt.instructions, request.system, ask.instructions)))
    param = QueryParam(mode=mode, history=prompt.history, instructions=instructions)
    return await _answer(replica, space, _Reply(request.model, "message", replica.settings.chunking.encoding),
                         ask.question, param, ask.context_only, request.stream)


@router.post("/api/generate", response_model=None)
async def ollama_generate(request: OllamaGenerateRequest, replica: ReplicaDep,
                          space: SpaceDep) -> dict[str, Any] | StreamingResponse:
    """The LLM's answer to the prompt (and ``system``), without retrieval."""
    param = QueryParam(mode="bypass", instructions=request.system)
    return await _answer(replica, space, _Reply(request.model, "response", replica.settings.chunking.encoding),
                         request.prompt, param, False, request.stream)


async def _answer(replica: Replica, space: Space, reply: _Reply, question: str, param: QueryParam, context_only: bool,
                  stream: bool) -> dict[str, Any] | StreamingResponse:
    """Retrieve, then the LLM's answer (or the context itself) as NDJSON lines or one object."""
    if not context_only:
        need_llm(replica)
    engine = await space.engine()
    if context_only:
        context = (await engine.query(question, param, generate=False)).context.text
        reply.generating = time.perf_counter_ns()
        return StreamingResponse(reply.lines(_once(context)), media_type=NDJSON) if stream else reply.done(context, context)
    answer = engine.stream(question, param)
    await answer.ready()
    reply.used = functools.partial(answer.usage, keywords=False)
    reply.generating = time.perf_counter_ns()
    if stream:
        return StreamingResponse(reply.lines(answer), media_type=NDJSON)
    text = await answer.complete()
    return reply.done(text, text)
