"""Dual-level retrieval and answer generation: one function for the CLI, Serve and tests.

Modes (LightRAG's): ``local`` low-level keywords -> entities -> their one-hop relations;
``global`` high-level keywords -> relations -> their endpoint entities; ``hybrid`` both;
``mix`` hybrid plus chunk vectors; ``naive`` chunk vectors only; ``bypass`` the LLM
alone. Ours: ``walk`` (default) passages ranked by a personalized PageRank from the
question's entities and best passages over the entity-passage graph (query.walk), with the
entities it visits most and the relations among them. Graph
passages (and ``mix``'s vector passages with them) are ranked by their similarity to the
question, less a penalty for their place in the graph order (core.ranking.relevance_ranking).
A query makes one keyword call (skipped when keywords are given) and one generation call.
Every answer, whole (``query``) or streamed (``stream``), is prepared by ``prepare_answer``
(retrieval and the answer prompt); the modes and ``QueryParam`` are in query.params.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from lightrag_ray.config import Settings
from lightrag_ray.core import prompts
from lightrag_ray.core.context import Budgets, QueryContext, build_context
from lightrag_ray.core.keywords import Keywords, keywords_without_llm, parse_keywords
from lightrag_ray.core.ranking import graph_chunk_ranking, interleave, rank_local_relations, relevance_ranking
from lightrag_ray.core.tokenizer import count_tokens, message_tokens
from lightrag_ray.models.llm import LLMClient
from lightrag_ray.models.rerank import Reranker, RerankError
from lightrag_ray.models.usage import CallKind, LLMCall, TokenUsage
from lightrag_ray.query.fusion import fuse, lexical_weight
from lightrag_ray.query.params import DEFAULT_MODE, QueryParam
from lightrag_ray.query.query_metrics import begin_query, context_returned, observe_step, timed
from lightrag_ray.query.stores import GraphLookup, TextEmbedder, VectorIndex
from lightrag_ray.query.walk import WalkWeights, lexical_passages, walk_ranking

__all__ = ["DEFAULT_MODE", "AnswerStream", "AnswerUsage", "Prepared", "QueryEngine", "QueryParam", "QueryResult"]  # params: re-exported
LOG = logging.getLogger(__name__)
DENSE_ONLY = ("vectors only: this workspace's collections have no BM25 text yet; "
              "`lightrag-ray upgrade` or the next index run adds it (no LLM call)")
TEXT_KINDS_TTL_S = 30.0
FUSION_DEPTH = 40  # hits of each ranking fused, at least (the first top_k of a fusion do not depend on top_k)
# Which search vectors a mode uses: the question finds passages (and ranks graph passages),
# the low-level keywords entities, the high-level keywords relations, each low-level keyword
# its own entity (walk).
SEARCH_TEXTS: dict[str, tuple[str, ...]] = {
    "naive": ("question",), "local": ("question", "low"), "global": ("question", "high"),
    "hybrid": ("question", "low", "high"), "mix": ("question", "low", "high"), "walk": ("question", "names"),
    "bypass": (),
}
# The question's nearest passages whose similarity ranks the graph passages (others count as
# no more similar than the last of them); one search, side by side with the graph reads.
SIMILARITY_POOL = 100
CHUNK_FIELDS = ["id", "text", "file_path", "doc_id", "order", "text_tokens"]  # text_tokens: absent in older indexes
# What each collection's search returns: passages come whole, so the hits need no lookup.
SEARCH_FIELDS = {"entities": ["id", "key"], "relations": ["id", "source_key", "target_key"], "chunks": CHUNK_FIELDS}
LOG = logging.getLogger("ray.serve")  # a Serve replica's log (the CLI shows only warnings)


@dataclass
class SearchVectors:
    """The embedded search texts of one question (None where the mode needs none)."""

    question: np.ndarray | None = None
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    names: np.ndarray | None = None  # one row per low-level keyword
    text: str = ""  # the BM25 query: the question and its low-level keywords


@dataclass
class Prepared:
    """What an answer is generated from: the question, the retrieved context, its keywords, the
    LLM calls retrieval made, their token usage and the messages of the answer call."""

    question: str
    context: QueryContext
    keywords: Keywords
    llm_calls: int
    usage: TokenUsage
    messages: list[dict[str, str]]


@dataclass(frozen=True)
class AnswerUsage:
    """The tokens an answer used (its keyword call and answer call): the server's figures, or
    a tiktoken estimate (``estimated``) when it did not report them for every call."""

    prompt_tokens: int
    completion_tokens: int
    estimated: bool

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        """The response's ``usage`` object (OpenAI's fields plus ``estimated``)."""
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens, "estimated": self.estimated}


def answer_usage(prepared: Prepared, answer: str, answered: TokenUsage, generated: bool, encoding: str,
                 keywords: bool = True) -> AnswerUsage:
    """What an answer used: the answer call's usage (``answered``; no answer call unless
    ``generated``), and with ``keywords`` the keyword call's (``prepared.usage``), when the server
    reported every call's; else the estimate of their messages and answers."""
    keyword_calls = prepared.llm_calls if keywords else 0
    spent = (prepared.usage if keywords else TokenUsage()) + answered
    if spent.known and spent.calls == keyword_calls + int(generated):
        return AnswerUsage(spent.prompt, spent.completion, estimated=False)
    prompt = message_tokens(prepared.messages, encoding) if generated else 0
    completion = count_tokens(answer, encoding)
    if keyword_calls:
        prompt += message_tokens(prompts.keywords_messages(prepared.question), encoding)
        completion += count_tokens(prepared.keywords.answer, encoding)
    return AnswerUsage(prompt, completion, estimated=True)


