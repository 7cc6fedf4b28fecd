"""The OpenAI-compatible API: ``GET /v1/models[/{id}]`` and ``POST /v1/chat/completions``
(OpenAI's error shape on them: serve.openai_errors).

A chat answers the last user message from the knowledge graph (the engine's ``stream``), the
model picking the query mode and, after an ``@``, the workspace (``lightrag-mix@sales``; the
``LIGHTRAG-WORKSPACE`` header and the ``/w/{name}`` prefix work too); ``usage`` counts the tokens of the keyword-extraction call (when
one was made) and of the answer call: their messages, and the two answers.
"""

# No `from __future__ import annotations`: FastAPI must see the real types of the route parameters.
import json
import time
import uuid
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import StreamingResponse

from lightrag_ray.core import prompts
from lightrag_ray.core.keywords import Keywords
from lightrag_ray.core.tokenizer import count_tokens, message_tokens
from lightrag_ray.models.llm import LLMError
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


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI's ``usage`` object."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def keyword_usage(question: str, keywords: Keywords, llm_calls: int, encoding: str) -> tuple[int, int]:
    """Prompt and completion tokens of the keyword-extraction call; (0, 0) when none was made."""
    if not llm_calls:
        return 0, 0
    return message_tokens(prompts.keywords_messages(question), encoding), count_tokens(keywords.answer, encoding)


def _sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload)}\n\n"


async def _chunks(pieces: AsyncIterable[str], chunk: dict[str, Any], spent: tuple[int, int], encoding: str,
                  include_usage: bool) -> AsyncIterator[str]:
    """The answer as OpenAI's SSE chunks: role, content pieces, finish (then usage: ``spent``, the
    prompt and completion tokens before the answer's, plus the answer's), [DONE]."""
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
            yield _sse({**chunk, "choices": [], "usage": usage(spent[0], spent[1] + count_tokens("".join(answer), encoding))})
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
    prepared = await answer.ready()
    encoding = replica.settings.chunking.encoding
    keyword_prompt, keyword_completion = keyword_usage(question, prepared.keywords, prepared.llm_calls, encoding)
    prompt_tokens = keyword_prompt + message_tokens(prepared.messages, encoding)
    base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": request.model}
    if request.stream:
        include_usage = bool(request.stream_options and request.stream_options.include_usage)
        chunks = _chunks(answer, {**base, "object": "chat.completion.chunk"},
                         (prompt_tokens, keyword_completion), encoding, include_usage)
        return StreamingResponse(chunks, media_type="text/event-stream")
    text = await answer.complete()
    return {**base, "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": usage(prompt_tokens, keyword_completion + count_tokens(text, encoding))}
