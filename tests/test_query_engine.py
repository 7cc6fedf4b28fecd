"""QueryEngine on in-memory stores: retrieval, ranking, budgets and generation, no Ray."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lightrag_ray.config import load_settings
from lightrag_ray.core.ids import chunk_id, doc_id
from lightrag_ray.core.names import entity_key
from lightrag_ray.core.ranking import graph_chunk_ranking, rank_local_relations
from lightrag_ray.core.records import EntityRecord, RelationRecord
from lightrag_ray.query.engine import QueryEngine, QueryParam
from tests.memory_stores import HashingEmbedder, MemoryGraph, index_in_memory
from tests.scripted_llm import derive_records

PASSAGES = [
    "Ebenezer Scrooge runs a counting house in London. Bob Cratchit works for Ebenezer Scrooge.",
    "Jacob Marley was the partner of Ebenezer Scrooge. Jacob Marley died seven years ago.",
    "Tiny Tim is the son of Bob Cratchit. Tiny Tim walks with a crutch.",
    "Fred invites Ebenezer Scrooge to Christmas dinner. Fred is the nephew of Ebenezer Scrooge.",
    "The Ghost Of Christmas Past shows Ebenezer Scrooge his school. Fezziwig was the master of young Scrooge.",
]


def _corpus(passages: list[str]) -> tuple[list[dict], list[EntityRecord], list[RelationRecord]]:
    chunks, entities, relations = [], [], []
    for number, text in enumerate(passages):
        doc = doc_id(text)
        cid = chunk_id(doc, 0, text)
        chunks.append({"chunk_id": cid, "doc_id": doc, "file_path": f"doc{number}.txt", "order": 0, "text": text})
        found_e, found_r = derive_records(text)
        entities += [EntityRecord(e["name"], e["type"], e["description"], cid, f"doc{number}.txt") for e in found_e]
        relations += [RelationRecord(r["source"], r["target"], r["keywords"], r["description"], cid, 1.0,
                                     f"doc{number}.txt") for r in found_r]
    return chunks, entities, relations


class CannedLLM:
    """The LLMClient protocol answering from a fixed text (records the prompts)."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.prompts: list[list[dict[str, str]]] = []

    async def complete(self, messages, *, max_tokens=None, call=None) -> str:
        self.prompts.append(messages)
        return self.answer

    async def stream(self, messages, *, max_tokens=None, call=None) -> AsyncIterator[str]:
        self.prompts.append(messages)
        for word in self.answer.split(" "):
            yield word + " "

    async def aclose(self) -> None:
        return None


def _engine(passages: list[str] = PASSAGES, llm=None, num_shards: int = 2,
            reranker=None) -> tuple[QueryEngine, MemoryGraph]:
    embedder = HashingEmbedder()
    graph, vectors = index_in_memory(*_corpus(passages), embedder, num_shards)
    settings = load_settings(overrides={"workspace": "unused"}, environ={})
    return QueryEngine(settings, embedder, vectors, graph, llm, reranker), graph


def retrieve(engine: QueryEngine, question: str, **param):
    return asyncio.run(engine.retrieve(question, QueryParam(**param)))


def graph_reads(graph) -> list[tuple[str, int]]:
    """The graph reads a query made, without the version check every retrieval starts with."""
    return [call for call in graph.calls if call[0] != "read_version"]


def test_local_mode_finds_the_named_entities_and_their_passages():
    engine, graph = _engine()
    context, keywords, calls = retrieve(engine, "Who is Tiny Tim?", mode="local", ll_keywords=["Tiny Tim"], hl_keywords=[])
    assert calls == 0 and keywords.low == ["Tiny Tim"]
    assert context.entities[0]["name"] == "Tiny Tim"
    assert any({r["source"], r["target"]} == {"Bob Cratchit", "Tiny Tim"} for r in context.relations)
    assert "Tiny Tim is the son of Bob Cratchit" in context.chunks[0]["text"]
    assert {c for _, c in graph.calls} <= {0, 1} and {m for m, _ in graph_reads(graph)} == {"neighborhood"}
    assert [call for call in graph.calls if call not in graph_reads(graph)] == [("read_version", 0)]  # one shard asked


