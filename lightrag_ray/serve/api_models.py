"""Request and response bodies of the HTTP API (LightRAG Server's field names where it has them)."""

from __future__ import annotations

import logging
from copy import copy
from typing import Annotated, Any, Literal, NamedTuple, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, model_validator

from lightrag_ray.core.context import UNKNOWN_SOURCE, QueryContext
from lightrag_ray.core.subgraph import GRAPH_FIELD_SEP
from lightrag_ray.query.params import DEFAULT_MODE, MODES, QueryParam

CHAT_MODEL_PREFIX = "lightrag-"
OLLAMA_MODEL = "lightrag:latest"  # the one model of the Ollama API (LightRAG Server's name)
LOG = logging.getLogger("ray.serve")
_IGNORED: set[tuple[str, str]] = set()  # (body, field) already logged


class LightRAGBody(BaseModel):
    """A body LightRAG's clients send: an explicit null means the field's default, and
    unknown fields (other LightRAG versions) are ignored, each name logged once."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _drop_nulls(cls, data: Any) -> Any:
        """Nulls out (their defaults apply); unknown names logged the first time they come."""
        if not isinstance(data, dict):
            return data
        for name in sorted(data.keys() - cls.model_fields.keys()):
            if (cls.__name__, name) not in _IGNORED:
                _IGNORED.add((cls.__name__, name))
                LOG.info("%s: ignoring the unknown field %r", cls.__name__, name)
        return {key: value for key, value in data.items() if value is not None}


class Turn(LightRAGBody):
    """One message of ``conversation_history``; only user and assistant turns reach the answer prompt."""

    role: str = Field(..., min_length=1)
    content: str


class _Question(LightRAGBody):
    """A query body's first field, the question (the other fields follow in QueryParam's order)."""

    query: str = Field(..., min_length=1, description="The question.")


# QueryParam's fields that LightRAG's body names and types its own way: name -> (LightRAG's name, type, field).
_LIGHTRAG_FIELDS: dict[str, tuple[str, Any, Any]] = {
    "history": ("conversation_history", list[Turn], Field(default_factory=list, description=(
        "Earlier chat turns; only user and assistant turns reach the answer prompt."))),
    "instructions": ("user_prompt", str, Field("", description=(
        "Extra instructions for the answer (retrieval does not see them)."))),
}
_CAPPED = {"top_k": 1000, "chunk_top_k": 1000}  # the API's upper bounds (the engine has none)


def _query_fields() -> dict[str, tuple[Any, Any]]:
    """QueryParam's fields in its order, with their defaults and descriptions, under LightRAG's
    names where it has its own, and the API's upper bounds."""
    fields: dict[str, tuple[Any, Any]] = {}
    for name, field in QueryParam.model_fields.items():
        if name in _LIGHTRAG_FIELDS:
            renamed, annotation, info = _LIGHTRAG_FIELDS[name]
            fields[renamed] = (annotation, info)
        elif name in _CAPPED:
            fields[name] = (Annotated[field.annotation, Field(le=_CAPPED[name])], copy(field))
        else:
            fields[name] = (field.annotation, copy(field))
    return fields


# Fields made at import time from QueryParam: a type checker sees an open model (Any).
_QueryFields: Any = cast(Any, create_model)("_QueryFields", __base__=_Question, __module__=__name__, **_query_fields())


class QueryRequest(_QueryFields):
    """``POST /query``, ``/query/stream`` and ``/query/data``: every field of LightRAG
    1.5's QueryRequest (same defaults, except ``mode`` and ``response_type``); the engine's
    parameters come from QueryParam (empty keyword lists count as none, as in LightRAG)."""

    only_need_context: bool = Field(False, description="Return the context text instead of an answer.")
    only_need_prompt: bool = Field(False, description="Return the answer prompt instead of an answer.")
    include_references: bool = True
    include_chunk_content: bool = Field(False, description="Give each reference its passage texts as `content`.")
    stream: bool | None = Field(None, description="/query/stream: false sends the whole answer as one line; /query ignores it.")
    disable_user_prompt_prefix: bool = Field(False, description="Accepted; there is no server-side prompt prefix.")
    include_progress: bool = Field(False, description="Accepted; /query/stream sends no progress lines.")

    def param(self) -> QueryParam:
        """The engine's parameters for this request (empty keyword lists: none given)."""
        shared = {name: getattr(self, name) for name in QueryParam.model_fields if name not in _LIGHTRAG_FIELDS}
        return QueryParam(**{
            **shared, "hl_keywords": self.hl_keywords or None, "ll_keywords": self.ll_keywords or None,
            "history": [{"role": t.role, "content": t.content} for t in self.conversation_history
                        if t.role in ("user", "assistant")],
            "instructions": self.user_prompt,
        })

    def answer_references(self, context: QueryContext) -> list[dict[str, Any]] | None:
        """The references an answer carries: None unless asked for, with passages if asked for."""
        if not self.include_references:
            return None
        return references(context, with_content=self.include_chunk_content)


