"""Indexing end to end: real Ray, Milvus Lite, MiniLM, scripted LLM over HTTP."""

from __future__ import annotations

import time

import pytest

from lightrag_ray.index import pipeline
from lightrag_ray.core.names import entity_key
from lightrag_ray.serve.document_views import doc_view
from lightrag_ray.service.indexing import index_paths
from lightrag_ray.storage import doc_status
from lightrag_ray.storage.manifest import WorkspaceMismatchError
from lightrag_ray.storage.vectors import MilvusStore
from lightrag_ray.storage.workspace import Workspace
from tests.graph_helpers import dump_graph, expected_graph, passages_sent
from tests.opening_counts import Opened

DOC_A = """Ebenezer Scrooge kept his counting house in London. Bob Cratchit worked for Ebenezer Scrooge.
Jacob Marley was the partner of Ebenezer Scrooge. Tiny Tim was the son of Bob Cratchit.
Bob Cratchit loved Tiny Tim and his wife Martha Cratchit."""

DOC_B = """Fred Holywell invited Ebenezer Scrooge to dinner in London. Bob Cratchit walked home.
Ebenezer Scrooge later raised the salary of Bob Cratchit. Fezziwig trained Ebenezer Scrooge."""


def _write(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


class StageAudit:
    """A throwaway stage put into IndexRun.stages (before "embed graph"): it needs the graph,
    and records the executor that ran the batch stages and the graph's counts when it ran."""

    NAME = "count the graph"

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from lightrag_ray.index.run_stage import Stage

        self.seen: list[tuple[str, dict[str, int]]] = []
        listed = pipeline.IndexRun.stages

        def with_audit(run: pipeline.IndexRun) -> list[Stage]:
            stages = listed(run)
            at = [stage.name for stage in stages].index("embed graph")
            audit = Stage(self.NAME, lambda: self.seen.append((type(run.executor).__name__, run.graph.counts())),
                          needs=("graph",), reads=("graph",), when=run._builds_graph)
            return stages[:at] + [audit] + stages[at:]

        monkeypatch.setattr(pipeline.IndexRun, "stages", with_audit)

    def check(self, report: pipeline.IndexReport, executor: str) -> None:
        """It ran once, in its place, under ``executor``, saw the merged graph and was timed."""
        assert [name for name, _ in self.seen] == [executor]
        assert self.seen[0][1] == {"entities": report.entities, "relations": report.relations}
        order = list(report.stage_seconds)
        assert order.index("embed chunks, extract and merge") < order.index(self.NAME) < order.index("embed graph")
        self.seen.clear()


def test_christmas_carol_graph_matches_llm_records_and_rerun_is_free(ray_cluster, llm, make_settings, shared_data,
                                                                     monkeypatch):
    settings = make_settings()
    book = shared_data / "christmas_carol" / "mock_data.txt"
    monkeypatch.setattr(pipeline, "LITE_ADVICE_VECTORS", 100)  # this run's vectors count as a large run's
    lines: list[str] = []

    report = index_paths([str(book)], settings, progress=lines.append)

    # Milvus Lite's indexing at the end of the run is announced, and past the threshold a server advised
    assert any(line.startswith(f"Milvus Lite: indexing this run's {report.vectors_upserted} vectors") for line in lines)
    assert any("set vectors.uri to a Milvus server" in line for line in lines), lines
    assert "finish vectors" in report.stage_seconds

    assert report.docs_new == 1 and report.chunks_failed == 0 and not report.errors
    passages = passages_sent(llm.requests)
    assert len(passages) == report.chunks == report.chunks_extracted > 30
    counts = llm.counts()
    assert counts["extract"] == report.chunks and counts["glean"] == report.chunks  # one gleaning round
    want_entities, want_relations = expected_graph(passages)
    assert (report.entities, report.relations) == (len(want_entities), len(want_relations))
    graph = dump_graph(settings)
    assert {e["key"] for e in graph["entities"]} == want_entities
    assert {frozenset((r["source_key"], r["target_key"])) for r in graph["relations"]} == want_relations
    # long descriptions were summarised by the LLM, once per distinct fragment set
    assert report.summaries > 0 and counts["summary"] >= report.summaries
    scrooge = next(e for e in graph["entities"] if e["key"] == entity_key("Scrooge"))
    assert scrooge["description"].startswith("Summary of") and len(scrooge["source_ids"]) > 8

    store = MilvusStore(settings.milvus_uri(), 384)
    try:
        assert store.count("entities") == report.entities
        assert store.count("relations") == report.relations
        assert store.count("chunks") == report.chunks
    finally:
        store.close()

    llm.reset()
    again = index_paths([str(book)], settings, progress=None)
    assert llm.counts() == {} and again.docs_skipped == 1 and again.docs_new == 0
    assert again.graph_version == report.graph_version
    assert dump_graph(settings) == graph


def test_second_document_merges_without_reextracting_the_first(ray_cluster, llm, make_settings, tmp_path):
    settings = make_settings()
    corpus = tmp_path / "corpus"
    _write(corpus, "a.txt", DOC_A)
    first = index_paths([str(corpus)], settings, progress=None)
    before = dump_graph(settings)
    assert first.docs_new == 1 and llm.counts()["extract"] == first.chunks

    llm.reset()
    _write(corpus, "b.txt", DOC_B)
    second = index_paths([str(corpus)], settings, progress=None)

    assert second.docs_new == 1 and second.docs_skipped == 1
    sent = passages_sent(llm.requests)
    assert len(sent) == second.chunks and all("Fezziwig" in p for p in sent)  # only b.txt's chunk
    after = dump_graph(settings)
    key = entity_key("Ebenezer Scrooge")
    old = next(e for e in before["entities"] if e["key"] == key)
    new = next(e for e in after["entities"] if e["key"] == key)
    assert set(old["source_ids"]) < set(new["source_ids"])
    pair = {entity_key("Ebenezer Scrooge"), entity_key("Bob Cratchit")}
    rel_before = next(r for r in before["relations"] if {r["source_key"], r["target_key"]} == pair)
    rel_after = next(r for r in after["relations"] if {r["source_key"], r["target_key"]} == pair)
    assert rel_after["weight"] == rel_before["weight"] + 1.0  # one more source chunk
    assert second.graph_version == first.graph_version + 1


def test_one_and_four_shards_give_the_same_graph(ray_cluster, llm, make_settings, tmp_path):
    corpus = tmp_path / "corpus"
    _write(corpus, "a.txt", DOC_A)
    _write(corpus, "b.txt", DOC_B)
    one = make_settings("one", graph={"num_shards": 1})
    four = make_settings("four", graph={"num_shards": 4})
    report_one = index_paths([str(corpus)], one, progress=None)
    report_four = index_paths([str(corpus)], four, progress=None)
    assert (report_one.entities, report_one.relations) == (report_four.entities, report_four.relations)
    assert dump_graph(one) == dump_graph(four)


def test_a_small_run_works_in_the_driver_and_builds_what_the_ray_data_pools_build(
        ray_cluster, llm, make_settings, tmp_path, monkeypatch):
    """Also: the Ray Data passes run as several executions ("waves", so that the driver's memory
    does not grow with the corpus); cut into one per file and one per chunk part here."""
    from lightrag_ray.index import executors

    corpus = tmp_path / "corpus"
    _write(corpus, "a.txt", DOC_A)
    _write(corpus, "b.txt", DOC_B)
    driver = make_settings("driver")  # default: up to 4 MB in the driver
    pools = make_settings("pools", ray={"local_stages_max_mb": 0})
    monkeypatch.setattr(executors, "WAVE_FILES", 1)
    monkeypatch.setattr(executors, "WAVE_PARTS", 1)
    cut, waves = executors._waves, []

    def counted(items, size):
        slices = list(cut(items, size))
        waves.append(len(slices))
        return iter(slices)

    monkeypatch.setattr(executors, "_waves", counted)
    audit, opened = StageAudit(monkeypatch), Opened(monkeypatch)
    reports = {}
    for name, settings in (("driver", driver), ("pools", pools)):
        llm.reset()
        reports[name] = index_paths([str(corpus)], settings, progress=None)
        reports[name].requests = llm.counts()
        # IndexRun.run is the loop over IndexRun.stages: a stage put into the list runs in its
        # place, timed, whichever executor maps the batch stages (the processors': test_data_llm_pipeline)
        audit.check(reports[name], {"driver": "InProcess", "pools": "RayDataPools"}[name])
        # and this process builds one Workspace (the stages in the driver too) and, for a new
        # workspace, reads no manifest (it writes the first one)
        assert opened.take() == (1, 0), name
    assert reports["driver"].stages == "driver" and reports["pools"].stages == "ray-data"
    assert waves[0] == 2 and waves[1] >= 2  # chunking: one per file; extraction: one per part
    fields = ("docs_new", "chunks", "chunks_extracted", "llm_requests", "summaries", "vectors_upserted",
              "entities", "relations", "requests")
    assert [getattr(reports["driver"], f) for f in fields] == [getattr(reports["pools"], f) for f in fields]
    assert reports["driver"].requests["extract"] == reports["driver"].chunks > 0
    assert dump_graph(driver) == dump_graph(pools)
    statuses = [{d: (r["status"], r["chunks"]) for d, r in doc_status.load(Workspace(s.workspace)).items()}
                for s in (driver, pools)]
    assert statuses[0] == statuses[1] and {s for s, _ in statuses[0].values()} == {doc_status.PROCESSED}
    audit.seen.clear(), opened.take()
    again = index_paths([str(corpus)], driver, progress=None)  # nothing new: the audit's condition keeps it out
    assert not audit.seen and StageAudit.NAME not in again.stage_seconds and again.docs_skipped == 2
    assert opened.take() == (1, 1)  # an indexed workspace: its manifest read once
    # past the limit, the same workspace's next run uses the pools; a run that builds: still once
    _write(corpus, "c.txt", DOC_A.replace("Scrooge", "Scrivener"))
    over = make_settings("driver", ray={"local_stages_max_mb": len(DOC_A.encode()) / 2**20})
    built = index_paths([str(corpus)], over, progress=None)
    assert built.stages == "ray-data" and built.docs_new == 1 and built.docs_skipped == 2
    assert opened.take() == (1, 1)
    assert index_paths([str(corpus / "a.txt")], make_settings("under", ray={
        "local_stages_max_mb": len(DOC_A.encode()) / 2**20}), progress=None).stages == "driver"


def test_bad_files_get_clear_errors_and_the_rest_indexes(ray_cluster, llm, make_settings, tmp_path):
    corpus = tmp_path / "corpus"
    _write(corpus, "good.txt", DOC_A)
    (corpus / "empty.txt").write_bytes(b"")
    (corpus / "blob.txt").write_bytes(b"\x00\x01\x02binary\x00" * 20)
    (corpus / "latin1.txt").write_bytes("Caf\xe9 de Fran\xe7ois".encode("latin-1"))
    settings = make_settings()

    report = index_paths([str(corpus)], settings, progress=None)

    errors = {e["file_path"].rsplit("/", 1)[1]: e["error"] for e in report.errors}
    assert set(errors) == {"empty.txt", "blob.txt", "latin1.txt"}
    assert "empty" in errors["empty.txt"] and "binary" in errors["blob.txt"] and "UTF-8" in errors["latin1.txt"]
    assert report.docs_new == 1 and report.entities > 0
    rows = doc_status.load(Workspace(settings.workspace))
    assert doc_status.counts(rows) == {doc_status.PROCESSED: 1, doc_status.FAILED: 3}
    # the WebUI's document list shows the start of each text and its length (LightRAG's fields)
    views = {row["file_path"].rsplit("/", 1)[1]: doc_view(row) for row in rows.values()}
    assert views["good.txt"]["content_length"] == len(DOC_A)
    assert views["good.txt"]["content_summary"] == " ".join(DOC_A.split())  # under 250 characters: all of it
    assert views["blob.txt"]["content_summary"] == "" and views["blob.txt"]["content_length"] == 0


def test_a_document_summary_is_the_start_of_its_text():
    long = "word " * 100 + "\n\n  tail"
    summary = doc_status.content_summary(long)
    assert summary.endswith("...") and len(summary) <= doc_status.SUMMARY_CHARS + 3 and "  " not in summary
    assert summary.startswith("word word") and "tail" not in summary
    assert doc_status.content_summary(" Short\n text ") == "Short text"


def test_workspace_refuses_a_different_embedding_model(ray_cluster, llm, make_settings, tmp_path):
    corpus = tmp_path / "corpus"
    _write(corpus, "a.txt", DOC_A)
    index_paths([str(corpus)], make_settings(), progress=None)
    other = make_settings(embedding={"model": "some-other-model"})
    with pytest.raises(WorkspaceMismatchError, match="embedding_model"):
        index_paths([str(corpus)], other, progress=None)


@pytest.fixture
def small_corpus(tmp_path):
    corpus = tmp_path / "corpus"
    _write(corpus, "a.txt", DOC_A)
    _write(corpus, "b.txt", DOC_B)
    return corpus


def test_llm_failures_are_recorded_retried_and_never_double_counted(
    ray_cluster, llm, make_settings, small_corpus, tmp_path
):
    clean = make_settings("clean", chunking={"chunk_tokens": 40, "overlap_tokens": 5})
    index_paths([str(small_corpus)], clean, progress=None)
    chunk_count = llm.counts()["extract"]
    assert chunk_count >= 4

    llm.reset()
    llm.add_rule(kind="extract", contains="Jacob Marley", action="malformed", times=1)
    llm.add_rule(kind="extract", contains="Tiny Tim", action="429", times=10)  # beyond retries
    llm.add_rule(kind="extract", contains="Fezziwig", action="500", times=10)
    llm.add_rule(kind="extract", contains="Fred Holywell", action="timeout", times=10)
    llm.timeout_sleep_s = 6  # client timeout is 5 s
    flaky = make_settings("flaky", chunking={"chunk_tokens": 40, "overlap_tokens": 5},
                          llm={"timeout_s": 1, "max_retries": 1})
    first = index_paths([str(small_corpus)], flaky, progress=None)

    assert first.chunks_failed >= 3 and first.chunks_extracted + first.chunks_failed == chunk_count
    assert first.docs_failed == 2 and all("index the document again to retry them" in e["error"] for e in first.errors)
    docs = doc_status.load(Workspace(flaky.workspace))
    assert {d["status"] for d in docs.values()} == {doc_status.FAILED}

    llm.clear_rules()
    llm.reset()
    second = index_paths([str(small_corpus)], flaky, progress=None)
    assert llm.counts()["extract"] == first.chunks_failed  # only the failed chunks are sent again
    assert second.chunks_cached == first.chunks_extracted and second.docs_failed == 0
    assert dump_graph(flaky) == dump_graph(clean)


@pytest.mark.parametrize("stages_mb", [4.0, 0.0], ids=["driver", "ray-data"])
def test_killed_graph_shard_is_restarted_and_the_graph_is_unchanged(ray_cluster, llm, make_settings, small_corpus,
                                                                    stages_mb):
    """Extraction workers merge straight into the shards; a shard killed mid-run recovers what
    it had from its write log (storage.graph.wal) and the run ends with the same graph."""
    import threading

    import ray

    from lightrag_ray.storage.graph.actor import shard_actor_name

    chunking = {"chunk_tokens": 40, "overlap_tokens": 5}
    clean = make_settings("clean", chunking=chunking, graph={"num_shards": 2})
    first = index_paths([str(small_corpus)], clean, progress=None)

    # one chunk per LLM batch, so the first chunks are merged (and logged) before the kill
    disturbed = make_settings("disturbed", chunking=chunking, graph={"num_shards": 2},
                              ray={"local_stages_max_mb": stages_mb}, llm={"max_concurrency": 1},
                              extraction={"actors": 1})
    llm.reset()
    killed = []

    def kill_when_half_extracted() -> None:
        while llm.counts().get("extract", 0) < 2:
            time.sleep(0.02)
        shard = ray.get_actor(shard_actor_name(disturbed.workspace, 0, 2), namespace=disturbed.ray.namespace)
        ray.kill(shard, no_restart=False)
        killed.append(llm.counts()["extract"])

    threading.Thread(target=kill_when_half_extracted, daemon=True).start()
    report = index_paths([str(small_corpus)], disturbed, progress=None)

    assert killed and killed[0] < first.chunks and report.docs_failed == 0
    assert dump_graph(disturbed) == dump_graph(clean)

