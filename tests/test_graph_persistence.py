"""Incremental shard persistence (storage/graph/snapshot.py): one delta per committed job on
top of a base, compaction from the files alone, and crash safety: a writer killed before
its commit or in the middle of a compaction leaves files that load as the graph before or
after the job, never a mix. Pure Python and files, plus one test of the real pipeline whose
driver is killed right before its commit."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import ray

from lightrag_ray.core.graph.shard_graph import ShardGraph
from lightrag_ray.core.tokenizer import count_tokens
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.storage import doc_status
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.graph.snapshot import (
    ENTITY_SCHEMA,
    RELATION_SCHEMA,
    list_files,
    load_snapshot,
    save_snapshot,
    snapshot_folder,
    tidy,
)
from lightrag_ray.storage.workspace import Workspace
from tests.graph_helpers import dump_graph
from tests.test_index_pipeline import DOC_A, DOC_B, _write
from tests.test_merge import random_corpus, route

NUM_SHARDS = 2


def state(shard: ShardGraph) -> dict[str, Any]:
    """Everything a shard would show or build on: views, counts, summaries, summary bases."""
    return {"export": shard.published.export(), "counts": shard.counts(), "summaries": dict(shard.summaries),
            "bases": dict(shard.summary_bases)}


def loaded(workspace: Workspace, shard: int, version: int | None = None) -> ShardGraph:
    fresh = ShardGraph(shard, NUM_SHARDS)
    load_snapshot(workspace, fresh, version)
    return fresh


def recount(shard: ShardGraph) -> dict[str, int]:
    return {kind: len(items) for kind, items in shard.published.export().items()}


def part_rows(entities: list, relations: list, chunks: set[str], shard: int, keep: bool = True) -> tuple[list, list]:
    """The shard's apply rows of the records from ``chunks`` (``keep=False``: from the other chunks)."""
    return route([e for e in entities if (e.chunk_id in chunks) == keep],
                 [r for r in relations if (r.chunk_id in chunks) == keep], NUM_SHARDS)[shard]


def run_job(shard: ShardGraph, rng: random.Random, entities: list, relations: list, job: set[str],
            seen: list[str]) -> None:
    """One write job on a shard: new chunks, a removed older chunk, sometimes a dropped
    entity, summaries of some long descriptions, the change feed taken."""
    shard.apply(*part_rows(entities, relations, job, shard.shard))
    if seen:
        shard.remove_chunks({rng.choice(seen)})
    owned = [k for k in shard.held_keys() if shard.live.owns(k)]
    if owned and rng.random() < 0.4:
        shard.drop([rng.choice(owned)], [])
    pending = shard.pending_summaries(2, 10_000, count_tokens)
    shard.add_summaries({p["hash"]: f"summary of {p['name']} ({len(p['fragments'])})" for p in pending[::2]})
    shard.take_changes()


def test_each_committed_version_loads_exactly_and_uncommitted_files_are_ignored(tmp_path):
    rng = random.Random(7)
    workspace = Workspace(str(tmp_path / "ws"))
    entities, relations = random_corpus(7, n_chunks=60)
    chunks = sorted({e.chunk_id for e in entities})
    shards = [ShardGraph(i, NUM_SHARDS) for i in range(NUM_SHARDS)]
    seen: list[str] = []
    kinds = []
    before = [state(s) for s in shards]
    for version, job in enumerate((chunks[i::8] for i in range(8)), start=1):
        for shard in shards:
            run_job(shard, rng, entities, relations, set(job), seen)
            assert shard.counts() == recount(shard)  # counts kept incrementally
            kinds.append(save_snapshot(workspace, shard, version, full_share=0.6))
        after = [state(s) for s in shards]
        for i in range(NUM_SHARDS):  # written, not committed: the previous version still loads
            assert state(loaded(workspace, i, version - 1)) == before[i]
            assert state(loaded(workspace, i, version)) == after[i]
        for shard in shards:
            shard.mark_saved()
            tidy(workspace, snapshot_folder(shard.shard, NUM_SHARDS), version, ratio=rng.choice([0.05, 0.5, 100]))
            assert state(loaded(workspace, shard.shard, version)) == after[shard.shard]
        seen.extend(job)
        before = after
    assert kinds[:2] == ["base", "base"] and "delta" in kinds  # first job: no base yet
    files = list_files(workspace, snapshot_folder(0, NUM_SHARDS))
    assert len(files.bases) == 1 and not files.incomplete  # compaction removed what it replaced
    assert any(s.summaries for s in shards) and any(s.counts()["entities"] for s in shards)


