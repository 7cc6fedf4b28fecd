"""Workspace tables and manifest, the document status table and the extraction cache."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from lightrag_ray.config import load_settings
from lightrag_ray.core.records import EntityRecord, Extraction, RelationRecord
from lightrag_ray.storage import doc_status, extraction_cache
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.manifest import SCHEMA_VERSION, Manifest, WorkspaceMismatchError
from lightrag_ray.storage.workspace import Workspace


@pytest.fixture(params=["path", "file-uri"])
def workspace(request, tmp_path) -> Workspace:
    root = tmp_path / "ws"
    return Workspace(str(root) if request.param == "path" else f"file://{root}/")


def all_files(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)


# ---- tables ---------------------------------------------------------------------------------
def test_workspace_creates_its_folder(tmp_path):
    Workspace(str(tmp_path / "a" / "b"))
    assert (tmp_path / "a" / "b").is_dir()
    ws = Workspace(f"file://{tmp_path}/c/")
    assert ws.root == f"{tmp_path}/c"
    assert (tmp_path / "c").is_dir()


def test_write_and_read_rows(workspace, tmp_path):
    rows = [{"id": "a", "n": 1, "tags": ["x", "y"]}, {"id": "b", "n": 2, "tags": []}]
    workspace.write_rows(rows, "tables", "t.parquet")
    assert workspace.read_rows("tables", "t.parquet") == rows
    assert (tmp_path / "ws" / "tables" / "t.parquet").is_file()
    assert workspace.exists("tables", "t.parquet")
    # overwriting replaces the file
    workspace.write_rows(rows[:1], "tables", "t.parquet")
    assert workspace.read_rows("tables", "t.parquet") == rows[:1]


def test_write_rows_with_schema(workspace):
    schema = pa.schema([("id", pa.string()), ("n", pa.int64())])
    workspace.write_rows([{"id": "a", "n": None}], "s.parquet", schema=schema)
    assert workspace.read_rows("s.parquet") == [{"id": "a", "n": None}]
    workspace.write_rows([], "empty.parquet", schema=schema)
    assert workspace.read_rows("empty.parquet") == []


def test_missing_tables_read_as_empty(workspace):
    assert workspace.read_rows("nothing", "here.parquet") == []
    assert workspace.read_rows("no_folder") == []
    assert workspace.list_files("no_folder") == []
    assert workspace.read_bytes("absent.bin") is None
    assert not workspace.exists("absent.bin")
    assert manifests.load(workspace) == manifests.Manifest() and not manifests.exists(workspace)


def test_append_parts_and_list_files(workspace):
    workspace.append_rows([{"k": 1}], "chunks")
    workspace.append_rows([{"k": 2}, {"k": 3}], "chunks")
    workspace.append_rows([], "chunks")  # nothing to write: no part file
    files = workspace.list_files("chunks")
    assert len(files) == 2
    assert files == sorted(files)
    assert all(f.startswith(workspace.path("chunks", "part-")) and f.endswith(".parquet") for f in files)
    assert sorted(r["k"] for r in workspace.read_rows("chunks")) == [1, 2, 3]
    # other files in the folder are not parts of the table
    workspace.write_bytes(b"notes", "chunks", "README.txt")
    assert workspace.list_files("chunks") == files
    # a single file is its own table
    assert workspace.list_files("chunks", os.path.basename(files[0])) == [files[0]]
    workspace.delete_file(files[0])
    assert workspace.list_files("chunks") == files[1:]


def test_bytes_round_trip_and_atomic_writes(workspace, tmp_path):
    workspace.write_bytes(b"\x00\x01 payload", "deep", "dir", "blob.bin")
    assert workspace.read_bytes("deep", "dir", "blob.bin") == b"\x00\x01 payload"
    for i in range(5):
        workspace.write_rows([{"i": i}], "graph", "shard", "entities.parquet")
        workspace.append_rows([{"i": i}], "extractions")
    manifests.save(workspace, Manifest(num_shards=1))
    files = all_files(tmp_path / "ws")
    assert not [f for f in files if ".tmp" in f], files
    assert [f for f in files if not f.startswith("extractions")] == [
        "deep/dir/blob.bin", "graph/shard/entities.parquet", "manifest.json"]
    assert workspace.read_rows("graph", "shard", "entities.parquet") == [{"i": 4}]


# ---- manifest ----------------------------------------------------------------------------------
def test_manifest_is_created_then_checked(workspace):
    wanted = Manifest(embedding_model="sentence-transformers:all-MiniLM-L6-v2",
                      chunking={"chunk_tokens": 1200, "overlap_tokens": 100, "encoding": "cl100k_base"}, num_shards=2)
    created = manifests.open_for(workspace, wanted)
    assert created == wanted and created.schema_version == SCHEMA_VERSION and created.graph_version == 0
    assert manifests.load(workspace) == created
    # same settings again: accepted; a field the manifest does not record yet is not a mismatch
    assert manifests.open_for(workspace, wanted) == created
    grown = manifests.record_graph(workspace, {"entities": 7, "relations": 3}, created.model_copy(update={"embedding_dim": 384}))
    assert (grown.graph_version, grown.entities, grown.relations, grown.embedding_dim) == (1, 7, 3, 384)
    assert manifests.load(workspace) == grown
    assert manifests.open_for(workspace, Manifest(num_shards=2, embedding_model=None)) == grown


def test_manifest_mismatch_names_key_and_both_values(workspace):
    manifests.open_for(workspace, Manifest(num_shards=2, embedding_model="st:mini"))
    with pytest.raises(WorkspaceMismatchError) as info:
        manifests.open_for(workspace, Manifest(num_shards=4, embedding_model="st:mini"))
    message = str(info.value)
    assert "num_shards" in message
    assert "2" in message and "4" in message
    assert workspace.uri in message
    with pytest.raises(WorkspaceMismatchError, match="embedding_model.*'st:mini'.*'openai:big'"):
        manifests.open_for(workspace, Manifest(embedding_model="openai:big"))
    assert manifests.load(workspace).num_shards == 2  # the recorded manifest is untouched
    with pytest.raises(WorkspaceMismatchError, match="dimension 384.*gives 512"):
        manifests.check_embedding_dim(Manifest(embedding_model="st:mini", embedding_dim=384), 512)


def test_manifest_survives_reopening_and_ignores_unknown_keys(tmp_path):
    manifests.open_for(Workspace(str(tmp_path / "ws")), Manifest(num_shards=3))
    reopened = Workspace(f"file://{tmp_path}/ws")
    assert manifests.load(reopened).num_shards == 3
    with pytest.raises(WorkspaceMismatchError, match="num_shards=3"):
        manifests.open_for(reopened, Manifest(num_shards=1))
    recorded = json.loads((tmp_path / "ws" / "manifest.json").read_text())
    assert recorded["num_shards"] == 3
    (tmp_path / "ws" / "manifest.json").write_text(json.dumps({**recorded, "from_a_newer_version": 1}))
    assert manifests.load(reopened).num_shards == 3


# ---- document status -------------------------------------------------------------------------------
def test_doc_status_update_load_counts(workspace):
    assert doc_status.load(workspace) == {}
    doc_status.update(workspace, [
        {"doc_id": "doc-1", "file_path": "a.txt", "status": doc_status.PROCESSED, "error": None, "chunks": 3},
        {"doc_id": "doc-2", "file_path": "b.txt", "status": doc_status.FAILED, "error": "empty document", "chunks": 0},
    ])
    rows = doc_status.load(workspace)
    assert set(rows) == {"doc-1", "doc-2"}
    assert rows["doc-1"]["chunks"] == 3
    assert rows["doc-2"]["error"] == "empty document"
    assert rows["doc-1"]["updated"]  # a timestamp
    assert set(rows["doc-1"]) == set(doc_status.SCHEMA.names)
    assert doc_status.counts(rows) == {"processed": 1, "failed": 1}

    # upsert: doc-2 is fixed, doc-3 is new; fields not given are null
    doc_status.update(workspace, [
        {"doc_id": "doc-2", "file_path": "b.txt", "status": doc_status.PROCESSED, "chunks": 1},
        {"doc_id": "doc-3", "file_path": "c.txt", "status": doc_status.PROCESSED},
    ])
    rows = doc_status.load(workspace)
    assert len(rows) == 3
    assert rows["doc-2"]["status"] == "processed" and rows["doc-2"]["error"] is None
    assert rows["doc-3"]["chunks"] is None
    assert rows["doc-1"]["chunks"] == 3  # untouched rows are kept
    assert doc_status.counts(rows) == {"processed": 3}
    assert len(workspace.list_files("docs", "docs.parquet")) == 1


def test_doc_status_ignores_unknown_fields(workspace):
    doc_status.update(workspace, [{"doc_id": "doc-x", "file_path": "x", "status": "failed", "content_hash": "h"}])
    assert doc_status.load(workspace)["doc-x"]["status"] == "failed"


# ---- extraction cache -----------------------------------------------------------------------------
def sample_extraction(tag: str = "") -> Extraction:
    return Extraction(
        entities=[EntityRecord("Grüße GmbH" + tag, "organization", "Ein Unternehmen — 東京", "chunk-1", "a.txt"),
                  EntityRecord("Bob", "person", "a person", "chunk-1")],
        relations=[RelationRecord("Grüße GmbH" + tag, "Bob", "employs, pays", "Bob works there", "chunk-1",
                                  2.5, "a.txt")],
        dropped=2,
    )


def test_cache_row_round_trip():
    result = sample_extraction()
    row = extraction_cache.to_row("chunk-1", "doc-1", "fp1", result, requests=3)
    assert set(row) == set(extraction_cache.SCHEMA.names)
    assert row["requests"] == 3 and row["dropped"] == 2
    assert "Grüße" in row["entities"]  # stored readable, not \u-escaped
    back = extraction_cache.from_row(row)
    assert back == result
    assert back.relations[0].weight == 2.5


def test_cache_round_trip_through_parquet(workspace):
    result = sample_extraction()
    extraction_cache.write_rows(workspace, [extraction_cache.to_row("chunk-1", "doc-1", "fp1", result, 1)])
    [row] = extraction_cache.load_cache(workspace, "fp1").values()
    assert extraction_cache.from_row(row) == result
    assert extraction_cache.from_row(
        extraction_cache.to_row("chunk-e", "doc-1", "fp1", Extraction(), 1)) == Extraction()


def test_load_cache_filters_by_fingerprint(workspace):
    extraction_cache.write_rows(workspace, [
        extraction_cache.to_row("chunk-1", "doc-1", "old", sample_extraction("-old"), 1),
        extraction_cache.to_row("chunk-2", "doc-1", "old", sample_extraction("-old"), 1),
    ])
    extraction_cache.write_rows(workspace, [extraction_cache.to_row("chunk-1", "doc-1", "new", sample_extraction(), 2)])
    new = extraction_cache.load_cache(workspace, "new")
    assert set(new) == {"chunk-1"}
    assert new["chunk-1"]["fingerprint"] == "new"
    assert extraction_cache.from_row(new["chunk-1"]).entities[0].name == "Grüße GmbH"
    assert set(extraction_cache.load_cache(workspace, "old")) == {"chunk-1", "chunk-2"}
    assert extraction_cache.load_cache(workspace, "other") == {}


def test_fingerprint_follows_extraction_settings():
    base = extraction_cache.extraction_fingerprint(load_settings(environ={}))
    assert base == extraction_cache.extraction_fingerprint(load_settings(environ={}))
    changed = [
        {"llm": {"model": "other-model"}},
        {"extraction": {"entity_types": ["person"]}},
        {"extraction": {"gleaning_rounds": 0}},
        {"extraction": {"language": "French"}},
        {"extraction": {"mode": "fast"}},
    ]
    prints = {extraction_cache.extraction_fingerprint(load_settings(overrides=o, environ={})) for o in changed}
    assert base not in prints and len(prints) == len(changed)
    # settings that do not change what is extracted keep the cache
    same = load_settings(overrides={"llm": {"max_concurrency": 3}, "graph": {"num_shards": 7}}, environ={})
    assert extraction_cache.extraction_fingerprint(same) == base
    # in fast mode the model is irrelevant
    fast = [load_settings(overrides={"extraction": {"mode": "fast"}, "llm": {"model": m}}, environ={})
            for m in ("a", "b")]
    assert len({extraction_cache.extraction_fingerprint(s) for s in fast}) == 1


def test_compact_merges_many_parts_into_one(workspace, monkeypatch):
    monkeypatch.setattr(extraction_cache, "COMPACT_AFTER_PARTS", 5)
    for i in range(5):
        extraction_cache.write_rows(workspace, [extraction_cache.to_row(f"chunk-{i}", "doc", "fp", Extraction(), 1)])
    extraction_cache.compact(workspace)
    assert len(workspace.list_files(extraction_cache.TABLE)) == 5  # not more than the limit: left alone

    # a sixth part, which re-delivers chunk-0 and chunk-1 (at-least-once), and another fingerprint
    extraction_cache.write_rows(workspace, [
        extraction_cache.to_row("chunk-0", "doc", "fp", Extraction(), 1),
        extraction_cache.to_row("chunk-1", "doc", "fp", Extraction(), 1),
        extraction_cache.to_row("chunk-1", "doc", "fp2", sample_extraction(), 1),
    ])
    before_fp = extraction_cache.load_cache(workspace, "fp")
    before_fp2 = extraction_cache.load_cache(workspace, "fp2")
    assert len(workspace.read_rows(extraction_cache.TABLE)) == 8
    extraction_cache.compact(workspace)
    files = workspace.list_files(extraction_cache.TABLE)
    assert len(files) == 1
    rows = workspace.read_rows(extraction_cache.TABLE)
    assert len(rows) == 6  # 5 chunks under fp + 1 under fp2, duplicates merged
    assert extraction_cache.load_cache(workspace, "fp") == before_fp
    assert extraction_cache.load_cache(workspace, "fp2") == before_fp2
    assert extraction_cache.from_row(before_fp2["chunk-1"]) == sample_extraction()


def test_compact_rewrites_only_the_small_parts_in_bounded_groups(workspace, monkeypatch):
    monkeypatch.setattr(extraction_cache, "COMPACT_AFTER_PARTS", 3)
    def texts() -> Extraction:  # incompressible descriptions: a merged part is as large as its parts
        return Extraction(entities=[EntityRecord(f"Name {i}", "person", os.urandom(200).hex(), "c", "f")
                                    for i in range(20)])

    for i in range(8):
        extraction_cache.write_rows(workspace, [extraction_cache.to_row(f"chunk-{i}", "doc", "fp", texts(), 1)])
    part_size = max(workspace.fs.get_file_info(p).size for p in workspace.list_files(extraction_cache.TABLE))
    monkeypatch.setattr(extraction_cache, "COMPACTED_PART_BYTES", 3 * part_size)  # about three parts a group
    before = extraction_cache.load_cache(workspace, "fp")
    extraction_cache.compact(workspace)
    compacted = workspace.list_files(extraction_cache.TABLE)
    assert 2 <= len(compacted) <= 4  # groups of about three parts, not one file of everything
    assert extraction_cache.load_cache(workspace, "fp") == before

    # the groups, now as large as a compacted part is meant to be, are not rewritten again
    for i in range(8, 12):
        extraction_cache.write_rows(workspace, [extraction_cache.to_row(f"chunk-{i}", "doc", "fp", texts(), 1)])
    big = {p for p in compacted if workspace.fs.get_file_info(p).size >= 3 * part_size // 2}
    extraction_cache.compact(workspace)
    after = set(workspace.list_files(extraction_cache.TABLE))
    assert big and big <= after
    assert set(extraction_cache.load_cache(workspace, "fp")) == {f"chunk-{i}" for i in range(12)}


def test_compact_with_the_real_threshold(tmp_path):
    workspace = Workspace(str(tmp_path / "ws"))
    for i in range(256):
        extraction_cache.write_rows(workspace, [extraction_cache.to_row(f"chunk-{i % 200}", "d", "fp", Extraction(), 1)])
    extraction_cache.compact(workspace)
    assert len(workspace.list_files(extraction_cache.TABLE)) == 256  # 256 parts are still fine
    extraction_cache.write_rows(workspace, [extraction_cache.to_row("chunk-x", "d", "fp", Extraction(), 1)])
    extraction_cache.compact(workspace)
    assert len(workspace.list_files(extraction_cache.TABLE)) == 1  # 257 are merged
    assert set(extraction_cache.load_cache(workspace, "fp")) == {f"chunk-{i}" for i in range(200)} | {"chunk-x"}
    assert len(workspace.read_rows(extraction_cache.TABLE)) == 201
