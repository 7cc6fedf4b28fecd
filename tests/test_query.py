"""Dual-level retrieval on a small hand-built corpus: real Ray, Milvus Lite, MiniLM, scripted LLM."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from lightrag_ray.config import Settings, load_settings
from lightrag_ray.core.context import ENTITY_HEADER, RELATION_HEADER
from lightrag_ray.core.names import entity_key
from lightrag_ray.core.tokenizer import count_tokens
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.query.engine import QueryParam
from lightrag_ray.service.session import LocalSession
from lightrag_ray.storage.workspace import Workspace

CORPUS = {
    "astronomy.txt": (
        "Maria Lopez observed Jupiter through the Palomar Telescope on a cold night. "
        "Maria Lopez published the discovery of a new moon in the Nature Journal. "
        "The Palomar Telescope stands on a mountain in California."
    ),
    "bakery.txt": (
        "Antonio Russo bakes sourdough bread every morning in the Naples Bakery. "
        "The Naples Bakery sells focaccia to the Hotel Vesuvio. "
        "Antonio Russo learned fermentation from his grandmother Lucia Russo."
    ),
    "sailing.txt": (
        "Captain Erik Holm sailed the Nordic Star across the Baltic Sea during a violent storm. "
        "The Nordic Star carried timber from Stockholm Harbour to Riga. "
        "Erik Holm trained young sailors at the Maritime Academy."
    ),
}


def index_corpus(root: Path, llm_url: str, **sections: Any) -> Settings:
    """Index CORPUS (scripted LLM) into ``root/ws``; returns its settings (``sections`` added)."""
    corpus = root / "corpus"
    corpus.mkdir()
    for name, text in CORPUS.items():
        (corpus / name).write_text(text, encoding="utf-8")
    settings = load_settings(environ={}, overrides={
        "workspace": str(root / "ws"),
        "llm": {"backend": "openai", "base_url": llm_url, "timeout_s": 5},
        "extraction": {"actors": 1, "num_cpus": 0.2},
        **sections,
    })
    report = index_paths([str(corpus)], settings, progress=None)
    assert report.docs_new == 3 and report.entities > 10
    return settings


@pytest.fixture(scope="module")
def session(ray_cluster, llm_server, tmp_path_factory):
    with LocalSession(index_corpus(tmp_path_factory.mktemp("query"), llm_server.url)) as opened:
        yield opened


def retrieve(session, question, **param):
    context, keywords, calls = asyncio.run(session.engine.retrieve(question, QueryParam(**param)))
    return context, keywords, calls


def test_local_finds_the_named_entity_and_its_one_hop_neighbours(session, llm):
    context, keywords, calls = retrieve(session, "What did Maria Lopez do?", mode="local")
    assert calls == 1 and llm.counts() == {"keywords": 1} and "Maria Lopez" in keywords.low
    assert context.entities[0]["key"] == entity_key("Maria Lopez")
    neighbours = {r["source_key"] for r in context.relations} | {r["target_key"] for r in context.relations}
    assert {entity_key("Jupiter"), entity_key("Palomar Telescope"), entity_key("Nature Journal")} <= neighbours
    top = context.relations[0]
    assert entity_key("Maria Lopez") in (top["source_key"], top["target_key"])
    assert context.chunks[0]["file_path"].endswith("astronomy.txt")
    # the synchronous helper of the public API gives the same context
    assert session.retrieve("What did Maria Lopez do?", QueryParam(mode="local")).to_dict() == context.to_dict()


def test_global_finds_a_relation_by_its_theme_keywords(session, llm):
    context, _, calls = retrieve(session, "storms at sea", mode="global",
                                 hl_keywords=["sailed, during, violent"], ll_keywords=[])
    assert calls == 0 and llm.counts() == {}  # keywords given: no LLM call
    pair = {context.relations[0]["source_key"], context.relations[0]["target_key"]}
    assert pair & {entity_key("Nordic Star"), entity_key("Erik Holm"), entity_key("Baltic Sea")}
    assert "violent storm" in context.relations[0]["description"]
    endpoint_keys = {e["key"] for e in context.entities}
    assert pair <= endpoint_keys


def test_naive_uses_only_chunk_vectors_and_mix_adds_them_to_the_graph(session, llm):
    naive, _, calls = retrieve(session, "Who bakes bread in Naples?", mode="naive")
    assert calls == 0 and llm.counts() == {} and not naive.entities and not naive.relations
    assert naive.chunks[0]["file_path"].endswith("bakery.txt")
    hybrid, _, _ = retrieve(session, "Who bakes bread in Naples?", mode="hybrid")
    mix, _, _ = retrieve(session, "Who bakes bread in Naples?", mode="mix")
    assert mix.entities and mix.relations
    assert naive.chunks[0]["chunk_id"] in {c["chunk_id"] for c in mix.chunks}
    assert {c["chunk_id"] for c in mix.chunks} >= {c["chunk_id"] for c in hybrid.chunks}


def test_bypass_uses_no_retrieval(session, llm):
    result = asyncio.run(session.engine.query("Say hello", QueryParam(mode="bypass")))
    assert result.context.text == "" and not result.context.chunks and result.llm_calls == 1
    assert llm.counts() == {"answer": 1}
    assert llm.requests[0][1] == [{"role": "user", "content": "Say hello"}]


def test_a_session_asks_many_questions_over_one_connection_pool(session, llm):
    """A notebook keeps a session open for hours: its questions share one event loop and one HTTP
    client (with a loop per question, every question left an unclosed client and its socket)."""
    assert session.query("Say hello", QueryParam(mode="bypass")).answer
    opened = llm.connections
    for i in range(6):
        assert session.query(f"Say hello {i}", QueryParam(mode="bypass")).llm_calls == 1
    assert llm.counts() == {"answer": 7}
    assert llm.connections - opened <= 1  # the pooled connection (one more if it expired meanwhile)


@pytest.mark.parametrize("mode", ["local", "global", "hybrid", "mix", "naive"])
def test_budgets_are_never_exceeded(session, llm, mode):
    param = {"max_entity_tokens": 60, "max_relation_tokens": 90, "max_total_tokens": 700}
    context, _, _ = retrieve(session, "Maria Lopez and the Nordic Star", mode=mode, **param)
    assert count_tokens(context.sections["entities"]) <= 60
    assert count_tokens(context.sections["relations"]) <= 90
    reserved = session.engine._reserved_tokens("Maria Lopez and the Nordic Star", QueryParam(mode=mode))
    assert count_tokens(context.text) + reserved <= 700
    assert context.chunks  # something still fits
    if mode != "naive":
        assert context.sections["entities"].startswith(ENTITY_HEADER) or mode == "global"
        assert RELATION_HEADER in context.text


def test_references_point_at_real_chunks_of_real_files(session, llm):
    context, _, _ = retrieve(session, "Who trained young sailors?", mode="mix")
    stored = {row["chunk_id"]: row for row in Workspace(session.engine.settings.workspace).read_rows("chunks")}
    assert context.references and context.chunks
    numbers = {ref["file_path"]: ref["reference_id"] for ref in context.references}
    assert len(numbers) == len(context.references)  # one reference per file
    for ref in context.references:
        assert open(ref["file_path"], encoding="utf-8").read()
        assert f"\n[{ref['reference_id']}] {ref['file_path']}\n" in context.text + "\n"  # the reference list's line
    for chunk in context.chunks:
        assert stored[chunk["chunk_id"]]["file_path"] == chunk["file_path"]
        assert chunk["reference_id"] == numbers[chunk["file_path"]]
        assert f"[{chunk['reference_id']}] {chunk['file_path']} ({chunk['chunk_id']})" in context.text
        assert stored[chunk["chunk_id"]]["text"].strip() in context.text


def test_generation_cites_the_context_with_history_and_streams(session, llm):
    history = [{"role": "user", "content": "We talk about astronomy."}, {"role": "assistant", "content": "Sure."}]
    result = asyncio.run(session.engine.query("What did Maria Lopez discover?", QueryParam(history=history)))
    assert result.llm_calls == 2 and llm.counts() == {"keywords": 1, "answer": 1}
    answer_messages = llm.requests[-1][1]
    assert "[1]" in answer_messages[0]["content"] and answer_messages[1:3] == history
    assert result.answer.startswith("Answer based on the context [1].")
    assert session.query("What did Maria Lopez discover?").answer.startswith("Answer based on the context [1].")

    async def collect():
        return [piece async for piece in session.engine.stream("What did Maria Lopez discover?")]

    pieces = asyncio.run(collect())
    assert len(pieces) > 1 and "".join(pieces).startswith("Answer based on the context [1].")
