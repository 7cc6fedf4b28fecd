"""Incremental indexing gives the graph of one run (real Ray, Milvus Lite, MiniLM, scripted
LLM over HTTP): N documents inserted one by one -- each insert a fresh run as the CLI does,
or all through one workspace opened as its writer, as the Serve app holds it -- and N documents inserted and
one of them deleted, compared with the same documents indexed in one run.

What is compared is what fresh shard actors load from each workspace (never its files, so
the test does not depend on how shards persist), field by field:

* the mention rows (``GraphRouter.mention_rows``: what every chunk said about every entity
  and relation, with its chunk id and file path) are equal: both graphs hold the same facts;
* every entity and relation has the same id and the same value in every field (name, type,
  keywords, weight, source ids, file paths, degree, ...), description included, EXCEPT the
  description of a summarised item. An item is summarised when it has more than
  ``graph.summary_max_fragments`` distinct description fragments (the documents are small,
  so ``graph.summary_max_tokens`` never triggers). Summaries are incremental: an insert
  re-summarises from the item's last summary plus the fragments added since, so a summary's
  WORDING depends on how the inserts were split, while the fragments it covers do not
  (docs/architecture.md, "Merge rules"; core/summary_bases.py). So for a summarised item
  both sides must show an LLM summary (not the joined fragments), and the fragments it
  covers -- derived from the mention rows, compared above -- must be the same; for any
  other item the description must be exactly its fragments joined, on both sides;
* the manifest's entity and relation counts are equal, and each insert (and the deletion)
  advanced ``graph_version`` by exactly one.

The documents share characters (Ebenezer Scrooge, Bob Cratchit, ...) over small chunks, so
entities and relations merge across documents, relation weights add up over chunks and
the shared items pass the fragment limit; the tests assert that, so they cannot pass
vacuously.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lightrag_ray.config import Settings, load_settings
from lightrag_ray.core.names import entity_key
from lightrag_ray.models.embedding import make_embedder
from lightrag_ray.service.deletion import delete_documents
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.service.opening import open_workspace
from lightrag_ray.storage import doc_status
from lightrag_ray.storage.workspace import Workspace
from tests.graph_helpers import Stored, graph_differences, load_stored, open_writer

MAX_FRAGMENTS = 3
GRAPH = {"num_shards": 2, "summary_max_fragments": MAX_FRAGMENTS}
CHUNKING = {"chunk_tokens": 30, "overlap_tokens": 5}  # two chunks per document

DOCS = [
    "Ebenezer Scrooge counted coins in his cold office. Bob Cratchit copied letters for Ebenezer Scrooge by a "
    "tiny fire. Jacob Marley had been the partner of Ebenezer Scrooge for seven years.",
    "Jacob Marley came back as a ghost rattling a lantern at midnight. Ebenezer Scrooge trembled when Jacob Marley "
    "spoke of heavy chains. Bob Cratchit never heard the warning given to Ebenezer Scrooge.",
    "Fred Holywell invited Ebenezer Scrooge to a merry dinner. Ebenezer Scrooge refused and Bob Cratchit smiled "
    "quietly. Tiny Tim waited at home for Bob Cratchit.",
    "Ebenezer Scrooge bought a goose for Bob Cratchit. Tiny Tim thanked Ebenezer Scrooge and Fred Holywell cheered. "
    "Bob Cratchit received a raise from Ebenezer Scrooge.",
]
DELETED = 1  # a document in the middle of the insert order
DELETED_WORDS = ("ghost", "lantern", "midnight", "chains", "warning")  # in DOCS[DELETED] only


def build_settings(workspace: Path, llm_url: str) -> Settings:
    """Settings of conftest's make_settings, with this module's chunking and graph."""
    return load_settings(overrides={
        "workspace": str(workspace),
        "llm": {"backend": "openai", "base_url": llm_url, "timeout_s": 5, "backoff_s": 0.05, "max_retries": 2},
        "extraction": {"actors": 1, "num_cpus": 0.2},
        "chunking": CHUNKING,
        "graph": GRAPH,
    }, environ={})


def assert_same_graph(got: Stored, want: Stored) -> None:
    problems, summarised = graph_differences(got, want, MAX_FRAGMENTS)
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems[:40])
    # not vacuous: summaries, merges across documents and relation weights were exercised
    assert summarised >= 2, f"only {summarised} summarised items"
    assert any(len(e["file_paths"]) > 1 for e in want.graph["entities"])
    assert any(r["weight"] > 1 and len(r["file_paths"]) > 1 for r in want.graph["relations"])


def index_one(settings: Settings, path: Path, expected_version: int, **opened: Any) -> None:
    report = index_paths([str(path)], settings, progress=None, **opened)
    assert report.docs_new == 1 and report.chunks_failed == 0 and not report.errors
    assert report.graph_version == expected_version  # one version per insert


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> list[Path]:
    """The documents as files, at the same paths for every workspace (file_paths are compared)."""
    folder = tmp_path_factory.mktemp("corpus")
    paths = []
    for i, text in enumerate(DOCS):
        path = folder / f"doc{i}.txt"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def one_run(ray_cluster, llm_server, corpus, tmp_path_factory) -> Stored:
    """All the documents indexed in one run."""
    llm_server.clear_rules()
    settings = build_settings(tmp_path_factory.mktemp("one_run") / "ws", llm_server.url)
    report = index_paths([str(p) for p in corpus], settings, progress=None)
    assert report.docs_new == len(DOCS) and report.chunks_failed == 0 and report.summaries > 0
    assert report.graph_version == 1
    stored = load_stored(settings)
    assert (stored.manifest.entities, stored.manifest.relations) == (report.entities, report.relations)
    return stored


def test_inserts_one_run_each_give_the_graph_of_one_run(ray_cluster, llm, corpus, one_run, tmp_path):
    settings = build_settings(tmp_path / "ws", llm.url)
    for i, path in enumerate(corpus):
        index_one(settings, path, i + 1)

    stored = load_stored(settings)
    assert stored.manifest.graph_version == len(DOCS)
    assert_same_graph(stored, one_run)


def test_inserts_through_one_open_router_give_the_graph_of_one_run(ray_cluster, llm, corpus, one_run, tmp_path):
    settings = build_settings(tmp_path / "ws", llm.url)
    # as the Serve app's workspace owner holds it: shards and vector store open between the runs
    opened = open_workspace(settings, "writer", keep_alive=True, embedding_dim=make_embedder(settings.embedding).dim)
    try:
        for i, path in enumerate(corpus):
            index_one(settings, path, i + 1, opened=opened)
        live = opened.graph_writer().export()
    finally:
        opened.close()

    stored = load_stored(settings)
    assert stored.graph == live  # what was persisted is what the warm shards held
    assert stored.manifest.graph_version == len(DOCS)
    assert_same_graph(stored, one_run)


def test_deleting_an_inserted_document_gives_the_graph_of_one_run_without_it(
    ray_cluster, llm, corpus, one_run, tmp_path
):
    # the deleted document's text is in the full graph (so its absence below means something)
    assert any(word in item["description"] for kind in ("entities", "relations") for item in one_run.graph[kind]
               for word in DELETED_WORDS)
    assert not any(word in text for i, text in enumerate(DOCS) if i != DELETED for word in DELETED_WORDS)
    assert entity_key("Jacob Marley") in {e["key"] for e in one_run.graph["entities"]}

    settings = build_settings(tmp_path / "ws", llm.url)
    for i, path in enumerate(corpus):
        index_one(settings, path, i + 1)
    workspace = Workspace(settings.workspace)
    [doomed] = [d for d, row in doc_status.load(workspace).items() if row["file_path"] == str(corpus[DELETED])]
    with open_writer(settings) as (workspace, router, vectors, embedder):
        result = delete_documents(workspace, router, vectors, embedder, [doomed], settings)
    assert result["deleted"] == [doomed] and result["chunks"] > 0

    rest = build_settings(tmp_path / "rest", llm.url)
    report = index_paths([str(p) for i, p in enumerate(corpus) if i != DELETED], rest, progress=None)
    assert report.docs_new == len(DOCS) - 1 and report.chunks_failed == 0

    stored = load_stored(settings)
    assert stored.manifest.graph_version == len(DOCS) + 1  # the deletion is one more version
    leaked = [(item["id"], word) for kind in ("entities", "relations") for item in stored.graph[kind]
              for word in DELETED_WORDS if word in item["description"]]
    assert not leaked, f"the deleted document's text is still shown: {leaked}"
    assert_same_graph(stored, load_stored(rest))