def test_global_mode_reaches_relations_and_their_endpoints():
    engine, graph = _engine()
    context, _, _ = retrieve(engine, "partner", mode="global", hl_keywords=["partner seven years"], ll_keywords=[])
    pair = {context.relations[0]["source"], context.relations[0]["target"]}
    assert pair == {"Ebenezer Scrooge", "Jacob Marley"}
    assert {"Ebenezer Scrooge", "Jacob Marley"} <= {e["name"] for e in context.entities}
    reads = graph_reads(graph)
    assert [m for m, _ in reads] == ["fetch"] * len(reads) and reads


def test_naive_uses_chunk_vectors_only_and_mix_adds_graph_passages():
    engine, graph = _engine()
    naive, _, _ = retrieve(engine, "crutch", mode="naive", chunk_top_k=1)
    assert not graph_reads(graph) and not naive.entities
    assert [c["text"] for c in naive.chunks] == [PASSAGES[2]]
    mix, _, _ = retrieve(engine, "crutch", mode="mix", chunk_top_k=4, ll_keywords=["Fred"], hl_keywords=["dinner"])
    texts = [c["text"] for c in mix.chunks]
    assert PASSAGES[2] in texts and PASSAGES[3] in texts  # the vector passage and the graph passage
    assert [r["reference_id"] for r in mix.references] == [str(n) for n in range(1, len(mix.references) + 1)]
    assert {c["reference_id"] for c in mix.chunks} == {r["reference_id"] for r in mix.references}


@pytest.mark.parametrize("mode", ["local", "global", "hybrid", "mix"])
def test_graph_passages_are_ranked_by_relevance_to_the_question(mode):
    engine, _ = _engine()
    context, _, _ = retrieve(engine, "Who is the nephew of Ebenezer Scrooge?", mode=mode,
                             ll_keywords=["Ebenezer Scrooge"], hl_keywords=["nephew"])
    text = {c["chunk_id"]: c["text"] for c in context.chunks}
    graph_order = graph_chunk_ranking(context.entities, context.relations)
    assert text[graph_order[0]] != PASSAGES[3]  # the citing items alone rank another passage first
    assert context.chunks[0]["text"] == PASSAGES[3]  # "Fred is the nephew of Ebenezer Scrooge"


def test_without_llm_keywords_come_from_the_question():
    engine, _ = _engine()
    context, keywords, calls = retrieve(engine, "What did Jacob Marley do?", mode="local")
    assert calls == 0 and "Jacob Marley" in keywords.low
    assert context.entities[0]["name"] == "Jacob Marley"


def test_hub_entity_ships_only_the_best_relations_and_the_answer_is_unchanged():
    workers = [f"Mr {a}{b}x" for a in "ABCDEFGHIJKL" for b in "abcdefghijklm"]  # 156 names
    hub = [f"Acme Corp hired {name} in the spring. {name} works at Acme Corp." for name in workers]
    engine, graph = _engine(PASSAGES + hub, num_shards=3)
    keys = [entity_key("Acme Corp"), entity_key("Mr Cdx"), entity_key("Ebenezer Scrooge")]
    capped = asyncio.run(graph.neighborhood(keys, 5))
    full = asyncio.run(graph.neighborhood(keys, None))
    assert len(full["relations"]) > 150 and len(capped["relations"]) <= 5 * 3
    assert rank_local_relations(capped["relations"], keys)[:5] == rank_local_relations(full["relations"], keys)[:5]
    # the relation joining two retrieved entities comes first
    first = rank_local_relations(capped["relations"], keys)[0]
    assert {first["source_key"], first["target_key"]} == {keys[0], keys[1]}
    context, _, _ = retrieve(engine, "Acme", mode="local", top_k=5, ll_keywords=["Acme Corp"], hl_keywords=[])
    assert len(context.relations) <= 5 and context.entities[0]["name"] == "Acme Corp"


