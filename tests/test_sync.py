"""A workspace follows its corpus (index.sync; real Ray, Milvus Lite, MiniLM): a seeded random
sequence of edits, appends, edits in the middle, renames, moves between folders, deletions,
restores and a record file gaining and losing records, synced with ``index --prune`` every few
steps, ends in the workspace that indexing the final corpus from scratch gives: the same
mention rows, entities, relations and descriptions, the same vector ids, and per query mode the
same context (entities, relations and passages as sets of ids). The same in LLM mode (the
scripted LLM), where a replaced document's unchanged chunks cost no extraction request.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from lightrag_ray.config import Settings, load_settings
from lightrag_ray.query.params import RETRIEVAL_MODES, QueryParam
from lightrag_ray.service.indexing import index_paths, preview_paths
from lightrag_ray.service.session import LocalSession
from lightrag_ray.storage import doc_status, manifest
from lightrag_ray.storage.vectors import KINDS, open_store
from lightrag_ray.storage.workspace import Workspace
from tests.graph_helpers import graph_differences, load_stored

PEOPLE = ["Zorvath Quillane", "Mirelle Dovanic", "Tobias Wren", "Ilsa Marchetti", "Oren Vashti", "Petra Lindqvist",
          "Caspian Roe", "Nadia Ferro", "Ulric Hale", "Greta Solberg"]
PLACES = ["Port Esmer", "Nettlewick", "Amberlight Hall", "the Sable Fleet", "Kestrel Bay", "Thornmoor"]
VERBS = ["met", "argued with", "sailed beside", "wrote to", "trained", "betrayed"]
CHUNKING = {"chunk_tokens": 40, "overlap_tokens": 5}  # files of a few sentences make 1-3 chunks
QUESTIONS = ["Who did Zorvath Quillane meet in Port Esmer?", "What happened at Kestrel Bay?",
             "Which people sailed beside Petra Lindqvist?"]


def sentence(rng: random.Random) -> str:
    a, b = rng.sample(PEOPLE, 2)
    return f"{a} {rng.choice(VERBS)} {b} in {rng.choice(PLACES)} in {rng.randint(1700, 1900)}."


def text(rng: random.Random, sentences: int | None = None) -> str:
    return " ".join(sentence(rng) for _ in range(sentences or rng.randint(1, 5)))


class Corpus:
    """Files under ``root`` (folders a/ and b/, and one record file), changed step by step."""

    def __init__(self, root: Path, rng: random.Random, files: int = 28) -> None:
        self.root, self.rng = root, rng
        self.deleted: dict[str, str] = {}
        for i in range(files):
            self.write(f"{'ab'[i % 2]}/doc{i:02d}.txt", text(rng))
        self.records = {f"r{i}": text(rng, 2) for i in range(4)}
        self.write_records()

    def write(self, name: str, content: str) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")

    def write_records(self) -> None:
        lines = [json.dumps({"id": key, "text": value}) for key, value in sorted(self.records.items())]
        self.write("records.jsonl", "\n".join(lines) + "\n")

    def texts(self) -> list[Path]:
        return sorted(self.root.rglob("*.txt"))

    def step(self, operation: str) -> str:
        rng = self.rng
        path = rng.choice(self.texts())
        name = str(path.relative_to(self.root))
        if operation == "edit":
            path.write_text(text(rng), encoding="utf-8")
        elif operation == "append":
            path.write_text(path.read_text(encoding="utf-8") + " " + sentence(rng), encoding="utf-8")
        elif operation == "edit_middle":
            parts = path.read_text(encoding="utf-8").split(". ")
            parts[len(parts) // 2] = sentence(rng).rstrip(".")
            path.write_text(". ".join(parts), encoding="utf-8")
        elif operation == "rename":
            path.rename(path.with_name(f"renamed_{path.name}"))
        elif operation == "move":
            other = "b" if name.startswith("a/") else "a"
            (self.root / other).mkdir(exist_ok=True)
            path.rename(self.root / other / path.name)
        elif operation == "delete":
            self.deleted[name] = path.read_text(encoding="utf-8")
            path.unlink()
        elif operation == "restore" and self.deleted:
            restored = rng.choice(sorted(self.deleted))
            self.write(restored, self.deleted.pop(restored))
            name = restored
        elif operation == "records":
            if rng.random() < 0.5 and len(self.records) > 1:
                self.records.pop(rng.choice(sorted(self.records)))
            else:
                self.records[f"r{len(self.records) + 10 + rng.randint(0, 99)}"] = text(rng, 2)
            self.write_records()
            name = "records.jsonl"
        return f"{operation} {name}"


OPERATIONS = ["edit", "append", "edit_middle", "rename", "move", "delete", "restore", "records"]


def sync_settings(workspace: Path, **overrides: Any) -> Settings:
    return load_settings(overrides={"workspace": str(workspace), "extraction": {"mode": "fast", "actors": 1,
                                    "num_cpus": 0.2}, "chunking": CHUNKING, "graph": {"num_shards": 2},
                                    "llm": {"backend": "none"}, **overrides}, environ={})


def vector_ids(settings: Settings) -> dict[str, set[str]]:
    store = open_store(settings, manifest.load(Workspace(settings.workspace)).embedding_dim)
    try:
        return {kind: {row["id"] for row in store.client.query(store.names[kind], filter='id != ""',
                                                                output_fields=["id"], limit=16384)} for kind in KINDS}
    finally:
        store.close()


def contexts(settings: Settings) -> dict[str, Any]:
    """Per mode and question: the ids of the entities, relations and passages of the context,
    retrieved by vectors only: BM25 scores depend on the collection's statistics (row count, mean
    length), which a synced workspace, whose deleted rows Milvus may still count until it
    compacts, need not share with a fresh one; vector scores do not."""
    found = {}
    with LocalSession(settings) as session:
        for mode in RETRIEVAL_MODES:
            for question in QUESTIONS:
                context = session.retrieve(question, QueryParam(mode=mode, lexical_weight=0))
                found[f"{mode}: {question}"] = (
                    sorted(e["name"] for e in context.entities),
                    sorted(tuple(sorted((r["source"], r["target"]))) for r in context.relations),
                    sorted(c["chunk_id"] for c in context.chunks))
    return found


def assert_same_workspace(synced: Settings, fresh: Settings, max_fragments: int | None = None) -> None:
    problems, _ = graph_differences(load_stored(synced), load_stored(fresh), max_fragments)
    assert not problems, f"{len(problems)} differences:\n" + "\n".join(problems[:40])
    got, want = (doc_status.load(Workspace(s.workspace)) for s in (synced, fresh))
    assert {d: (r["file_path"], r["status"]) for d, r in got.items()} == \
        {d: (r["file_path"], r["status"]) for d, r in want.items()}
    assert vector_ids(synced) == vector_ids(fresh)
    got_chunks, want_chunks = ({r["chunk_id"]: r["file_path"] for r in Workspace(s.workspace).read_rows("chunks")}
                               for s in (synced, fresh))
    assert got_chunks == want_chunks


def sync(settings: Settings, corpus: Path, prune: bool = True) -> Any:
    report = index_paths([str(corpus)], settings, progress=None, prune=prune)
    assert report.chunks_failed == 0 and not report.errors, report.errors
    return report


def test_a_random_sequence_of_changes_synced_gives_the_workspace_of_a_fresh_index(ray_cluster, tmp_path):
    rng = random.Random(42)
    corpus = Corpus(tmp_path / "corpus", rng)
    settings = sync_settings(tmp_path / "ws")
    first = sync(settings, corpus.root)
    assert first.docs_new == 28 + 4 and first.sources_added == 32
    operations = OPERATIONS * 3
    rng.shuffle(operations)
    log, totals = [], {"replaced": 0, "moved": 0, "removed": 0, "docs_removed": 0}
    for number, operation in enumerate(operations[:20], start=1):
        log.append(corpus.step(operation))
        if number % 5 == 0:  # several changes a sync, some to one file (an edit after a rename, ...)
            preview = preview_paths([str(corpus.root)], settings, prune=True)
            report = sync(settings, corpus.root)
            for key in ("replaced", "moved", "removed"):  # the dry run said what the run did
                assert preview[key] == getattr(report, f"sources_{key}"), (log[-3:], preview, report.to_dict())
                totals[key] += preview[key]
            totals["docs_removed"] += report.docs_removed
    assert all(totals.values()), totals  # not vacuous: every kind of change happened
    again = sync(settings, corpus.root)
    assert again.files == 0 and again.docs_new == 0 and again.sources_unchanged > 0  # nothing read the second time

    fresh = sync_settings(tmp_path / "fresh")
    sync(fresh, corpus.root)
    assert_same_workspace(settings, fresh)
    found = contexts(settings)
    assert all(chunks and (entities or key.startswith("naive")) for key, (entities, _, chunks) in found.items())
    assert found == contexts(fresh)
    print(f"\nsync sequence: {'; '.join(log)}\ntotals: {totals}")


def test_without_prune_a_deleted_file_stays_and_a_mistyped_path_removes_nothing(ray_cluster, tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Zorvath Quillane founded the Amberlight Guild in Port Esmer in 1742.")
    (corpus / "b.txt").write_text("Mirelle Dovanic commanded the Sable Fleet.")
    settings = sync_settings(tmp_path / "ws")
    sync(settings, corpus, prune=False)
    (corpus / "b.txt").unlink()
    kept = sync(settings, corpus, prune=False)
    assert kept.sources_removed == 0 and kept.docs_removed == 0
    assert len(doc_status.load(Workspace(settings.workspace))) == 2
    with pytest.raises(FileNotFoundError, match="input not found"):
        index_paths([str(tmp_path / "corpsu")], settings, progress=None, prune=True)
    assert len(doc_status.load(Workspace(settings.workspace))) == 2
    pruned = sync(settings, corpus)
    assert pruned.sources_removed == 1 and pruned.docs_removed == 1
    assert [r["file_path"] for r in doc_status.load(Workspace(settings.workspace)).values()] == [str(corpus / "a.txt")]


def test_in_llm_mode_a_replaced_documents_unchanged_chunks_cost_no_request(ray_cluster, llm, tmp_path):
    rng = random.Random(7)
    corpus = Corpus(tmp_path / "corpus", rng, files=6)
    overrides = {"llm": {"backend": "openai", "base_url": llm.url, "timeout_s": 5, "backoff_s": 0.05,
                         "max_retries": 2}, "extraction": {"mode": "llm", "actors": 1, "num_cpus": 0.2,
                                                           "gleaning_rounds": 0},
                 "graph": {"num_shards": 2, "summary_max_fragments": 3}}
    settings = sync_settings(tmp_path / "ws", **overrides)
    sync(settings, corpus.root)
    target, renamed, deleted = sorted(corpus.texts(), key=lambda p: len(p.read_text()), reverse=True)[:3]
    target.write_text(target.read_text() + " " + sentence(rng), encoding="utf-8")  # its first chunks stay the same
    renamed.rename(renamed.with_name(f"renamed_{renamed.name}"))
    deleted.unlink()
    corpus.step("records")
    llm.reset()
    report = sync(settings, corpus.root)
    assert (report.sources_replaced, report.sources_moved) == (1, 1) and report.sources_removed >= 1
    assert report.chunks_cached > 0
    assert llm.counts().get("extract", 0) == report.chunks_extracted < report.chunks
    fresh = sync_settings(tmp_path / "fresh", **overrides)
    sync(fresh, corpus.root)
    assert_same_workspace(settings, fresh, max_fragments=3)


KILLED_SYNC = """
import os, signal, sys
from lightrag_ray.config import Settings
from lightrag_ray.index.stages import merge
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.storage import chunk_table

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if sys.argv[3] == "extraction":  # the new versions' first extracted batch merged, then killed
    merged = merge.MergeIntoShards.__call__
    merge.MergeIntoShards.__call__ = lambda self, rows: (merged(self, rows), die())
