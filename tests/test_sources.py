"""The sync plan (core.sources): which files are read, what replaces, moves and removes what.
Pure logic: no Ray, no files."""

from __future__ import annotations

from lightrag_ray.core.sources import FILE, TEXT, UNKNOWN, Listed, normalise_source, plan_reads, plan_sync, record_source, under


def row(source: str, doc: str, size: int = 10, mtime: int = 1, kind: str = FILE, file: str | None = None) -> dict:
    file = file or source.split("#", 1)[0]
    return {"source": source, "kind": kind, "file": file, "size": size, "mtime_ns": mtime, "doc_id": doc,
            "file_path": source.removeprefix("/c/")}


def test_sources_are_spelled_once():
    assert normalise_source("/c/./a/../a/x.txt") == "/c/a/x.txt"
    assert normalise_source("file:///c/x.txt") == "/c/x.txt"
    assert normalise_source("s3://bucket/docs/") == "s3://bucket/docs"
    assert record_source("/c/r.jsonl", "in/r.jsonl", "in/r.jsonl#k7") == "/c/r.jsonl#k7"
    assert record_source("/c/a.txt", "in/a.txt", "in/a.txt") == "/c/a.txt"
    assert under("/c/a/x.txt", ["/c/a"]) and under("/c/a", ["/c/a"])
    assert not under("/c/ab/x.txt", ["/c/a"])  # a sibling folder sharing a prefix is not inside


def test_only_new_changed_failed_or_unsized_files_are_read():
    known = [row("/c/same.txt", "doc-1"), row("/c/touched.txt", "doc-2"), row("/c/failed.txt", "doc-3"),
             row("/c/adopted.txt", "doc-4", size=UNKNOWN, mtime=UNKNOWN)]
    listed = [Listed(p, p, 10, 1) for p in ("/c/same.txt", "/c/failed.txt", "/c/adopted.txt", "/c/new.txt")]
    listed.append(Listed("/c/touched.txt", "/c/touched.txt", 10, 2))
    read, alone = plan_reads(listed, known, settled={"doc-1", "doc-2", "doc-4"})
    assert [f.file for f in alone] == ["/c/same.txt"]
    assert sorted(f.file for f in read) == ["/c/adopted.txt", "/c/failed.txt", "/c/new.txt", "/c/touched.txt"]


def test_an_edit_replaces_a_deleted_file_is_removed_only_with_prune():
    known = [row("/c/a.txt", "doc-a"), row("/c/b.txt", "doc-b"), row("/c/keep.txt", "doc-k")]
    seen = [row("/c/a.txt", "doc-a2", size=12)]
    kept = plan_sync(known, seen, missing_files={"/c/b.txt"}, prune=False, alone=1)
    assert kept.replaced == ["/c/a.txt"] and kept.removed == [] and kept.removed_docs == {"doc-a"}
    assert {r["source"] for r in kept.sources} == {"/c/a.txt", "/c/b.txt", "/c/keep.txt"}
    assert kept.unchanged == 1
    pruned = plan_sync(known, seen, missing_files={"/c/b.txt"}, prune=True, alone=1)
    assert pruned.removed == ["/c/b.txt"] and pruned.removed_docs == {"doc-a", "doc-b"}
    assert {r["source"]: r["doc_id"] for r in pruned.sources} == {"/c/a.txt": "doc-a2", "/c/keep.txt": "doc-k"}


def test_a_move_re_points_the_document_with_or_without_prune():
    known = [row("/c/old/x.txt", "doc-x")]
    seen = [row("/c/new/x.txt", "doc-x")]
    for prune in (False, True):
        plan = plan_sync(known, seen, missing_files={"/c/old/x.txt"}, prune=prune)
        assert plan.moved == ["/c/old/x.txt -> /c/new/x.txt"] and not plan.removed_docs
        assert plan.file_paths == {"doc-x": "new/x.txt"}
        assert [r["source"] for r in plan.sources] == ["/c/new/x.txt"]


def test_copies_share_a_document_and_removing_one_keeps_it():
    known = [row("/c/a.txt", "doc-x"), row("/c/b.txt", "doc-x")]
    plan = plan_sync(known, [], missing_files={"/c/b.txt"}, prune=True)
    assert plan.removed == ["/c/b.txt"] and plan.removed_docs == set()
    assert plan.file_paths == {"doc-x": "a.txt"}  # the remaining source's path


def test_a_record_file_gains_and_loses_records_and_other_kinds_are_never_touched():
    known = [row("/c/r.jsonl#1", "doc-1"), row("/c/r.jsonl#2", "doc-2"),
             row("text:/w/inbox/t1/0.txt", "doc-t", kind=TEXT)]
    seen = [row("/c/r.jsonl#1", "doc-1", size=20), row("/c/r.jsonl#3", "doc-3", size=20)]
    plan = plan_sync(known, seen, missing_files=set(), prune=True)
    assert plan.added == ["/c/r.jsonl#3"] and plan.removed == ["/c/r.jsonl#2"] and plan.removed_docs == {"doc-2"}
    assert {r["source"] for r in plan.sources} == {"/c/r.jsonl#1", "/c/r.jsonl#3", "text:/w/inbox/t1/0.txt"}
    assert plan.unchanged == 1


def test_a_file_that_failed_and_now_reads_replaces_its_error():
    known = [row("/c/a.txt", "doc-error")]
    plan = plan_sync(known, [row("/c/a.txt", "doc-good", size=11)], missing_files=set(), prune=False)
    assert plan.replaced == ["/c/a.txt"] and plan.removed_docs == {"doc-error"}