@dataclass
class QueryResult:
    """An answer with the context and keywords it came from, the tokens it used (and the answer
    call's messages, which ``to_dict`` leaves out)."""

    answer: str
    context: QueryContext
    keywords: Keywords
    mode: str
    llm_calls: int
    usage: AnswerUsage
    messages: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The answer, context, keywords, mode, LLM calls and usage as JSON-ready values."""
        found = {key: value for key, value in asdict(self).items() if key != "messages"}
        return {**found, "context": self.context.to_dict(), "keywords": asdict(self.keywords),
                "usage": self.usage.to_dict()}


class QueryEngine:
    """Answers questions from a workspace's vectors and graph (the stores' protocols are
    in query.stores; every read is awaited, none blocks the event loop)."""

    def __init__(
        self, settings: Settings, embedder: TextEmbedder, vectors: VectorIndex, graph: GraphLookup,
        llm: LLMClient | None = None, reranker: Reranker | None = None,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.vectors = vectors
        self.graph = graph
        self.llm = llm
        self.reranker = reranker
        self.walk_weights = WalkWeights()  # the measured defaults; scripts/bench_hotpotqa.py --walk-sweep varies them
        self._lexical_kinds: set[str] | None = None
        self._lexical_read = 0.0
        self._said_dense_only = False

    # ---- keywords -------------------------------------------------------------------
    def llm_call(self, kind: CallKind) -> LLMCall:
        """A call of ``kind`` for this engine's workspace (its usage adds up in it)."""
        return LLMCall.of(self.settings, kind)

    async def keywords(self, question: str, param: QueryParam,
                       call: LLMCall | None = None) -> tuple[Keywords, int]:
        """Given keywords, or one LLM call (its usage into ``call``), or (no LLM) names found in the question."""
        if param.hl_keywords is not None or param.ll_keywords is not None:
            return Keywords(param.hl_keywords or [], param.ll_keywords or []), 0
        if self.llm is None:
            return keywords_without_llm(question), 0
        answer = await timed("keywords", self.llm.complete(prompts.keywords_messages(question), call=call))
        found = parse_keywords(answer)
        return Keywords(found.high or [question], found.low or [question], answer), 1

    # ---- retrieval ------------------------------------------------------------------
    async def _search(self, kind: str, vector: Any, top_k: int, fields: list[str] | None = None,
                      version: int | None = None) -> list[dict[str, Any]]:
        fields = fields or SEARCH_FIELDS[kind]
        hits = await timed("vector_search", self.vectors.search(kind, np.asarray([vector], dtype=np.float32), top_k,
                                                                fields, version))
        return hits[0]

    async def _passage_version(self) -> int | None:
        """The graph version whose passages a chunk search may return, None when every stored
        passage is of the published graph (no write job open or leaving old rows behind): a
        reader sees each document's old version or its new one, never both."""
        found = await self.graph.read_version()
        return None if found["settled"] else found["version"]

    async def _text_kinds(self) -> set[str]:
        """The collections that answer BM25 searches (read again every TEXT_KINDS_TTL_S: an
        upgrade elsewhere shows within that)."""
        now = time.monotonic()
        if self._lexical_kinds is None or now - self._lexical_read > TEXT_KINDS_TTL_S:
            self._lexical_kinds, self._lexical_read = set(await self.vectors.text_kinds()), now
        return self._lexical_kinds

    async def _fused_search(self, kind: str, vector: Any, text: str, top_k: int, weight: float,
                            fields: list[str] | None = None, version: int | None = None) -> list[dict[str, Any]]:
        """The ``top_k`` hits of ``vector`` fused with the BM25 hits of ``text`` (query.fusion),
        both searched side by side; the vector hits alone at weight 0 or without BM25 text."""
        fields = fields or SEARCH_FIELDS[kind]
        if weight <= 0 or kind not in await self._text_kinds():
            return await self._search(kind, vector, top_k, fields, version)
        depth = max(top_k, FUSION_DEPTH)
        dense, lexical = await asyncio.gather(
            self._search(kind, vector, depth, fields, version),
            timed("text_search", self.vectors.text_search(kind, [text], depth, fields, version)))
        return fuse(dense, lexical[0], weight)[:top_k]

    async def _graph_items(self, mode: str, vectors: SearchVectors, top_k: int, weight: float) -> tuple[list, list]:
        want_local, want_global = mode in ("local", "hybrid", "mix"), mode in ("global", "hybrid", "mix")
        (local_e, local_r), (global_e, global_r) = await asyncio.gather(
            self._local_items(vectors.low, vectors.text, top_k, weight) if want_local else _no_items(),
            self._global_items(vectors.high, vectors.text, top_k, weight) if want_global else _no_items(),
        )  # both levels at once: one search and one graph round each, side by side
        return interleave(local_e, global_e), interleave(local_r, global_r)

    async def _local_items(self, ll_vector: Any, text: str, top_k: int, weight: float) -> tuple[list, list]:
        """Entities found by the low-level keywords (and BM25), their top relations."""
        hits = await self._fused_search("entities", ll_vector, text, top_k, weight)
        return await self._entities_with_relations([hit["key"] for hit in hits], top_k)

    async def _entities_with_relations(self, keys: list[str], top_k: int) -> tuple[list, list]:
        """The entities ``keys`` (best first) and their ``top_k`` best relations, those among
        them first (one graph round)."""
        if not keys:
            return [], []
        found = await timed("graph", self.graph.neighborhood(keys, top_k))  # shards cut to top_k before building views
        by_key = {e["key"]: e for e in found["entities"]}
        return [by_key[k] for k in keys if k in by_key], rank_local_relations(found["relations"], keys)[:top_k]

    async def _global_items(self, hl_vector: Any, text: str, top_k: int, weight: float) -> tuple[list, list]:
        """Relations found by the high-level keywords (and BM25), their end entities."""
        hits = await self._fused_search("relations", hl_vector, text, top_k, weight)
        if not hits:
            return [], []
        pairs = [(hit["source_key"], hit["target_key"]) for hit in hits]
        ends = list(dict.fromkeys(key for pair in pairs for key in pair))[:top_k]  # only the end entities kept
        found = await timed("graph", self.graph.fetch(ends, pairs))
        return found["entities"], found["relations"]

    async def _chunks(self, ids: list[str], known: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The passages ``ids`` in order: ``known`` rows (from the chunk search) and the others
        looked up by id."""
        by_id = {row["id"]: {k: v for k, v in row.items() if k != "score"} for row in known}
        missing = [i for i in ids if i not in by_id]
        if missing:
            by_id.update((row["id"], row) for row in await self.vectors.get("chunks", missing, CHUNK_FIELDS))
        return [{**by_id[i], "chunk_id": i} for i in ids if i in by_id]

    async def search_vectors(self, question: str, param: QueryParam,
                             call: LLMCall | None = None) -> tuple[Keywords, int, SearchVectors]:
        """Keywords, LLM calls made (their usage into ``call``) and the search vectors ``param.mode``
        uses: the question (passages), the low-level keywords (entities), the high-level keywords
        (relations). Each distinct text is embedded once, in one call."""
        calls = 0
        keywords = Keywords()
        if param.mode != "naive":
            keywords, calls = await self.keywords(question, param, call)
        texts = {"question": [question], "low": [", ".join(keywords.low) or question],
                 "high": [", ".join(keywords.high) or question], "names": keywords.low}
        wanted = {name: texts[name] for name in SEARCH_TEXTS[param.mode]}
        distinct = list(dict.fromkeys(text for group in wanted.values() for text in group))
        rows = dict(zip(distinct, await self.embedder.embed(distinct))) if distinct else {}
        found = {name: np.asarray([rows[text] for text in group], dtype=np.float32) for name, group in wanted.items()}
        blocks = {name: block if name == "names" else block[0] for name, block in found.items()}
        return keywords, calls, SearchVectors(**blocks, text=" ".join([question, *keywords.low]))

    async def retrieve(self, question: str, param: QueryParam,
                       call: LLMCall | None = None) -> tuple[QueryContext, Keywords, int]:
        """The context for ``question`` (no generation), its keywords and LLM calls made (their
        usage into ``call``)."""
        begin_query(param.mode, self.settings.workspace)
        if param.mode == "bypass":
            return QueryContext(), Keywords(), 0
        (keywords, calls, vectors), version, weight = await asyncio.gather(
            self.search_vectors(question, param, call), self._passage_version(), self._lexical_weight(param))
        if param.mode == "walk":  # the most visited entities and the passages, read side by side
            walked = await timed("walk", walk_ranking(
                self.vectors, self.graph, vectors.question, keywords.low, vectors.names,
                param.chunk_top_k, self.walk_weights, version, vectors.text, weight))
            (entities, relations), chunks = await asyncio.gather(
                self._entities_with_relations(walked.entity_keys[: param.top_k], param.top_k),
                self._chunks(walked.chunk_ids[: param.chunk_top_k], []))
        elif param.mode == "naive":
            entities, relations = [], []
            hits = await self._fused_search("chunks", vectors.question, vectors.text, param.chunk_top_k, weight, version=version)
            chunks = await self._chunks([hit["id"] for hit in hits], hits)
        else:  # the pool's ids and scores only: the few passages kept are read by id
            (entities, relations), pool, lexical = await asyncio.gather(
                self._graph_items(param.mode, vectors, param.top_k, weight),
                self._search("chunks", vectors.question, max(param.chunk_top_k, SIMILARITY_POOL), ["id"], version),
                lexical_passages(self.vectors, vectors.text, param.chunk_top_k, weight if param.mode == "mix" else 0, version))
            ids = self._graph_chunk_ids(param, entities, relations, pool, fuse(pool[: param.chunk_top_k], lexical, weight))
            chunks = await self._chunks(ids[: param.chunk_top_k], [])
        chunks, rerank = await self._reranked(question, chunks, param)
        reserved = self._reserved_tokens(question, param)
        budgets = Budgets(param.max_entity_tokens, param.max_relation_tokens, param.max_total_tokens)
        context = build_context(entities, relations, chunks, budgets, reserved_tokens=reserved,
                                encoding=self.settings.chunking.encoding)
        context.retrieval.update(lexical=_lexical_note(param, weight), rerank=rerank)
        context_returned(param.mode, len(context.chunks), len(context.entities) + len(context.relations))
        return context, keywords, calls

    async def _lexical_weight(self, param: QueryParam) -> float:
        """The BM25 weight of this query: its own or its mode's, 0 when the workspace has no
        BM25 text yet (one notice per engine)."""
        weight = lexical_weight(param.mode, param.lexical_weight)
        if weight > 0 and not await self._text_kinds():
            if not self._said_dense_only:
                self._said_dense_only = True
                LOG.warning("workspace %s: %s", self.settings.workspace, DENSE_ONLY)
            return 0.0
        return weight

    async def _reranked(self, question: str, chunks: list[dict[str, Any]],
                        param: QueryParam) -> tuple[list[dict[str, Any]], str]:
        """The final passages ordered by the reranker's scores (best first, ties in their order)
        and what the context's ``retrieval`` says of it (``rerank``). They keep their order with
        ``enable_rerank`` off, without a reranker, or when it fails (logged: a query still answers)."""
        if not param.enable_rerank:
            return chunks, "off"
        if self.reranker is None:
            _no_reranker_notice()
            return chunks, "no reranker configured"
        try:
            scores = await timed("rerank", self.reranker.scores(question, [chunk["text"] for chunk in chunks]))
        except RerankError as exc:
            LOG.warning("reranking failed, the passages keep their retrieval order: %s", exc)
            return chunks, f"failed, retrieval order kept: {exc}"
        order = sorted(range(len(chunks)), key=lambda i: -scores[i])  # a stable sort: ties keep their order
        return [chunks[i] for i in order], f"reranked by {self.reranker.model}"

    @staticmethod
    def _graph_chunk_ids(param: QueryParam, entities: list, relations: list, pool: list[dict[str, Any]],
                         searched: list[dict[str, Any]]) -> list[str]:
        """Passages of the ranked graph items (``mix``: and the ``searched`` passages after them),
        ranked by their similarity to the question, read from ``pool`` (the question's nearest
        passages, best first), less a penalty for their place in the graph order."""
        candidates = graph_chunk_ranking(entities, relations)
        if param.mode == "mix":
            candidates = list(dict.fromkeys(candidates + [hit["id"] for hit in searched[: param.chunk_top_k]]))
        similarity = {hit["id"]: hit["score"] for hit in pool}
        return relevance_ranking(candidates, similarity, pool[-1]["score"] if pool else 0.0)

    def _reserved_tokens(self, question: str, param: QueryParam) -> int:
        messages = prompts.answer_messages(question, "", param.history, param.response_type, param.instructions)
        return sum(count_tokens(m["content"], self.settings.chunking.encoding) + 4 for m in messages)

    # ---- generation -----------------------------------------------------------------
    def require_llm(self) -> LLMClient:
        """The LLM that writes answers; ValueError when none is configured."""
        if self.llm is None:
            raise ValueError("no LLM configured for answers: set llm.backend/llm.base_url, or ask for the context only")
        return self.llm

    async def prepare_answer(self, question: str, param: QueryParam) -> Prepared:
        """Retrieval and the answer prompt: the one step every answer (``query``, ``stream``) takes."""
        call = self.llm_call("keywords")
        context, keywords, calls = await self.retrieve(question, param, call)
        return Prepared(question, context, keywords, calls, call.usage, self._answer_messages(question, context, param))

    async def query(self, question: str, param: QueryParam | None = None, generate: bool = True) -> QueryResult:
        """Retrieve, then generate one answer that cites the numbered passages; ``generate=False``:
        no answer call (the answer is ""), the result holds the context and the prompt."""
        param = param or QueryParam()
        llm = self.require_llm() if generate else None
        prepared = await self.prepare_answer(question, param)
        call = self.llm_call("answer")
        answer = await timed("llm", llm.complete(prepared.messages, call=call)) if llm is not None else ""
        usage = answer_usage(prepared, answer, call.usage, generate, self.settings.chunking.encoding)
        return QueryResult(answer, prepared.context, prepared.keywords, param.mode,
                           prepared.llm_calls + int(generate), usage, prepared.messages)

    def stream(self, question: str, param: QueryParam | None = None) -> AnswerStream:
        """The answer as it is generated: iterate it for the pieces (retrieval runs first)."""
        return AnswerStream(self, question, param or QueryParam())

    def _answer_messages(self, question: str, context: QueryContext, param: QueryParam) -> list[dict[str, str]]:
        """The messages of the answer call (bypass: the caller's instructions, history and question)."""
        if param.mode == "bypass":
            system = [{"role": "system", "content": param.instructions}] if param.instructions else []
            return [*system, *param.history, {"role": "user", "content": question}]
        text = context.text or "(nothing relevant was found in the knowledge base)"
        return prompts.answer_messages(question, text, param.history, param.response_type, param.instructions)


class AnswerStream:
    """One answer as the LLM generates it. ``await ready()`` retrieves and builds the prompt
    (once), so the context, keywords, LLM calls and messages are known before the first piece;
    iterating yields the pieces (calling ``ready`` first); ``complete()`` gets the whole answer
    from one call instead, for a client that asked for no streaming. ``usage(answer)`` says
    what it used once it ended."""

    def __init__(self, engine: QueryEngine, question: str, param: QueryParam) -> None:
        self.engine = engine
        self.question = question
        self.param = param
        self.prepared: Prepared | None = None
        self.call = engine.llm_call("answer")

    async def ready(self) -> Prepared:
        """What the answer is generated from; ValueError when no LLM is configured."""
        self.engine.require_llm()
        if self.prepared is None:
            self.prepared = await self.engine.prepare_answer(self.question, self.param)
        return self.prepared

    def __aiter__(self) -> AsyncIterator[str]:
        return self._pieces()

    async def _pieces(self) -> AsyncIterator[str]:
        messages = (await self.ready()).messages
        started = time.perf_counter()
        async for piece in self.engine.require_llm().stream(messages, call=self.call):
            yield piece
        observe_step("llm", time.perf_counter() - started)

    async def complete(self) -> str:
        """The whole answer from one (not streamed) LLM call."""
        messages = (await self.ready()).messages
        return await timed("llm", self.engine.require_llm().complete(messages, call=self.call))

    def usage(self, answer: str, keywords: bool = True) -> AnswerUsage:
        """What the ended answer (its text ``answer``) used: its LLM call, and with ``keywords``
        the keyword call."""
        if self.prepared is None:
            raise RuntimeError("the answer has not been prepared")
        return answer_usage(self.prepared, answer, self.call.usage, True, self.engine.settings.chunking.encoding,
                            keywords)


async def _no_items() -> tuple[list, list]:
    return [], []


def _lexical_note(param: QueryParam, weight: float) -> str:
    """How the passages and seeds were searched, for the response's metadata."""
    if weight > 0:
        return f"vectors and BM25 fused (weight {weight:g})"
    if param.mode != "bypass" and lexical_weight(param.mode, param.lexical_weight) > 0:
        return DENSE_ONLY
    return "vectors only"


@functools.cache
def _no_reranker_notice() -> None:
    """Say once per process that queries ask for reranking that no reranker does."""
    LOG.info("queries ask for reranking (enable_rerank) but no reranker is configured (rerank.backend: none): "
             "passages keep their retrieval order")