def references(context: QueryContext, with_content: bool = False) -> list[dict[str, Any]]:
    """LightRAG's reference list, one per file (``reference_id``, ``file_path``); ``with_content``:
    each also with the texts of its passages in the context, as ``content``."""
    if not with_content:
        return [dict(ref) for ref in context.references]
    texts: dict[str, list[str]] = {}
    for chunk in context.chunks:
        texts.setdefault(chunk["reference_id"], []).append(chunk["text"])
    return [{**ref, "content": texts.get(ref["reference_id"], [])} for ref in context.references]


def _provenance(item: dict[str, Any], numbers: dict[str, str]) -> dict[str, str]:
    """An entity's or relation's sources as LightRAG gives them: chunk ids and file paths
    ``<SEP>``-joined, and the reference of its first file that the context cites ("" if none)."""
    paths = item.get("file_paths") or []
    return {"source_id": GRAPH_FIELD_SEP.join(item["source_ids"]),
            "file_path": GRAPH_FIELD_SEP.join(paths) or UNKNOWN_SOURCE,
            "reference_id": next((numbers[path] for path in paths if path in numbers), "")}


def lightrag_entity(entity: dict[str, Any], numbers: dict[str, str]) -> dict[str, Any]:
    """An entity as LightRAG's ``/query/data`` lists it; ``numbers``: file path -> reference id."""
    return {"entity_name": entity["name"], "entity_type": entity["type"], "description": entity["description"],
            **_provenance(entity, numbers)}


def lightrag_relation(relation: dict[str, Any], numbers: dict[str, str]) -> dict[str, Any]:
    """A relation as LightRAG's ``/query/data`` lists it; ``numbers``: file path -> reference id."""
    return {"src_id": relation["source"], "tgt_id": relation["target"], "description": relation["description"],
            "keywords": relation["keywords"], "weight": float(relation["weight"]), **_provenance(relation, numbers)}


def lightrag_chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    """A passage as LightRAG's ``/query/data`` lists it, plus its document's ``doc_id``."""
    return {"content": chunk["text"], "file_path": chunk["file_path"] or UNKNOWN_SOURCE, "chunk_id": chunk["chunk_id"],
            "reference_id": chunk["reference_id"], "doc_id": chunk.get("doc_id", "")}


def lightrag_data(context: QueryContext) -> dict[str, list[dict[str, Any]]]:
    """``data`` of a ``/query/data`` answer: LightRAG's entities, relationships, chunks and references."""
    numbers = {ref["file_path"]: ref["reference_id"] for ref in context.references}
    return {"entities": [lightrag_entity(e, numbers) for e in context.entities],
            "relationships": [lightrag_relation(r, numbers) for r in context.relations],
            "chunks": [lightrag_chunk(c) for c in context.chunks], "references": references(context)}


def processing_info(context: QueryContext, mode: str) -> dict[str, int]:
    """LightRAG's ``metadata.processing_info`` counts: found before the token budgets, kept after."""
    found = context.found
    chunks = {"final_chunks_count": len(context.chunks)}
    if mode == "naive":
        return {"total_chunks_found": found.get("chunks", 0), **chunks}
    return {"total_entities_found": found.get("entities", 0), "total_relations_found": found.get("relations", 0),
            "entities_after_truncation": len(context.entities), "relations_after_truncation": len(context.relations),
            "merged_chunks_count": found.get("chunks", 0), **chunks}


class InsertTextRequest(LightRAGBody):
    """``POST /documents/text``."""

    text: str = Field(..., min_length=1)
    file_source: str = Field("", description="Name shown in references (e.g. the original file name).")


class InsertTextsRequest(LightRAGBody):
    """``POST /documents/texts``."""

    texts: list[str] = Field(..., min_length=1)
    file_sources: list[str] = Field(default_factory=list)


class InsertResponse(BaseModel):
    status: Literal["success", "duplicated"]
    message: str
    track_id: str
    doc_ids: list[str]


DocStatusName = Literal["pending", "parsing", "analyzing", "processing", "preprocessed", "processed", "failed"]


class DocumentsRequest(LightRAGBody):
    """``POST /documents/paginated`` (LightRAG's body)."""

    status_filter: DocStatusName | None = Field(None, description="One status to list; status_filters wins.")
    status_filters: list[DocStatusName] | None = Field(None, description="The statuses to list (none: all).")
    page: int = Field(1, ge=1)
    page_size: int = Field(50, ge=10, le=200)
    sort_field: Literal["created_at", "updated_at", "id", "file_path"] = "updated_at"
    sort_direction: Literal["asc", "desc"] = "desc"

    def statuses(self) -> set[str] | None:
        """The statuses asked for, None for all."""
        if self.status_filters:
            return set(self.status_filters)
        return {self.status_filter} if self.status_filter else None


class DeleteDocRequest(LightRAGBody):
    """``DELETE /documents/delete_document``."""

    doc_ids: list[str] = Field(..., min_length=1)
    delete_file: bool = Field(False, description="Not supported: the uploaded copy stays in the workspace's inbox/.")
    delete_llm_cache: bool = Field(False, description="Not supported: cached extractions stay (a re-insert reuses them).")

    def unsupported(self) -> str:
        """What of the request is not done, for the response message ("" when nothing)."""
        kept = [what for asked, what in ((self.delete_file, "the uploaded file (delete_file)"),
                                         (self.delete_llm_cache, "the cached LLM extractions (delete_llm_cache)")) if asked]
        return f"; not supported, kept: {' and '.join(kept)}" if kept else ""