def test_a_job_that_changes_most_items_saves_a_base_and_a_small_one_a_delta(tmp_path):
    workspace = Workspace(str(tmp_path / "ws"))
    entities, relations = random_corpus(3, n_chunks=40)
    chunks = sorted({e.chunk_id for e in entities})
    shard = ShardGraph(0, NUM_SHARDS)
    folder = snapshot_folder(0, NUM_SHARDS)
    small = set(chunks[-1:])
    shard.apply(*part_rows(entities, relations, small, 0, keep=False))
    assert save_snapshot(workspace, shard, 1) == "base"
    shard.mark_saved()
    shard.apply(*part_rows(entities, relations, small, 0))
    assert shard.unsaved_share() < 0.5
    assert save_snapshot(workspace, shard, 2) == "delta"
    shard.mark_saved()
    delta_bytes = list_files(workspace, folder).deltas[2][1]
    assert delta_bytes < list_files(workspace, folder).bases[1][1] / 2  # the changed entries, not the shard
    assert save_snapshot(workspace, shard, 3) == "none"  # nothing changed: no file
    shard.remove_chunks(set(chunks[: len(chunks) * 3 // 4]))
    assert save_snapshot(workspace, shard, 3) == "base"
    shard.mark_saved()
    tidy(workspace, folder, 3, ratio=0.5)
    files = list_files(workspace, folder)
    assert sorted(files.bases) == [3] and not files.deltas
    assert state(loaded(workspace, 0, 3)) == state(shard)


def test_an_older_workspace_snapshot_loads_and_is_replaced_by_the_first_compaction(tmp_path):
    workspace = Workspace(str(tmp_path / "ws"))
    entities, relations = random_corpus(5, n_chunks=20)
    chunks = sorted({e.chunk_id for e in entities})
    shard = ShardGraph(0, NUM_SHARDS)
    old = set(chunks[:-2])
    shard.apply(*part_rows(entities, relations, old, 0))
    rows = shard.all_rows()  # the layout the previous release wrote: four files in the shard folder
    folder = snapshot_folder(0, NUM_SHARDS)
    for name, table in (("entities", pa.table(rows.entities, schema=ENTITY_SCHEMA)),
                        ("relations", pa.table(rows.relations, schema=RELATION_SCHEMA))):
        path = tmp_path / "ws" / "graph" / folder / f"{name}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, path)
    assert state(loaded(workspace, 0, 4)) == {**state(shard), "bases": {}, "summaries": {}}
    shard.mark_saved()
    shard.apply(*part_rows(entities, relations, old, 0, keep=False))
    assert save_snapshot(workspace, shard, 5) == "delta"
    assert state(loaded(workspace, 0, 5))["export"] == shard.published.export()
    tidy(workspace, folder, 5, ratio=0.0001)
    assert not (tmp_path / "ws" / "graph" / folder / "entities.parquet").exists()
    assert sorted(list_files(workspace, folder).bases) == [5]
    assert state(loaded(workspace, 0, 5))["export"] == shard.published.export()


def test_a_writer_that_dies_between_shards_leaves_the_graph_before_the_job_and_its_rerun_completes_it(tmp_path):
    workspace = Workspace(str(tmp_path / "ws"))
    entities, relations = random_corpus(11, n_chunks=30)
    chunks = sorted({e.chunk_id for e in entities})
    first, second = set(chunks[:20]), set(chunks[20:])

    def job(shards: list[ShardGraph], part: set[str]) -> None:
        for shard in shards:
            shard.apply(*part_rows(entities, relations, part, shard.shard))

    shards = [ShardGraph(i, NUM_SHARDS) for i in range(NUM_SHARDS)]
    job(shards, first)
    for shard in shards:
        save_snapshot(workspace, shard, 1)
    manifests.record_graph(workspace, {"entities": 0, "relations": 0})  # commit version 1
    before = [state(s) for s in shards]
    job(shards, second)
    save_snapshot(workspace, shards[0], 2)  # the writer dies here: shard 1 wrote nothing, no commit
    assert [state(loaded(workspace, i)) for i in range(NUM_SHARDS)] == before  # never a mix
    rerun = [loaded(workspace, i) for i in range(NUM_SHARDS)]  # the next run starts from disk
    job(rerun, second)
    for shard in rerun:
        save_snapshot(workspace, shard, 2)
    manifests.record_graph(workspace, {"entities": 0, "relations": 0})
    assert [state(loaded(workspace, i)) for i in range(NUM_SHARDS)] == [state(s) for s in shards]


KILL_MID_COMPACTION = """
import os, sys
from lightrag_ray.storage.graph import snapshot as graph_snapshot
from lightrag_ray.storage.workspace import Workspace
real, written = graph_snapshot._write_table, []
def write_then_die(workspace, table, path):
    real(workspace, table, path)
    written.append(path)
    if len(written) == 2:
        os._exit(9)  # killed after two of the new base's files
graph_snapshot._write_table = write_then_die
graph_snapshot.compact(Workspace(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
"""


def test_a_compaction_killed_midway_changes_nothing_and_the_next_one_completes(tmp_path):
    workspace = Workspace(str(tmp_path / "ws"))
    entities, relations = random_corpus(13, n_chunks=30)
    chunks = sorted({e.chunk_id for e in entities})
    shard = ShardGraph(0, NUM_SHARDS)
    folder = snapshot_folder(0, NUM_SHARDS)
    for version, part in enumerate((chunks[:20], chunks[20:25], chunks[25:]), start=1):
        shard.apply(*part_rows(entities, relations, set(part), 0))
        save_snapshot(workspace, shard, version)
        shard.mark_saved()
    expected = state(shard)
    assert sorted(list_files(workspace, folder).deltas) == [2, 3]
    killed = subprocess.run([sys.executable, "-c", KILL_MID_COMPACTION, workspace.uri, folder, "3"],
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == 9, killed.stderr
    files = list_files(workspace, folder)
    assert 3 in files.incomplete and sorted(files.bases) == [1] and sorted(files.deltas) == [2, 3]
    assert state(loaded(workspace, 0, 3)) == expected
    tidy(workspace, folder, 3, ratio=0.0001)
    files = list_files(workspace, folder)
    assert sorted(files.bases) == [3] and not files.deltas and not files.incomplete
    assert state(loaded(workspace, 0, 3)) == expected


KILL_BEFORE_COMMIT = """
import os, signal, sys
from lightrag_ray.config import Settings
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.storage import manifest
def die(*args, **kwargs):  # every shard wrote its delta; the manifest is the commit
    os.kill(os.getpid(), signal.SIGKILL)
manifest.record_graph = die
index_paths([sys.argv[2]], Settings.model_validate_json(sys.argv[1]), progress=None)
"""


def test_an_index_run_killed_before_its_commit_leaves_the_graph_before_it_and_the_rerun_completes_it(
        ray_cluster, llm, make_settings, tmp_path):
    docs = tmp_path / "docs"
    _write(docs, "a.txt", DOC_A)
    _write(docs, "b.txt", DOC_B)
    settings = make_settings("incremental")
    index_paths([str(docs / "a.txt")], settings, progress=None)
    before, version = dump_graph(settings), manifests.load(Workspace(settings.workspace)).graph_version
    killed = subprocess.run([sys.executable, "-c", KILL_BEFORE_COMMIT, settings.model_dump_json(), str(docs / "b.txt")],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "RAY_ADDRESS": ray_cluster.get_runtime_context().gcs_address})
    assert killed.returncode == -9, killed.stderr[-2000:]
    workspace = Workspace(settings.workspace)
    files = list_files(workspace, snapshot_folder(0, 2))
    assert version + 1 in files.deltas or version + 1 in files.bases  # the job's files are there, uncommitted
    assert manifests.load(workspace).graph_version == version
    assert dump_graph(settings) == before
    assert {row["status"] for row in doc_status.load(workspace).values()} == {doc_status.PROCESSED}
    assert len(doc_status.load(workspace)) == 1  # b.txt never counted as processed

    report = index_paths([str(docs / "b.txt")], settings, progress=None)
    assert report.docs_new == 1 and report.graph_version == version + 1
    one_run = make_settings("one-run")
    index_paths([str(docs)], one_run, progress=None)
    assert dump_graph(settings) == dump_graph(one_run) != before
    assert json.loads(Workspace(settings.workspace).read_bytes("manifest.json"))["entities"] == \
        json.loads(Workspace(one_run.workspace).read_bytes("manifest.json"))["entities"]


def _read_allocations(_actor: Any) -> dict[str, int]:
    """Bytes a compressed Arrow file read by Arrow's C++ reader holds, per allocator, in this
    process (a shard's snapshot load is such a read)."""
    import pyarrow.feather as feather

    sink = pa.BufferOutputStream()
    feather.write_feather(pa.table({"description": ["words of a mention " * 20] * 2000}), sink, compression="zstd")
    table = feather.read_table(pa.BufferReader(sink.getvalue()))
    held = {"mimalloc": pa.mimalloc_memory_pool().bytes_allocated(), "system": pa.system_memory_pool().bytes_allocated()}
    del table
    return held


def test_a_shard_actor_reads_its_snapshot_through_the_system_allocator(ray_cluster, tmp_path):
    """What a shard reads from its files is freed back to the OS once its tables are built:
    none of it goes through mimalloc, Arrow's default, which keeps freed pages (they doubled a
    loaded shard's memory: 591 MiB above the empty process instead of 273 on the bench graph)."""
    from lightrag_ray.config import GraphConfig
    from lightrag_ray.storage.graph.writer import GraphRouter

    entities, relations = random_corpus(7, 30)
    config = GraphConfig(num_shards=NUM_SHARDS)
    router = GraphRouter(str(tmp_path / "ws"), config, "allocator-test")
    try:
        router.apply(entities, relations)
        assert router.counts()["entities"] > 0
        for copies in router.shards:
            held = ray.get(copies[0].__ray_call__.remote(_read_allocations))
            assert held["mimalloc"] == 0 and held["system"] > 100_000, held
    finally:
        router.close()
