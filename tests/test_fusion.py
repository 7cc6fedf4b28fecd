"""BM25 beside the vectors: reciprocal-rank fusion (query.fusion) and how each mode uses it,
on the in-memory stores (no Ray); Milvus's own BM25 is tested in test_vector_store."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from lightrag_ray.core.records import EntityRecord
from lightrag_ray.query.engine import DENSE_ONLY
from lightrag_ray.query.fusion import LEXICAL_WEIGHTS, fuse, lexical_weight
from lightrag_ray.query.params import RETRIEVAL_MODES
from tests.test_query_engine import RecordingVectors, _engine, retrieve

RARE = "The zeppelin Hindenburg burned at Lakehurst in 1937."


def hits(*ids: str) -> list[dict]:
    return [{"id": i, "score": 1.0 - n / 10} for n, i in enumerate(ids)]


def test_fusion_adds_reciprocal_ranks_and_keeps_similarities_falling():
    fused = fuse(hits("a", "b", "c"), hits("c", "d"), 1.0)
    # c: 1/63 + 1/61 beats a: 1/61; b (dense) and d (BM25) tie at 1/62: the dense hit first
    assert [h["id"] for h in fused] == ["c", "a", "b", "d"]
    assert fused[0]["score"] == pytest.approx(0.8)  # c keeps its own similarity
    assert fused[3]["score"] == pytest.approx(0.8)  # d, BM25 only: the similarity at its rank (the last dense one)
    assert [h["id"] for h in fuse(hits("a", "b"), hits("b", "x"), 0.0)] == ["a", "b", "x"]  # weight 0: dense order
    assert lexical_weight("naive", None) == LEXICAL_WEIGHTS["naive"] == 1.0 and lexical_weight("naive", 0.25) == 0.25
    assert LEXICAL_WEIGHTS["walk"] == 0.0  # measured: BM25 seeds cost the walk 0.03 all-gold@8 on HotpotQA


def rare_engine():
    """The in-memory engine plus a passage whose vector points away from every question (only its
    words can find it) and its entity."""
    engine, graph = _engine()
    graph.apply([EntityRecord("Hindenburg", "object", "A zeppelin.", "chunk-rare", "rare.txt")], [])
    vector = np.zeros(engine.embedder.dim, dtype=np.float32)
    vector[0] = 1.0
    engine.vectors.upsert("chunks", [{"id": "chunk-rare", "vector": vector, "doc_id": "doc-rare",
                                      "file_path": "rare.txt", "order": 0, "text": RARE}])
    return engine, graph


@pytest.mark.parametrize("mode", ["naive", "walk"])
def test_a_passage_only_its_words_find_is_found_with_bm25_and_not_without(mode):
    engine, _ = rare_engine()
    question = "Which zeppelin burned at Lakehurst?"
    fused, _, _ = retrieve(engine, question, mode=mode, chunk_top_k=3, ll_keywords=[], hl_keywords=["fire"],
                           lexical_weight=1)
    dense, _, _ = retrieve(engine, question, mode=mode, chunk_top_k=3, ll_keywords=[], hl_keywords=["fire"],
                           lexical_weight=0)
    assert RARE in [c["text"] for c in fused.chunks] and RARE not in [c["text"] for c in dense.chunks]
    assert fused.retrieval["lexical"].startswith("vectors and BM25 fused")
    assert dense.retrieval["lexical"] == "vectors only"


@pytest.mark.parametrize("mode", ["local", "global", "hybrid"])
def test_graph_seeds_search_bm25_with_the_question_and_its_names(mode):
    engine, _ = rare_engine()
    engine.vectors = recording = RecordingVectors(engine.vectors)
    context, _, _ = retrieve(engine, "Who is Tiny Tim?", mode=mode, ll_keywords=["Bob Cratchit"], hl_keywords=["son"])
    kinds = {"local": ["entities"], "global": ["relations"], "hybrid": ["entities", "relations"]}[mode]
    assert sorted(kind for kind, _ in recording.text_searches) == kinds
    assert {tuple(texts) for _, texts in recording.text_searches} == {("Who is Tiny Tim? Bob Cratchit",)}
    assert context.chunks and context.retrieval["lexical"] == "vectors and BM25 fused (weight 1)"
    recording.text_searches.clear()
    retrieve(engine, "Who is Tiny Tim?", mode=mode, ll_keywords=["Bob Cratchit"], hl_keywords=["son"], lexical_weight=0)
    assert recording.text_searches == []


class DenseOnly(RecordingVectors):
    """A workspace's vectors before the upgrade: no collection searches text."""

    async def text_kinds(self):
        return []


def test_a_workspace_without_bm25_answers_dense_only_and_says_so_once(caplog):
    engine, _ = rare_engine()
    engine.vectors = recording = DenseOnly(engine.vectors)
    with caplog.at_level(logging.WARNING, logger="lightrag_ray.query.engine"):
        answers = [retrieve(engine, "zeppelin Hindenburg", mode=mode, chunk_top_k=3, lexical_weight=1)
                   for mode in RETRIEVAL_MODES]
    assert recording.text_searches == []
    assert all(context.retrieval["lexical"] == DENSE_ONLY for context, _, _ in answers)
    assert [r.getMessage() for r in caplog.records].count(f"workspace unused: {DENSE_ONLY}") == 1
