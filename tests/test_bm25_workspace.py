"""BM25 in a real workspace (Ray, Milvus Lite, MiniLM, scripted LLM): an index run makes every
collection searchable by its words; a workspace indexed before BM25 answers with vectors only
and says so, until `lightrag-ray upgrade` or its next index run adds the texts, with no LLM call."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lightrag_ray.config import Settings
from lightrag_ray.query.engine import DENSE_ONLY, QueryParam
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.service.session import LocalSession
from lightrag_ray.storage.vectors import KINDS, SPARSE_FIELD, TEXT_FIELD, TEXT_SUFFIX, MilvusStore
from tests.test_cli import ENV, run_cli
from tests.test_query import index_corpus

QUESTION = "Who bakes sourdough focaccia in Naples?"


@pytest.fixture(scope="module")
def indexed(ray_cluster, llm_server, tmp_path_factory) -> Settings:
    return index_corpus(tmp_path_factory.mktemp("bm25"), llm_server.url)


def old_copy(settings: Settings, root: Path) -> Settings:
    """A copy of the workspace whose collections have the layout of a workspace indexed before
    BM25: dense only, named ``<prefix>_<kind>``, entity and relation rows without their text."""
    shutil.copytree(settings.workspace, root)
    old = settings.model_copy(update={"workspace": str(root)})
    store = MilvusStore(old.milvus_uri(), 384)
    client = store.client
    for kind in KINDS:
        name = store.names[kind]
        rows = client.query(name, filter="", output_fields=["*", "vector"])
        client.drop_collection(name)
        client.create_collection(name.removesuffix(TEXT_SUFFIX), dimension=384, primary_field_name="id",
                                 id_type="string", max_length=64, vector_field_name="vector", metric_type="COSINE",
                                 auto_id=False, enable_dynamic_field=True)
        dropped = {SPARSE_FIELD} | ({TEXT_FIELD} if kind != "chunks" else set())
        client.insert(name.removesuffix(TEXT_SUFFIX), [{k: v for k, v in row.items() if k not in dropped} for row in rows])
    store.close()
    return old


FUSED = "vectors and BM25 fused (weight 1)"


def lexical_notes(settings: Settings) -> dict[str, str]:
    """How each mode searched (the default weights: every mode but walk fuses BM25)."""
    with LocalSession(settings) as session:
        return {mode: session.retrieve(QUESTION, QueryParam(mode=mode, ll_keywords=["Naples"], hl_keywords=["bread"]))
                .retrieval["lexical"] for mode in ("naive", "local", "mix", "walk")}


def test_an_index_run_makes_every_collection_searchable_by_its_words(indexed):
    store = MilvusStore(indexed.milvus_uri(), 384)
    try:
        assert store.text_kinds() == sorted(KINDS)
        [[entity]] = store.text_search("entities", ["focaccia"], 1, ["name"])  # in a description, not a name
        assert entity["name"] in ("Naples Bakery", "Hotel Vesuvio")
        [[chunk]] = store.text_search("chunks", ["fermentation grandmother"], 1, ["file_path"])
        assert chunk["file_path"].endswith("bakery.txt")
    finally:
        store.close()
    assert lexical_notes(indexed) == {"naive": FUSED, "local": FUSED, "mix": FUSED, "walk": "vectors only"}


def test_an_old_workspace_answers_dense_only_until_the_upgrade_command(indexed, ray_cluster, llm, tmp_path):
    old = old_copy(indexed, tmp_path / "old")
    assert lexical_notes(old) == {"naive": DENSE_ONLY, "local": DENSE_ONLY, "mix": DENSE_ONLY, "walk": "vectors only"}
    env = {**ENV, "LIGHTRAG_RAY__RAY__ADDRESS": ray_cluster.get_runtime_context().gcs_address,
           "LIGHTRAG_RAY__LLM__BASE_URL": llm.url}
    result = run_cli("upgrade", "--workspace", old.workspace, "--json", env=env)
    assert result.returncode == 0, result.stderr
    upgraded = json.loads(result.stdout)
    assert upgraded["text_search"] == sorted(KINDS) and set(upgraded["rows_copied"]) == set(KINDS)
    assert all(n > 0 for n in upgraded["rows_copied"].values())
    assert lexical_notes(old) == {"naive": FUSED, "local": FUSED, "mix": FUSED, "walk": "vectors only"}
    assert llm.counts() == {}  # not one LLM request: the keywords were given, the upgrade asks none


def test_the_next_index_run_of_an_old_workspace_adds_the_texts(indexed, llm, tmp_path):
    old = old_copy(indexed, tmp_path / "old")
    extra = tmp_path / "extra.txt"
    extra.write_text("Giulia Conti sells olive oil at the Naples Market.", encoding="utf-8")
    report = index_paths([str(extra)], old, progress=None)
    assert report.docs_new == 1 and llm.counts().get("extract", 0) >= 1  # only the new document's
    store = MilvusStore(old.milvus_uri(), 384)
    try:
        assert store.text_kinds() == sorted(KINDS)
        assert store.text_search("chunks", ["olive oil"], 1, ["file_path"])[0][0]["file_path"].endswith("extra.txt")
        assert store.text_search("chunks", ["sourdough"], 1, ["file_path"])[0][0]["file_path"].endswith("bakery.txt")
    finally:
        store.close()