def test_budgets_cut_the_context():
    engine, _ = _engine()
    small, _, _ = retrieve(engine, "Scrooge", mode="mix", ll_keywords=["Ebenezer Scrooge"], hl_keywords=["partner"],
                           max_entity_tokens=40, max_relation_tokens=40, max_total_tokens=1200)
    large, _, _ = retrieve(engine, "Scrooge", mode="mix", ll_keywords=["Ebenezer Scrooge"], hl_keywords=["partner"])
    assert len(small.entities) < len(large.entities) and len(small.relations) < len(large.relations)
    assert len(small.text) < len(large.text)


def test_bypass_retrieves_nothing():
    engine, graph = _engine()
    context, keywords, calls = retrieve(engine, "Hello", mode="bypass")
    assert (context.text, context.chunks, calls, graph.calls) == ("", [], 0, [])


def test_generation_uses_the_llm_for_keywords_and_answer():
    llm = CannedLLM('{"high_level_keywords": ["family"], "low_level_keywords": ["Tiny Tim"]}')
    engine, _ = _engine(llm=llm)
    result = asyncio.run(engine.query("Who is Tiny Tim's father?", QueryParam(mode="local")))
    assert result.llm_calls == 2 and result.keywords.low == ["Tiny Tim"]
    assert "Tiny Tim is the son of Bob Cratchit" in llm.prompts[-1][-1]["content"] + llm.prompts[-1][0]["content"]
    pieces = asyncio.run(_collect(engine.stream("Who is Tiny Tim?", QueryParam(mode="naive"))))
    assert "".join(pieces).strip() == llm.answer


def test_answers_need_an_llm():
    engine, _ = _engine()
    with pytest.raises(ValueError, match="no LLM configured"):
        asyncio.run(engine.query("Who?", QueryParam(mode="naive")))


async def _collect(stream: AsyncIterator[str]) -> list[str]:
    return [piece async for piece in stream]


def test_these_tests_need_no_ray_milvus_or_model():
    import subprocess
    import sys

    code = "import sys, tests.test_query_engine; print(sorted({'ray', 'pymilvus', 'torch'} & set(sys.modules)))"
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=root)
    assert done.stdout.strip() == "[]", done.stderr


class RecordingEmbedder(HashingEmbedder):
    """HashingEmbedder that records the texts of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    async def embed(self, texts: list[str]):
        self.calls.append(list(texts))
        return self.embed_now(texts)


@pytest.mark.parametrize("mode, texts", [
    ("naive", ["Who is Tiny Tim?"]), ("local", ["Who is Tiny Tim?", "Tiny Tim"]), ("global", ["Who is Tiny Tim?", "family"]),
    ("hybrid", ["Who is Tiny Tim?", "Tiny Tim", "family"]), ("mix", ["Who is Tiny Tim?", "Tiny Tim", "family"]),
    ("walk", ["Who is Tiny Tim?", "Tiny Tim"]), ("bypass", None),
])
def test_each_mode_embeds_only_the_texts_it_searches_with_in_one_call(mode, texts):
    engine, _ = _engine()
    engine.embedder = recording = RecordingEmbedder()
    context, _, _ = retrieve(engine, "Who is Tiny Tim?", mode=mode, ll_keywords=["Tiny Tim"], hl_keywords=["family"])
    assert recording.calls == ([texts] if texts else [])
    assert bool(context.chunks) == (mode != "bypass")


def test_a_keyword_text_equal_to_the_question_is_embedded_once():
    engine, _ = _engine()
    engine.embedder = recording = RecordingEmbedder()
    question = "Who is Tiny Tim?"
    retrieve(engine, question, mode="mix", ll_keywords=["Tiny Tim"], hl_keywords=[question])
    assert recording.calls == [[question, "Tiny Tim"]]


class RecordingVectors:
    """A vector index that records the id lookups (``get``) and BM25 searches it answers."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.gets: list[tuple[str, list[str]]] = []
        self.text_searches: list[tuple[str, list[str]]] = []

    async def search(self, kind, vectors, top_k, output_fields, version=None):
        return await self.inner.search(kind, vectors, top_k, output_fields, version)

    async def text_search(self, kind, texts, top_k, output_fields, version=None):
        self.text_searches.append((kind, list(texts)))
        return await self.inner.text_search(kind, texts, top_k, output_fields, version)

    async def text_kinds(self):
        return await self.inner.text_kinds()

    async def get(self, kind, ids, output_fields):
        self.gets.append((kind, list(ids)))
        return await self.inner.get(kind, ids, output_fields)


