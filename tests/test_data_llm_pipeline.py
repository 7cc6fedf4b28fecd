"""Indexing through ray.data.llm processors (``llm.backend: openai-batch``) against the
scripted OpenAI-compatible server: the stage code the vLLM backend runs on GPUs (prompt in
preprocess -> processor -> parse in postprocess -> extraction cache -> graph shards), on CPU.
Real local Ray, Milvus Lite and MiniLM; compared with the async-client path (backend openai)."""

from __future__ import annotations

import pytest

from lightrag_ray.service.indexing import index_paths
from lightrag_ray.storage import doc_status
from lightrag_ray.storage.workspace import Workspace
from tests.graph_helpers import dump_graph, expected_graph, passages_sent
from tests.monitoring_helpers import counted
from tests.test_index_pipeline import DOC_A, DOC_B, StageAudit

BATCH = {"backend": "openai-batch", "batch_size": 8, "max_retries": 1}
SMALL_CHUNKS = {"chunk_tokens": 40, "overlap_tokens": 5}


def _keys(graph: dict) -> tuple[set[str], set[frozenset[str]]]:
    return ({e["key"] for e in graph["entities"]},
            {frozenset((r["source_key"], r["target_key"])) for r in graph["relations"]})


@pytest.fixture
def small_corpus(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text(DOC_A, encoding="utf-8")
    (corpus / "b.txt").write_text(DOC_B, encoding="utf-8")
    return corpus


def test_christmas_carol_through_the_processor_gives_the_client_paths_graph(ray_cluster, llm, make_settings, shared_data,
                                                                           monkeypatch, recorded):
    # The oracle is the one tests/test_index_pipeline.py holds the async-client path to (the
    # records the scripted LLM derives from each passage, merged); the two paths are compared
    # directly, graph for graph, on the small corpus below (the book twice would take minutes).
    book = str(shared_data / "christmas_carol" / "mock_data.txt")
    batch = make_settings("batch", llm=BATCH)
    audit = StageAudit(monkeypatch)  # a stage put into the run's list runs in its place here too
    report = index_paths([book], batch, progress=None)
    audit.check(report, "Processors")

    counts = llm.counts()
    assert report.docs_new == 1 and report.chunks_failed == 0 and not report.errors
    passages = passages_sent(llm.requests)
    assert len(passages) == counts["extract"] == report.chunks == report.chunks_extracted > 30
    assert counts["glean"] == report.chunks  # one gleaning round, answered "nothing missed"
    assert report.llm_requests == counts["extract"] + counts["glean"]
    assert report.summaries > 0 and counts["summary"] >= report.summaries
    assert (report.llm_prompt_tokens, report.llm_completion_tokens) == llm.sent_tokens() and llm.sent_tokens()[1] > 0
    assert report.llm_unmetered_requests == 0
    # the processor's calls are counted as the client's are: by kind, with the server's tokens
    for kind in ("extract", "glean", "summary"):
        assert counted(recorded, "llm_requests", kind=kind, outcome="ok") == counts[kind]
    assert counted(recorded, "llm_requests", outcome="error") == 0
    assert (counted(recorded, "llm_tokens", type="prompt"), counted(recorded, "llm_tokens", type="completion")) == (
        llm.sent_tokens())
    want_entities, want_relations = expected_graph(passages)
    assert (report.entities, report.relations) == (len(want_entities), len(want_relations))
    assert _keys(dump_graph(batch)) == (want_entities, want_relations)

    llm.reset()
    again = index_paths([book], batch, progress=None)
    assert llm.counts() == {} and again.docs_skipped == 1 and again.docs_new == 0


def test_failed_chunks_are_recorded_retried_and_only_good_ones_gleaned(ray_cluster, llm, make_settings, small_corpus,
                                                                      recorded):
    clean = make_settings("clean", chunking=SMALL_CHUNKS)
    index_paths([str(small_corpus)], clean, progress=None)
    chunk_count = llm.counts()["extract"]

    llm.reset()
    llm.add_rule(kind="extract", contains="Jacob Marley", action="malformed", times=1)
    llm.add_rule(kind="extract", contains="Fezziwig", action="500", times=1)
    flaky = make_settings("flaky", chunking=SMALL_CHUNKS, llm=BATCH, extraction={"gleaning_rounds": 2})
    first = index_paths([str(small_corpus)], flaky, progress=None)

    assert first.chunks_failed == 2 and first.chunks_extracted + first.chunks_failed == chunk_count
    # gleaning asked only of the chunks that extracted, and only once: nothing new came back
    assert llm.counts() == {"extract": chunk_count, "glean": first.chunks_extracted}
    assert first.docs_failed == 2 and all("index the document again to retry them" in e["error"] for e in first.errors)
    reasons = " ".join(e["error"] for e in first.errors)
    assert "unparseable LLM output" in reasons and "no choices" in reasons
    # the malformed answer was an answered call; the 500 a failed one
    assert counted(recorded, "llm_requests", workspace="flaky", kind="extract", outcome="ok") == chunk_count - 1
    assert counted(recorded, "llm_requests", workspace="flaky", kind="extract", outcome="error") == 1
    docs = doc_status.load(Workspace(flaky.workspace))
    assert {d["status"] for d in docs.values()} == {doc_status.FAILED}

    llm.reset()
    second = index_paths([str(small_corpus)], flaky, progress=None)
    assert llm.counts() == {"extract": 2, "glean": 2}  # cached chunks never reach the processor
    assert second.chunks_cached == first.chunks_extracted and second.docs_failed == 0 and not second.errors
    # the same graph as the async-client path: entities, relations, descriptions, weights, sources
    assert dump_graph(flaky) == dump_graph(clean)


def test_a_pass_that_dies_fails_only_the_chunks_it_had_not_returned(ray_cluster, llm, make_settings, small_corpus):
    llm.add_rule(kind="extract", contains="Tiny Tim", action="429", times=100)  # beyond Ray's retries
    settings = make_settings("dying", chunking=SMALL_CHUNKS, llm={**BATCH, "batch_size": 2, "backoff_s": 0.05},
                             extraction={"gleaning_rounds": 0})
    first = index_paths([str(small_corpus)], settings, progress=None)

    assert first.chunks_failed >= 1 and first.docs_failed >= 1
    assert "LLM processor failed" in " ".join(e["error"] for e in first.errors)
    assert "glean" not in llm.counts()  # gleaning_rounds 0: no gleaning pass at all

    llm.clear_rules()
    llm.reset()
    second = index_paths([str(small_corpus)], settings, progress=None)
    assert llm.counts() == {"extract": first.chunks_failed}
    assert second.docs_failed == 0 and second.chunks_cached == first.chunks_extracted
