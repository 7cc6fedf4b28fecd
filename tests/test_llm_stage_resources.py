"""The LLM stages a long-lived process runs again and again (the Serve app's workspace owner runs
extraction and summaries in process for every insert job, delete and graph edit) give back their
connections and event loop each time: under Serve's uvloop, a stage that kept them lost six file
descriptors (an io_uring, an epoll, an eventfd, pipes) and memory per run, for good (issue 29's
owner RSS)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import closing

import pytest
import uvloop

from lightrag_ray.core.records import EntityRecord
from lightrag_ray.index.stages.extract import ExtractChunks
from lightrag_ray.index.stages.summarise import summarise_in_process
from tests.memory_stores import MemoryGraph
from tests.net_helpers import event_loop_descriptors

pytestmark = pytest.mark.timeout(120)

ROUNDS = 6
PASSAGE = "Marie Curie worked in Paris with Pierre Curie. The Sorbonne hired Marie Curie in 1906."


@pytest.fixture
def serve_event_loops() -> Iterator[None]:
    """New event loops are uvloop's, as in a Serve replica."""
    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    yield
    asyncio.set_event_loop_policy(previous)


def test_an_extraction_stage_run_again_and_again_keeps_no_descriptor(serve_event_loops, llm, make_settings) -> None:
    settings = make_settings().model_dump()
    chunk = {"doc_id": "doc-1", "file_path": "curie.txt", "text": PASSAGE}
    with closing(ExtractChunks(settings, [])) as stage:  # the first run loads what stays loaded
        assert not stage([{**chunk, "chunk_id": "chunk-warm"}])[0]["error"]
    before = event_loop_descriptors()
    for i in range(ROUNDS):
        with closing(ExtractChunks(settings, [])) as stage:
            [row] = stage([{**chunk, "chunk_id": f"chunk-{i}", "text": f"{PASSAGE} Round {i}."}])  # new text: no cache hit
        assert not row["error"] and not row["cached"]
    assert llm.counts()["extract"] == ROUNDS + 1
    assert event_loop_descriptors() == before


def test_summaries_in_process_again_and_again_keep_no_descriptor(serve_event_loops, llm, make_settings) -> None:
    settings = make_settings(graph={"summary_max_fragments": 2})
    graph = MemoryGraph()

    def mention(round_: int) -> None:  # three new fragments: over the limit again
        graph.apply([EntityRecord("Marie Curie", "person", f"Curie fact {round_}.{k}.", f"c{round_}-{k}")
                     for k in range(3)], [])

    mention(-1)
    assert summarise_in_process(settings, graph)["summaries"] == 1
    before = event_loop_descriptors()
    for i in range(ROUNDS):
        mention(i)
        counts = summarise_in_process(settings, graph)
        assert (counts["summaries"], counts["summaries_failed"], counts["llm_unmetered_requests"]) == (1, 0, 0)
    assert llm.counts()["summary"] >= ROUNDS + 1
    assert event_loop_descriptors() == before