def test_naive_passages_need_no_lookup_by_id_and_graph_modes_read_only_those_kept():
    engine, _ = _engine()
    plain, _, _ = retrieve(engine, "Who is Tiny Tim?", mode="mix")
    engine.vectors = recording = RecordingVectors(engine.vectors)
    naive, _, _ = retrieve(engine, "Who is Tiny Tim?", mode="naive")
    assert naive.chunks and recording.gets == []  # the search hits carry the passages
    assert all("score" not in chunk and chunk["text"] for chunk in naive.chunks)
    mix, _, _ = retrieve(engine, "Who is Tiny Tim?", mode="mix", chunk_top_k=2)
    # its similarity search returns ids and scores only: the passages kept are read in one lookup
    assert recording.gets == [("chunks", [c["chunk_id"] for c in mix.chunks])] and len(mix.chunks) == 2
    assert retrieve(engine, "Who is Tiny Tim?", mode="mix")[0].to_dict() == plain.to_dict()


class RecordingGraph:
    """A graph lookup that records the entity keys each ``fetch`` asks for."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.fetched: list[list[str]] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def fetch(self, keys, pairs):
        self.fetched.append(list(keys))
        return await self.inner.fetch(keys, pairs)


def test_global_mode_fetches_only_the_end_entities_it_keeps():
    engine, graph = _engine()
    full, _, _ = retrieve(engine, "Who is Tiny Tim?", mode="global", hl_keywords=["family"], top_k=40)
    engine.graph = recording = RecordingGraph(graph)
    cut, _, _ = retrieve(engine, "Who is Tiny Tim?", mode="global", hl_keywords=["family"], top_k=3)
    assert [len(keys) for keys in recording.fetched] == [3]
    assert [e["key"] for e in cut.entities] == [e["key"] for e in full.entities][:3]


def test_chunk_searches_keep_to_the_published_version_while_a_write_job_runs():
    """A job replacing the crutch passage stores its new version (``since`` 1) and retires the old
    one (``until`` 1): while it runs every mode's chunk search finds the old passage only, once
    it is published the new one only; with no job and nothing retired left, no filter at all."""
    engine, graph = _engine()
    [old] = [row for row in engine.vectors.rows["chunks"].values() if "crutch" in row["text"]]
    new = {**old, "id": "chunk-new", "doc_id": "doc-new", "text": old["text"].replace("crutch", "crutch and a cane"),
           "since": 1}
    engine.vectors.upsert("chunks", [new, {**old, "until": 1}])

    def found(mode: str) -> set[str]:
        context, _, _ = retrieve(engine, "crutch", mode=mode, ll_keywords=["Tiny Tim"], hl_keywords=["son"])
        return {chunk["text"] for chunk in context.chunks} & {old["text"], new["text"]}

    graph.begin()
    assert {mode: found(mode) for mode in ("naive", "mix", "walk")} == dict.fromkeys(("naive", "mix", "walk"), {old["text"]})
    for shard in graph.shards:
        shard.mark_saved(1)
    graph.publish()
    assert found("naive") == {new["text"]}  # (the graph passages of mix and walk are the fake graph's: unchanged)
    graph.settle()  # as after the writer deleted the retired rows: searches are no longer filtered
    assert found("naive") == {old["text"], new["text"]}
