"""Request and response bodies of the HTTP API (LightRAG Server's field names where it has them)."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from lightrag_ray.query.engine import DEFAULT_MODE, Mode, QueryParam

CHAT_MODEL_PREFIX = "lightrag-"
MODES: tuple[str, ...] = ("mix", "local", "global", "hybrid", "naive", "walk", "bypass")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Turn(_Strict):
    role: Literal["system", "user", "assistant"]
    content: str


class QueryRequest(_Strict):
    """``POST /query``, ``/query/stream`` and ``/query/data``."""

    query: str = Field(..., min_length=1, description="The question.")
    mode: Mode = DEFAULT_MODE
    top_k: int = Field(40, gt=0, le=1000)
    chunk_top_k: int = Field(20, gt=0, le=1000)
    max_entity_tokens: int = Field(6000, gt=0)
    max_relation_tokens: int = Field(8000, gt=0)
    max_total_tokens: int = Field(30000, gt=0)
    hl_keywords: list[str] | None = None
    ll_keywords: list[str] | None = None
    conversation_history: list[Turn] = Field(default_factory=list)
    response_type: str = ""
    only_need_context: bool = Field(False, description="Return the context text instead of an answer.")
    include_references: bool = True

    def param(self) -> QueryParam:
        """The engine's parameters for this request."""
        return QueryParam(
            mode=self.mode, top_k=self.top_k, chunk_top_k=self.chunk_top_k,
            max_entity_tokens=self.max_entity_tokens, max_relation_tokens=self.max_relation_tokens,
            max_total_tokens=self.max_total_tokens, hl_keywords=self.hl_keywords, ll_keywords=self.ll_keywords,
            history=[t.model_dump() for t in self.conversation_history if t.role != "system"],
            response_type=self.response_type,
        )


def references(context_refs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """LightRAG's reference list: number as a string, and the file (plus chunk id)."""
    return [{"reference_id": str(r["ref"]), "file_path": r["file_path"], "chunk_id": r["chunk_id"]} for r in context_refs]


class InsertTextRequest(_Strict):
    """``POST /documents/text``."""

    text: str = Field(..., min_length=1)
    file_source: str = Field("", description="Name shown in references (e.g. the original file name).")


class InsertTextsRequest(_Strict):
    """``POST /documents/texts``."""

    texts: list[str] = Field(..., min_length=1)
    file_sources: list[str] = Field(default_factory=list)


class InsertResponse(BaseModel):
    status: Literal["success", "duplicated"]
    message: str
    track_id: str
    doc_ids: list[str]


class DeleteDocRequest(_Strict):
    """``DELETE /documents/delete_document``."""

    doc_ids: list[str] = Field(..., min_length=1)


def chat_mode(model: str) -> str | None:
    """The query mode a chat model name selects (``lightrag-local``: local; ``lightrag``:
    the default), or None for an unknown model."""
    if model == CHAT_MODEL_PREFIX.rstrip("-"):
        return DEFAULT_MODE
    mode = model.removeprefix(CHAT_MODEL_PREFIX)
    return mode if model.startswith(CHAT_MODEL_PREFIX) and mode in MODES else None


class ContentPart(BaseModel):
    """One part of a message's content; only ``text`` parts are read (images are skipped)."""

    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    """An OpenAI chat message; ``content`` may be a string, a list of parts or null."""

    role: str
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        """The message's text: the string, or its text parts joined by newlines ("" if none)."""
        if isinstance(self.content, list):
            return "\n".join(part.text for part in self.content if part.type == "text" and part.text)
        return self.content or ""


class StreamOptions(BaseModel):
    """OpenAI's ``stream_options``: ``include_usage`` adds a last chunk with the usage."""

    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatPrompt(NamedTuple):
    """What a chat request asks: the question, the turns before it, the system instructions."""

    question: str
    history: list[dict[str, str]]
    instructions: str


class ChatCompletionRequest(BaseModel):
    """``POST /v1/chat/completions``; other OpenAI fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = f"{CHAT_MODEL_PREFIX}{DEFAULT_MODE}"
    messages: list[ChatMessage] = Field(..., min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None

    def prompt(self) -> ChatPrompt:
        """The last user message (the question), the user/assistant turns before it and the
        system (or developer) messages joined; ValueError when there is no question."""
        users = [i for i, m in enumerate(self.messages) if m.role == "user"]
        if not users:
            raise ValueError("messages hold no user message to answer")
        last = users[-1]
        question = self.messages[last].text()
        if not question.strip():
            raise ValueError("the last user message has no text to answer (content parts other than text are not read)")
        history = [{"role": m.role, "content": m.text()} for m in self.messages[:last]
                   if m.role in ("user", "assistant") and m.text()]
        instructions = "\n\n".join(m.text() for m in self.messages if m.role in ("system", "developer") and m.text())
        return ChatPrompt(question, history, instructions)
