"""Incremental summaries end to end (real Ray, Milvus Lite, MiniLM, scripted LLM over HTTP):
a new mention of a summarised entity costs one prompt over its last summary and the new
fragment, and after a document is deleted its text never reaches a summary prompt."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from lightrag_ray.core.names import entity_key
from lightrag_ray.service.deletion import delete_documents
from lightrag_ray.service.graph_edits import GraphEditor
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.storage import doc_status
from lightrag_ray.storage.workspace import Workspace
from tests.graph_helpers import open_writer

FIRST = [f"Ebenezer Scrooge counted the {word} ledger." for word in ("red", "blue", "green", "grey")]
SECRET = "Ebenezer Scrooge buried the secret gold."
NEW = "Ebenezer Scrooge bought a goose."
LATER = "Ebenezer Scrooge sang a carol."
BATCH = {"backend": "openai-batch", "batch_size": 8, "max_retries": 1}  # ray.data.llm processor passes


def scrooge_prompts(llm: Any) -> list[str]:
    """The texts of the summary requests about Ebenezer Scrooge so far."""
    return [messages[-1]["content"] for kind, messages in llm.requests
            if kind == "summary" and 'entity "Ebenezer Scrooge"' in messages[-1]["content"]]


def write_docs(folder: Any, texts: list[str]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    for i, text in enumerate(texts):
        (folder / f"doc{i}.txt").write_text(text, encoding="utf-8")
    return [str(folder)]


@pytest.mark.parametrize("llm_settings", [{}, BATCH], ids=["client", "processor"])
def test_new_mentions_update_the_last_summary_and_deleted_text_never_reaches_a_prompt(
    ray_cluster, llm, make_settings, tmp_path, llm_settings
):
    settings = make_settings(graph={"summary_max_fragments": 3}, llm=llm_settings)
    first = index_paths(write_docs(tmp_path / "first", [*FIRST, SECRET]), settings, progress=None)
    assert first.summaries == 1 and llm.counts()["summary"] == 1
    [previous] = scrooge_prompts(llm)
    assert SECRET in previous

    llm.reset()
    second = index_paths(write_docs(tmp_path / "second", [NEW]), settings, progress=None)
    assert second.summaries == 1 and llm.counts()["summary"] <= 2 * second.summaries
    [prompt] = scrooge_prompts(llm)
    assert "<current_description>\nSummary of 5 descriptions:" in prompt and NEW in prompt
    assert not any(text in prompt.split("</current_description>")[1] for text in [*FIRST, SECRET])

    llm.reset()  # the same insert again: nothing to extract or summarise
    index_paths(write_docs(tmp_path / "second", [NEW]), settings, progress=None)
    assert not llm.requests

    workspace = Workspace(settings.workspace)
    [secret_doc] = [d for d, row in doc_status.load(workspace).items() if row["file_path"].endswith("doc4.txt")]
    with open_writer(settings) as (workspace, router, vectors, embedder):
        delete_documents(workspace, router, vectors, embedder, [secret_doc])

    llm.reset()
    third = index_paths(write_docs(tmp_path / "third", [LATER]), settings, progress=None)
    assert third.summaries == 1
    [prompt] = scrooge_prompts(llm)
    assert "secret" not in prompt and "<current_description>" not in prompt  # from the remaining fragments
    assert all(text in prompt for text in [*FIRST, NEW, LATER])


def test_a_delete_and_an_entity_merge_summarise_what_they_leave_over_the_limits(ray_cluster, llm, make_settings, tmp_path):
    settings = make_settings(graph={"summary_max_fragments": 3})
    index_paths(write_docs(tmp_path / "first", [*FIRST, SECRET]), settings, progress=None)
    index_paths(write_docs(tmp_path / "marley", ["Jacob Marley rattled his chains.", "Jacob Marley walked the night."]),
                settings, progress=None)
    workspace = Workspace(settings.workspace)
    [secret_doc] = [d for d, row in doc_status.load(workspace).items() if row["file_path"].endswith("first/doc4.txt")]
    with open_writer(settings) as (workspace, router, vectors, embedder):
        llm.reset()
        delete_documents(workspace, router, vectors, embedder, [secret_doc], settings)
        [prompt] = scrooge_prompts(llm)  # the 4 fragments left are over the limit of 3: summarised again
        assert "secret" not in prompt and all(text in prompt for text in FIRST)
        scrooge = router.fetch([entity_key("Ebenezer Scrooge")], [])["entities"][0]
        assert scrooge["description"].startswith("Summary of 4 descriptions")

        llm.reset()
        GraphEditor(workspace, router, vectors, embedder, settings).merge_entities(["Jacob Marley"], "Ebenezer Scrooge")
        [prompt] = scrooge_prompts(llm)  # 4 + 2 fragments
        assert "Jacob Marley rattled his chains" in prompt
        merged = router.fetch([entity_key("Ebenezer Scrooge")], [])["entities"][0]
        assert merged["description"].startswith("Summary of") and "Jacob Marley" not in merged["description"][:20]


@pytest.mark.integration
def test_a_ray_data_run_summarises_on_a_cluster_with_no_whole_cpu_free(ray_cluster, llm, make_settings, tmp_path):
    """A small cluster busy with served workspaces may have no whole CPU free: every task of a Ray
    Data run must ask only what its settings say (Ray Data's from_pandas_refs asked a whole CPU per
    summary partition, and such a run waited forever at its summaries)."""
    import ray

    @ray.remote
    class Busy:
        def ready(self) -> bool:
            return True

    hold = ray.available_resources().get("CPU", 0.0) - 0.5
    busy = Busy.options(num_cpus=hold).remote() if hold > 0 else None  # leave half a CPU free
    try:
        if busy is not None:
            ray.get(busy.ready.remote(), timeout=60)
        settings = make_settings(
            "busy", graph={"summary_max_fragments": 3, "num_shards": 2, "num_cpus": 0.02},
            ray={"local_stages_max_mb": 0, "task_cpus": 0.05},  # Ray Data pools, even for this small corpus
            extraction={"actors": 1, "num_cpus": 0.05}, embedding={"actors": 1, "num_cpus": 0.05})
        done: list[Any] = []
        run = threading.Thread(target=lambda: done.append(index_paths(write_docs(tmp_path, FIRST), settings,
                                                                      progress=None)), daemon=True)
        run.start()
        run.join(timeout=240)
        assert done, "the run did not finish in 240 s beside a cluster with half a CPU free"
        assert done[0].stages == "ray-data" and done[0].summaries == 1 and llm.counts()["summary"] == 1
    finally:
        if busy is not None:
            ray.kill(busy)