else:  # after the commit: the old versions' first chunk part rewritten, then killed
    drop = chunk_table.drop_rows
    chunk_table.drop_rows = lambda workspace, rows: (drop(workspace, rows[:1]), die())
index_paths([sys.argv[2]], Settings.model_validate_json(sys.argv[1]), progress=None, prune=True)
"""


@pytest.mark.parametrize("moment", ["extraction", "removal"])
def test_a_sync_killed_midway_completes_when_run_again(ray_cluster, tmp_path, moment):
    import os
    import subprocess
    import sys

    rng = random.Random(11)
    corpus = Corpus(tmp_path / "corpus", rng, files=10)
    settings = sync_settings(tmp_path / "ws")
    sync(settings, corpus.root)
    for operation in ("edit", "append", "edit_middle", "rename", "move", "delete", "records"):
        corpus.step(operation)
    killed = subprocess.run([sys.executable, "-c", KILLED_SYNC, settings.model_dump_json(), str(corpus.root), moment],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "RAY_ADDRESS": ray_cluster.get_runtime_context().gcs_address})
    assert killed.returncode == -9, killed.stderr[-2000:]
    report = sync(settings, corpus.root)
    assert report.sources_replaced + report.sources_removed + report.sources_moved > 0  # the sync was still to do
    fresh = sync_settings(tmp_path / "fresh")
    sync(fresh, corpus.root)
    assert_same_workspace(settings, fresh)


def test_a_workspace_from_before_sources_is_adopted_without_extraction(ray_cluster, tmp_path):
    """No sources table and an extraction cache without text keys (as written before this
    change): the first sync reads the files once and indexes nothing; an edit then reuses the
    migrated cache for its unchanged chunks."""
    import pyarrow.parquet as pq

    rng = random.Random(3)
    corpus = Corpus(tmp_path / "corpus", rng, files=6)
    settings = sync_settings(tmp_path / "ws")
    sync(settings, corpus.root)
    workspace = Workspace(settings.workspace)
    workspace.delete_file(workspace.path("sources", "sources.parquet"))
    for part in workspace.list_files("extractions"):
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(["text_key"]), part)
    adopted = sync(settings, corpus.root)
    assert adopted.files == 7 and adopted.docs_new == 0 and adopted.chunks == 0 and adopted.sources_unchanged == 10
    assert adopted.graph_version == 1  # nothing was written to the graph
    target = max(corpus.texts(), key=lambda p: len(p.read_text()))
    target.write_text(target.read_text() + " " + sentence(rng), encoding="utf-8")
    edited = sync(settings, corpus.root)
    assert edited.files == 1 and edited.sources_replaced == 1 and edited.chunks_cached > 0
