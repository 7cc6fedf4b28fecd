"""LightRAG Server's query routes: ``POST /query`` (an answer, or the context or prompt alone),
``/query/stream`` (references, then the answer's pieces, as NDJSON) and ``/query/data``
(retrieval only, in LightRAG's shape). Answers come from the engine's ``query`` and ``stream``."""

# No `from __future__ import annotations`: FastAPI must see the real types of the route parameters.
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from lightrag_ray.models.llm import LLMError
from lightrag_ray.serve.api_models import QueryRequest, lightrag_data, processing_info
from lightrag_ray.serve.deployments import llm_failure
from lightrag_ray.serve.routes.replica import ReplicaDep, SpaceDep, need_llm

router = APIRouter()


@router.post("/query")
async def query(request: QueryRequest, replica: ReplicaDep, space: SpaceDep) -> dict[str, Any]:
    """Answer a question (or, with only_need_context / only_need_prompt, return the context
    text / the prompt); ``llm_generated`` says whether the LLM wrote the response."""
    started = time.perf_counter()
    generate = not (request.only_need_context or request.only_need_prompt)
    if generate:
        need_llm(replica)
    result = await (await space.engine()).query(request.query, request.param(), generate=generate)
    if request.only_need_context:
        response = result.context.text
    elif request.only_need_prompt:
        response = "\n\n".join(m["content"] for m in result.messages)
    else:
        response = result.answer
    return {"response": response, "references": request.answer_references(result.context),
            "response_time": round(time.perf_counter() - started, 3), "llm_generated": generate,
            "usage": result.usage.to_dict()}


@router.post("/query/stream")
async def query_stream(request: QueryRequest, replica: ReplicaDep, space: SpaceDep) -> StreamingResponse:
    """The answer as newline-delimited JSON: references first, then response pieces, then a line
    with its ``usage``; with ``stream: false`` one line holding the whole answer, the references
    (LightRAG's) and the usage. With only_need_context / only_need_prompt, one line holding that
    text (no LLM needed)."""
    if request.only_need_context or request.only_need_prompt:
        whole = await query(request, replica, space)
        line = {"response": whole["response"], "llm_generated": False,
                **({"references": whole["references"]} if whole["references"] is not None else {})}
        return StreamingResponse(iter([json.dumps(line) + "\n"]), media_type="application/x-ndjson")
    need_llm(replica)
    answer = (await space.engine()).stream(request.query, request.param())
    refs = request.answer_references((await answer.ready()).context)  # retrieval fails here, with its status

    async def lines() -> AsyncIterator[str]:
        try:
            if request.stream is False:
                text = await answer.complete()
                yield json.dumps({"response": text, "llm_generated": True,
                                  **({"references": refs} if refs is not None else {}),
                                  "usage": answer.usage(text).to_dict()}) + "\n"
                return
            if refs is not None:
                yield json.dumps({"references": refs}) + "\n"
            pieces = []
            async for piece in answer:
                pieces.append(piece)
                yield json.dumps({"response": piece}) + "\n"
            yield json.dumps({"usage": answer.usage("".join(pieces)).to_dict()}) + "\n"
        except LLMError as exc:
            yield json.dumps({"error": llm_failure(exc)}) + "\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")


@router.post("/query/data")
async def query_data(request: QueryRequest, space: SpaceDep) -> dict[str, Any]:
    """Retrieval only, in LightRAG's shape: entities, relationships, chunks and per-file
    references, no generation; ``metadata.usage``: the keyword call's tokens (in metadata: LightRAG's
    clients expect its four top-level keys)."""
    started = time.perf_counter()
    result = await (await space.engine()).query(request.query, request.param(), generate=False)
    context, keywords = result.context, result.keywords
    ours = {"llm_calls": result.llm_calls, "seconds": round(time.perf_counter() - started, 4),
            "context_tokens_budget": request.max_total_tokens}
    return {
        "status": "success",
        "message": "Query processed successfully",
        "data": lightrag_data(context),
        "metadata": {
            "query_mode": request.mode,
            "keywords": {"high_level": keywords.high, "low_level": keywords.low},
            "processing_info": {**processing_info(context, request.mode), **ours},
            "retrieval": context.retrieval,
            "usage": result.usage.to_dict(),
        },
    }
