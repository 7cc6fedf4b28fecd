"""How to answer one question: the query modes and ``QueryParam``, defined once.

The HTTP bodies (serve.api_models), the OpenAI and Ollama model names and the CLI's
``query`` flags are derived from these. A module of its own, without the engine's imports
(numpy, scipy, the models), so that the CLI can build its flags without loading them.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

# LightRAG's modes (mix first, LightRAG's default), ours (walk), then the LLM alone (bypass).
Mode = Literal["mix", "local", "global", "hybrid", "naive", "walk", "bypass"]
MODES: tuple[Mode, ...] = get_args(Mode)
RETRIEVAL_MODES: tuple[Mode, ...] = tuple(m for m in MODES if m != "bypass")  # the modes that build a context
DEFAULT_MODE: Mode = "walk"  # the best at equal context size (docs/benchmarks.md, HotpotQA)


class QueryParam(BaseModel):
    """How to answer one question."""

    model_config = ConfigDict(extra="forbid")

    mode: Mode = Field(DEFAULT_MODE, description="How the context is retrieved (bypass: no context, the LLM alone).")
    top_k: int = Field(40, gt=0, description="Entities (local) / relations (global) retrieved.")
    chunk_top_k: int = Field(20, gt=0, description="Source passages kept before the token budget.")
    max_entity_tokens: int = Field(6000, gt=0, description="Token budget of the context's entities.")
    max_relation_tokens: int = Field(8000, gt=0, description="Token budget of the context's relations.")
    max_total_tokens: int = Field(30000, gt=0, description="Token budget of the whole answer prompt.")
    hl_keywords: list[str] | None = Field(
        None, description="Themes to search by; none in both keyword lists: the LLM extracts them.")
    ll_keywords: list[str] | None = Field(
        None, description="Names to search by; none in both keyword lists: the LLM extracts them.")
    lexical_weight: float | None = Field(
        None, ge=0, description="Weight of the BM25 word matches fused with the vector matches (reciprocal-rank "
        "fusion; 0: vectors only); none: the mode's measured default.")
    history: list[dict[str, str]] = Field(default_factory=list, description="Earlier chat turns.")
    response_type: str = Field("", description="Answer style, e.g. 'bullet points'.")
    instructions: str = Field("", description="The caller's own instructions for the answer (OpenAI system messages).")
    enable_rerank: bool = Field(
        True, description="Reorder the final passages by the reranker's scores (setting rerank.backend); "
        "without a reranker configured it does nothing.")