class ClearCacheRequest(LightRAGBody):
    """``POST /documents/clear_cache``: no fields (LightRAG 1.5 clears the whole cache; older
    clients' ``modes`` is ignored)."""


class ClearDocumentsResponse(BaseModel):
    """``DELETE /documents`` (LightRAG's answer; ``busy`` while an insert job runs or is queued)."""

    status: Literal["success", "partial_success", "busy", "fail"]
    message: str


class ClearCacheResponse(BaseModel):
    """``POST /documents/clear_cache``."""

    status: Literal["success", "fail"]
    message: str


class ScanRequest(LightRAGBody):
    """``POST /documents/scan``: LightRAG's WebUI sends no body. ``prune`` (lightrag-ray's)
    also removes the documents whose file is gone from the input folder."""

    prune: bool = Field(False, description="also remove the documents whose file is gone from the input folder")


class ScanResponse(BaseModel):
    """``POST /documents/scan``; ``track_id`` names the insert job of the new files."""

    status: Literal["scanning_started", "scanning_skipped_pipeline_busy"]
    message: str | None = None
    track_id: str


class ReprocessResponse(BaseModel):
    """``POST /documents/reprocess_failed``; ``track_id`` names the new insert job ("" when none)."""

    status: Literal["reprocessing_started"]
    message: str
    track_id: str = ""


class CancelPipelineResponse(BaseModel):
    """``POST /documents/cancel_pipeline``."""

    status: Literal["cancellation_requested", "not_busy"]
    message: str


def _entity_name(name: str) -> str:
    """LightRAG's check of a name in a graph edit: not blank, surrounding spaces dropped."""
    if not name.strip():
        raise ValueError("Entity name cannot be empty")
    return name.strip()


EntityName = Annotated[str, AfterValidator(_entity_name)]


class EntityEditRequest(LightRAGBody):
    """``POST /graph/entity/edit``; ``updated_data["entity_name"]`` renames."""

    entity_name: EntityName
    updated_data: dict[str, Any]
    allow_rename: bool = False
    allow_merge: bool = Field(False, description="Renaming to an existing entity merges into it.")

    @model_validator(mode="after")
    def _new_name(self) -> EntityEditRequest:
        if "entity_name" in self.updated_data:
            new = self.updated_data["entity_name"]
            self.updated_data["entity_name"] = _entity_name(new if isinstance(new, str) else "")
        return self


class RelationEditRequest(LightRAGBody):
    """``POST /graph/relation/edit``: the relation between two entities, either way round."""

    source_id: EntityName
    target_id: EntityName
    updated_data: dict[str, Any]


class EntityCreateRequest(LightRAGBody):
    """``POST /graph/entity/create``: ``entity_data`` holds description, entity_type, source_id, file_path."""

    entity_name: EntityName
    entity_data: dict[str, Any]


class RelationCreateRequest(LightRAGBody):
    """``POST /graph/relation/create``: ``relation_data`` holds description, keywords, weight, source_id, file_path."""

    source_entity: EntityName
    target_entity: EntityName
    relation_data: dict[str, Any]


class DeleteEntityRequest(LightRAGBody):
    """``DELETE /graph/entity/delete`` (and ``/documents/delete_entity``)."""

    entity_name: EntityName


class DeleteRelationRequest(LightRAGBody):
    """``DELETE /graph/relation/delete`` (and ``/documents/delete_relation``)."""

    source_entity: EntityName
    target_entity: EntityName


class EntityMergeRequest(LightRAGBody):
    """``POST /graph/entities/merge``."""

    entities_to_change: list[EntityName] = Field(..., min_length=1, description="Entities merged away.")
    entity_to_change_into: EntityName = Field(..., description="The entity they become (created if missing).")


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


class ChatRequest(BaseModel):
    """A chat whose last user message is the question; other fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    messages: list[ChatMessage] = Field(..., min_length=1)

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


class ChatCompletionRequest(ChatRequest):
    """``POST /v1/chat/completions``; other OpenAI fields are accepted and ignored."""

    model: str = f"{CHAT_MODEL_PREFIX}{DEFAULT_MODE}"
    stream: bool = False
    stream_options: StreamOptions | None = None


class OllamaChatRequest(ChatRequest):
    """Ollama's ``POST /api/chat``; ``images``, ``options``, ``format``, ``keep_alive``, ``tools``
    and other Ollama fields are accepted and ignored."""

    model: str = OLLAMA_MODEL
    stream: bool = True
    system: str = Field("", description="Instructions for the answer, as system messages are (LightRAG Server's field).")


class OllamaGenerateRequest(BaseModel):
    """Ollama's ``POST /api/generate``; other Ollama fields are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: str = OLLAMA_MODEL
    prompt: str = Field(..., min_length=1)
    system: str = ""
    stream: bool = True
