"""The OpenAI-compatible API: ``GET /v1/models[/{id}]`` and ``POST /v1/chat/completions``
(OpenAI's error shape on them: serve.openai_errors).

A chat answers the last user message from the knowledge graph (the engine's ``stream``), the
model picking the query mode and, after an ``@``, the workspace (``lightrag-mix@sales``; the
``LIGHTRAG-WORKSPACE`` header and the ``/w/{name}`` prefix work too); ``usage`` counts the tokens of the keyword-extraction call (when
one was made) and of the answer call: as the LLM server reported them, else estimated from their
messages and answers (query.engine.answer_usage).
"""

# No `from __future__ import annotations`: FastAPI must see the real types of the route parameters.
import json
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import StreamingResponse

from lightrag_ray.models.llm import LLMError
from lightrag_ray.query.engine import AnswerUsage
from lightrag_ray.query.params import MODES, QueryParam
from lightrag_ray.serve.api_models import CHAT_MODEL_PREFIX, ChatCompletionRequest, chat_mode
from lightrag_ray.serve.deployments import llm_failure
from lightrag_ray.serve.openai_errors import OpenAIError, openai_error
from lightrag_ray.serve.routes.replica import ReplicaDep, named_space, need_llm

router = APIRouter(tags=["openai"])
MODEL_IDS = [f"{CHAT_MODEL_PREFIX}{mode}" for mode in MODES]


def model_card(model_id: str) -> dict[str, Any]:
    """OpenAI's model object for one of our model names."""
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "lightrag-ray"}


def _unknown_model(model_id: str) -> OpenAIError:
    return OpenAIError(404, f"the model {model_id!r} does not exist; use one of {', '.join(MODEL_IDS)}",
                       param="model", code="model_not_found")


def usage(used: AnswerUsage) -> dict[str, int]:
    """OpenAI's ``usage`` object (its fields only)."""
    return {"prompt_tokens": used.prompt_tokens, "completion_tokens": used.completion_tokens,
            "total_tokens": used.total_tokens}


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"


async def _chunks(pieces: AsyncIterable[str], chunk: dict[str, Any], used: Callable[[str], AnswerUsage],
                  include_usage: bool) -> AsyncIterator[str]:
    """The answer as OpenAI's SSE chunks: role, content pieces, finish (then usage: ``used`` of the
    whole answer), [DONE]."""
    yield _sse({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
    answer = []
    try:
        async for piece in pieces:
            answer.append(piece)
            yield _sse({**chunk, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
    except LLMError as exc:  # instead of the finish chunk: the openai client raises APIError
        yield _sse(openai_error(502, llm_failure(exc)))
    else:
        yield _sse({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if include_usage:
            yield _sse({**chunk, "choices": [], "usage": usage(used("".join(answer)))})
    yield "data: [DONE]\n\n"


@router.get("/v1/models")
async def models() -> dict[str, Any]:
    """One model per query mode: lightrag-mix, lightrag-local, ..."""
    return {"object": "list", "data": [model_card(m) for m in MODEL_IDS]}


@router.get("/v1/models/{model_id}")
async def model(model_id: str) -> dict[str, Any]:
    """One model; 404 for a name that selects no query mode."""
    if chat_mode(model_id) is None:
        raise _unknown_model(model_id)
    return model_card(model_id)


@router.post("/v1/chat/completions", response_model=None)
async def chat(request: ChatCompletionRequest, http: Request,
               replica: ReplicaDep) -> dict[str, Any] | StreamingResponse:
    """Answer the last user message from the knowledge graph; the model name picks the mode
    (and the workspace after an ``@``), system messages become instructions in the answer prompt."""
    model, _, workspace = request.model.partition("@")
    mode = chat_mode(model)
    if mode is None:
        raise _unknown_model(request.model)
    need_llm(replica)
    try:
        space = await named_space(http, replica, workspace)
    except HTTPException as exc:
        raise OpenAIError(exc.status_code, exc.detail, param="model") from None
    try:
        question, history, instructions = request.prompt()
    except ValueError as exc:
        raise OpenAIError(400, str(exc), param="messages") from None
    answer = (await space.engine()).stream(question, QueryParam(mode=mode, history=history, instructions=instructions))
    await answer.ready()
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": request.model}
    if request.stream:
        include_usage = bool(request.stream_options and request.stream_options.include_usage)
        chunks = _chunks(answer, {**base, "object": "chat.completion.chunk"}, answer.usage, include_usage)
        return StreamingResponse(chunks, media_type="text/event-stream")
    text = await answer.complete()
    return {**base, "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage(answer.usage(text))}
