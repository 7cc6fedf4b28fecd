"""Operator-facing edges of the `lightrag-ray` command (issue 15): checks before Ray starts,
one-line failures, input files, a quiet console with progress, Ctrl-C and SIGTERM.

Commands run as subprocesses, as users run them; those that need Ray join the session's
cluster (--ray-address). Items refer to the numbered problems of the issue."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lightrag_ray.cli.demo import SAMPLE
from lightrag_ray.index.documents import list_input_files
from lightrag_ray.index.progress import StageProgress
from tests.net_helpers import free_port
from tests.scripted_rerank import score
from tests.test_cli import CLI, ENV, default_sigint, run_cli
from tests.test_index_pipeline import DOC_A

RAY_NOISE = ("INFO", "WARNING", "Warning", "Traceback", "Loading weights", "\x1b[", "Running Dataset", "Running 0:")
# Still shown: Ray's C++ core worker logs one error line (once per process, for the first
# such actor) when an actor that may restart gets arguments from the object store
# (ray-project/ray#53727). Ray Data hands its MapWorker actors the UDF and DataContext as
# object refs and makes them restartable; only max_restarts=0 (no retry of a lost node's
# batches) or RAY_BACKEND_LOG_LEVEL (which prints a line of its own) avoid it. The graph
# shards and embedding actors start earlier with small arguments, so the line never names them.
ACTOR_ARGS_NOTE = "has constructor arguments in the object store"


def _address(ray_cluster) -> str:
    return ray_cluster.get_runtime_context().gcs_address


# ---- item 9: a wrong path is reported before Ray starts -------------------------------

def test_missing_path_fails_at_once_without_ray(tmp_path):
    started = time.monotonic()
    result = run_cli("index", str(tmp_path / "nope"), "--workspace", str(tmp_path / "ws"), "--extraction-mode", "fast")
    assert time.monotonic() - started < 8
    assert result.returncode == 2
    assert result.stderr == f"error: input not found: {tmp_path / 'nope'}\n"
    assert not (tmp_path / "ws").exists()


# ---- item 2: a workspace a server holds is detected up front ---------------------------

HOLDER = """
import sys, time
from lightrag_ray.storage.vectors import MilvusStore
MilvusStore(sys.argv[1], 384)
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.integration
def test_index_and_query_on_a_held_workspace_fail_fast_and_write_nothing(tmp_path):
    """The Milvus Lite file is held open by another process, as `lightrag-ray serve` holds it."""
    workspace = tmp_path / "ws"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(workspace / "milvus.db")], env=ENV,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        before = sorted(p.name for p in workspace.iterdir())
        (tmp_path / "a.txt").write_text(DOC_A)
        for command in (["index", str(tmp_path / "a.txt"), "--extraction-mode", "fast"],
                        ["query", "who founded Acme?", "--context-only"]):
            started = time.monotonic()
            result = run_cli(*command, "--workspace", str(workspace))
            assert time.monotonic() - started < 10, command
            assert result.returncode == 2, result.stderr
            [line] = result.stderr.splitlines()
            assert line.startswith(f"error: workspace {workspace} is in use by another process")
            assert "lightrag-ray serve" in line and "Traceback" not in result.stderr
        assert sorted(p.name for p in workspace.iterdir()) == before  # no chunks/, docs/, manifest
    finally:
        holder.kill()
        holder.wait()


# ---- items 5, 6, 8, 4: one folder with the sample, a damaged PDF, a PNG and the workspace inside --

@pytest.fixture(scope="module")
def sample_runs(ray_cluster, tmp_path_factory):
    """`index CORPUS --workspace CORPUS/ws` twice (fast mode): the first builds the index,
    the second finds the workspace's own files inside the folder it reads."""
    corpus = tmp_path_factory.mktemp("edges") / "corpus"
    corpus.mkdir()
    shutil.copy(SAMPLE, corpus / SAMPLE.name)
    (corpus / "scan.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n")
    (corpus / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (corpus / ".hidden.txt").write_text("an editor's swap file")
    args = ["index", str(corpus), "--workspace", str(corpus / "ws"), "--extraction-mode", "fast",
            "--extraction-actors", "1", "--ray-address", _address(ray_cluster)]
    first = run_cli(*args)
    second = run_cli(*args, "--json")
    return corpus, first, second


def test_unsupported_and_damaged_files_are_listed_as_errors(sample_runs, tmp_path):
    corpus, first, _ = sample_runs
    assert first.returncode == 1, first.stderr
    errors = [line for line in first.stdout.splitlines() if line.startswith("error:")]
    advice = ("convert it to text (.txt .md .markdown .rst .json .jsonl .ndjson .parquet .pdf .docx .pptx .xlsx "
              ".html .htm) first")
    assert errors == [f"error: {corpus / 'photo.png'}: unsupported file type .png: {advice}",
                      f"error: {corpus / 'scan.pdf'}: cannot read the file as PDF (startxref not found): "
                      "it is damaged or not a valid PDF file"]
    # a .png named on the command line is an error too, not a text document (no Ray needed)
    single = run_cli("index", str(corpus / "photo.png"), "--workspace", str(tmp_path / "ws"), "--extraction-mode",
                     "fast", "--json")
    assert single.returncode == 1, single.stderr
    report = json.loads(single.stdout)
    assert report["files"] == 0 and report["docs_new"] == 0 and report["chunks"] == 0
    assert [e["error"].split(":")[0] for e in report["errors"]] == ["unsupported file type .png"]


def test_workspace_inside_the_folder_is_never_read(sample_runs):
    corpus, _, second = sample_runs
    assert (corpus / "ws" / "manifest.json").exists()
    report = json.loads(second.stdout)
    # the sample is unchanged (not read again); the damaged PDF failed before, so it is read again
    assert report["files"] == 1 and report["docs_skipped"] == 1 and report["docs_new"] == 0
    assert report["sources_unchanged"] == 2  # the sample, unread, and the PDF, read and the same
    assert {e["file_path"] for e in report["errors"]} == {str(corpus / "scan.pdf"), str(corpus / "photo.png")}
    assert "Traceback" not in second.stderr


def test_console_is_short_and_shows_progress_of_each_long_stage(sample_runs):
    _, first, _ = sample_runs
    lines = [line for line in (first.stderr + first.stdout).splitlines() if ACTOR_ARGS_NOTE not in line]
    notes = [line for line in first.stderr.splitlines() if ACTOR_ARGS_NOTE in line]
    assert all("class name: 'MapWorker(" in line for line in notes), notes  # Ray Data's actors, none of ours
    assert len(lines) <= 25, "\n".join(lines)
    assert not [line for line in lines if any(noise in line for noise in RAY_NOISE)], "\n".join(lines)
    stderr = [line for line in first.stderr.splitlines() if ACTOR_ARGS_NOTE not in line]
    assert stderr[0] == "[lightrag-ray] reading 2 files (1 skipped: unsupported type)"
    summary = first.stdout.splitlines()
    assert summary[0] == "documents: 1 new, 0 already indexed, 1 failed (2 files read)"  # the damaged PDF
    count = int(re.match(r"chunks: (\d+) \(0 from cache, \1 extracted, 0 failed; 0 LLM requests", summary[1]).group(1))
    assert re.match(r"graph: \d{3,} entities, \d{3,} relations, version 1; \d+ vectors stored in [\d.]+ s", summary[2])
    chunks = [line for line in stderr if "embedding chunks:" in line]  # counts while the model loads, then done
    assert f"embedding chunks: {count}/{count} chunks (" in chunks[-1] and ", done in " in chunks[-1]
    assert all("/s, ETA " in line for line in chunks[:-1])
    assert any(line.startswith("[lightrag-ray] extracting: ") and ", done in " in line for line in stderr)
    graph = [line for line in stderr if "embedding entities and relations:" in line]
    assert "/s, done in " in graph[-1] and all("/s, ETA " in line for line in graph[:-1])


# ---- issue 45: `query` reranks with the configured reranker, --no-enable-rerank turns it off; --lexical-weight --

def test_query_reranks_the_passages_unless_told_not_to_and_weighs_bm25_as_asked(sample_runs, ray_cluster, reranker, monkeypatch, capsys):
    """In this process (on the session's cluster), to spare two interpreter and model starts."""
    from lightrag_ray.cli.main import main

    corpus, _, _ = sample_runs
    for name, value in {"BACKEND": "http", "BASE_URL": reranker.url, "MODEL": "scripted-rerank"}.items():
        monkeypatch.setenv(f"LIGHTRAG_RAY__RERANK__{name}", value)
    question = "What does Scrooge see of his own grave?"
    outputs = []
    for flags in ((), ("--no-enable-rerank",), ("--no-enable-rerank", "--mode", "naive"),
                  ("--no-enable-rerank", "--mode", "naive", "--lexical-weight", "0")):
        assert main(["query", question, "--workspace", str(corpus / "ws"), "--context-only", "--json", *flags]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    ranked, kept, fused, dense = outputs
    assert fused["retrieval"]["lexical"] == "vectors and BM25 fused (weight 1)"
    assert dense["retrieval"]["lexical"] == "vectors only" and kept["retrieval"]["lexical"] == "vectors only"  # walk
    assert reranker.requests == 1 and reranker.bodies[0]["model"] == "scripted-rerank"
    retrieved = reranker.bodies[0]["documents"]  # the passages in their retrieval order
    assert ranked["retrieval"]["rerank"] == "reranked by scripted-rerank" and kept["retrieval"]["rerank"] == "off"
    texts = [chunk["text"] for chunk in ranked["chunks"]]
    assert texts == sorted(retrieved, key=lambda text: -score(question, text))[: len(texts)] != retrieved[: len(texts)]
    assert [chunk["text"] for chunk in kept["chunks"]] == retrieved[: len(kept["chunks"])]


def test_stage_progress_reports_at_a_bounded_rate():
    """Item 4: a long stage shows counts, rate and ETA, but never floods the console."""
    lines: list[str] = []
    progress = StageProgress(lines.append, "embedding chunks", 22934, "chunks", interval_s=0.05)
    for _ in range(300):
        progress.advance(64)
    time.sleep(0.06)
    progress.advance(64)
    progress.advance(22934 - 301 * 64)
    assert 2 <= len(lines) <= 4
    assert lines[-2].startswith("embedding chunks: 19264/22934 chunks (") and "/s, ETA " in lines[-2]
    assert lines[-1].startswith("embedding chunks: 22934/22934 chunks (") and ", done in " in lines[-1]


def test_input_listing_skips_the_workspace_and_lists_other_types(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("a")
    (tmp_path / "docs" / "b.PNG").write_text("b")  # a type no converter reads
    (tmp_path / "docs" / "ws" / "docs").mkdir(parents=True)
    (tmp_path / "docs" / "ws" / "manifest.json").write_text("{}")
    found = list_input_files([str(tmp_path / "docs")], exclude=str(tmp_path / "docs" / "ws"))
    assert found.files == [str(tmp_path / "docs" / "a.txt")]
    assert [e["file_path"] for e in found.errors] == [str(tmp_path / "docs" / "b.PNG")]
    # asked for explicitly, a folder inside the workspace is read (the server's inbox)
    inside = list_input_files([str(tmp_path / "docs" / "ws")], exclude=str(tmp_path / "docs" / "ws"))
    assert inside.files == [str(tmp_path / "docs" / "ws" / "manifest.json")]


# ---- item 8: Ctrl-C and SIGTERM stop with one line -------------------------------------

@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_index_stops_with_one_line(ray_cluster, llm, tmp_path, signum):
    (tmp_path / "a.txt").write_text(DOC_A * 20)
    llm.latency_s = 0.5
    driver = subprocess.Popen(
        [*CLI, "index", str(tmp_path / "a.txt"), "--workspace", str(tmp_path / "ws"), "--llm-base-url", llm.url,
         "--chunk-tokens", "32", "--overlap-tokens", "0", "--llm-concurrency", "1", "--extraction-actors", "1",
         "--ray-address", _address(ray_cluster)],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    while not llm.requests and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.2)
    assert driver.poll() is None, driver.stderr.read()
    driver.send_signal(signum)
    _, stderr = driver.communicate(timeout=60)
    assert driver.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "interrupted: stopped; run the same command again to continue where it stopped"
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr


INTERRUPTED_BATCH = """
import asyncio, gc, signal, sys
from lightrag_ray.cli.main import _interrupt
from lightrag_ray.config import LLMConfig
from lightrag_ray.models.llm_clients import BatchCaller

signal.signal(signal.SIGTERM, _interrupt)  # as the CLI's main() sets it
caller = BatchCaller(LLMConfig(backend="openai", base_url="http://127.0.0.1:9/v1", model="m"))

async def work(row):
    if row == 1:  # the signal arrives while a task runs, not while the loop waits
        signal.raise_signal(getattr(signal, sys.argv[1]))
    await asyncio.sleep(0.2)
    return row

try:
    caller.each(work, [0, 1, 2])
except KeyboardInterrupt:
    print("interrupted")
del caller
gc.collect()
"""


@pytest.mark.integration  # a subprocess: signals go to its main thread
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_inside_a_batch_task_leaves_no_traceback(signum):
    """Issue 29: Ctrl-C landing inside a running task of an LLM batch (not in the loop's wait)
    was kept by that task, which printed its traceback when collected: the CLI's output then
    ended in a bare ``KeyboardInterrupt`` line after its one-line message."""
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_BATCH, signum], env=ENV, capture_output=True, text=True,
                          timeout=60, preexec_fn=default_sigint)
    assert (done.stdout, done.stderr) == ("interrupted\n", "")


def _processes_with(marker: str) -> list[str]:
    """Command lines of the processes whose environment holds ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "environ").read_bytes():
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip())
        except OSError:  # gone, or not ours to read
            continue
    return found


@pytest.mark.integration
def test_killed_driver_leaves_no_ray_processes(llm, tmp_path):
    """Item 8: after SIGKILL of a driver that started its own local cluster, that cluster's
    processes (GCS, raylet, agents, actors; all inherit the driver's environment) exit too."""
    marker = uuid.uuid4().hex
    # Distinct lines: repeated text makes repeated chunks, extracted once, and the run ended
    # moments after its actors were up (CI killed a driver already shutting its cluster down).
    (tmp_path / "a.txt").write_text("\n".join(f"Note {i}: Alice Smith visited harbour {i} on day {i * 7}." for i in range(200)))
    llm.latency_s = 0.5
    driver = subprocess.Popen(
        [*CLI, "index", str(tmp_path / "a.txt"), "--workspace", str(tmp_path / "ws"), "--llm-base-url", llm.url,
         "--chunk-tokens", "32", "--overlap-tokens", "0", "--llm-concurrency", "1", "--extraction-actors", "1"],
        env={**ENV, "LIGHTRAG_KILL_TEST": marker}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    actors = {"ray::GraphShard", "ray::EmbedWorker"}

    def started(running: list[str]) -> bool:  # extracting, with the cluster and the run's actors up
        return (bool(llm.requests) and any("gcs_server" in c for c in running) and any("raylet" in c for c in running)
                and actors <= {c.split(".")[0] for c in running if c.startswith("ray::")})

    deadline = time.monotonic() + 240
    running = _processes_with(marker)
    while not started(running) and time.monotonic() < deadline and driver.poll() is None:
        time.sleep(0.2)
        running = _processes_with(marker)
    assert driver.poll() is None, driver.stderr.read()
    assert started(running), running
    driver.kill()
    driver.wait()
    deadline = time.monotonic() + 90  # workers still starting when the raylet died take ~30 s to notice
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(1)
    assert _processes_with(marker) == []


# ---- item 7: a public bind without a key is warned about --------------------------------

@contextlib.contextmanager
def _serve_cli(ray_cluster, tmp_path: Path, *flags: str) -> Iterator[tuple[int, subprocess.Popen, Path]]:
    """``lightrag-ray serve`` (fast extraction, no API key) in a subprocess on a free port, once
    /health answers: yields the port, the process and its log; then stops it with Ctrl-C."""
    from ray import serve

    port = free_port()
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [*CLI, "serve", "--host", "0.0.0.0", "--port", str(port), "--workspace", str(tmp_path / "ws"),
             "--extraction-mode", "fast", "--ray-address", _address(ray_cluster), *flags],
            env={k: v for k, v in ENV.items() if k != "LIGHTRAG_RAY_API_KEY"}, stdout=log, stderr=subprocess.STDOUT,
            preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 240
        while "serving on" not in log_path.read_text() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(1)
        assert process.poll() is None, log_path.read_text()
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(1)
        yield port, process, log_path
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        serve.shutdown()


def test_public_serve_without_key_warns_and_stops_cleanly(ray_cluster, tmp_path):
    with _serve_cli(ray_cluster, tmp_path) as (port, process, log_path):
        pass
    lines = log_path.read_text().splitlines()
    assert lines[0] == (f"warning: listening on 0.0.0.0 without an API key: anyone who can reach port {port} can "
                        "read and change this workspace. Pass --api-key or set LIGHTRAG_RAY_API_KEY.")
    # nothing else: no "(raylet) Task ServeController.graceful_shutdown failed" line (issue 29)
    assert lines[1:] == [f"serving on http://0.0.0.0:{port} (docs at /docs); Ctrl-C stops", "stopping the server"]
    assert process.returncode == 0
    from ray import serve

    assert "lightrag" not in serve.status().applications  # the app is gone from the shared cluster



def test_serve_cli_serves_the_webui_folder_and_scans_the_input_dir(ray_cluster, tmp_path):
    """``serve --webui PATH --input-dir DIR`` end to end: the WebUI's page at / and /webui/, and
    POST /documents/scan indexing the folder given."""
    webui = tmp_path / "webui"
    webui.mkdir()
    (webui / "index.html").write_text("<html><head><title>WebUI</title></head><body>built WebUI</body></html>")
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "acme.txt").write_text(DOC_A)
    with _serve_cli(ray_cluster, tmp_path, "--webui", str(webui), "--input-dir", str(inputs)) as (port, _, log_path):
        base = f"http://127.0.0.1:{port}"
        page = httpx.get(f"{base}/", follow_redirects=True, timeout=30)
        assert page.status_code == 200 and "built WebUI" in page.text and str(page.url).endswith("/webui/")
        started = httpx.post(f"{base}/documents/scan", timeout=60).json()
        assert started["status"] == "scanning_started", started
        deadline = time.monotonic() + 180
        processed: list[str] = []
        while "acme.txt" not in processed and time.monotonic() < deadline:
            time.sleep(1)
            rows = httpx.get(f"{base}/documents", timeout=30).json()["statuses"].get("processed", [])
            processed = [row["file_path"] for row in rows]
        assert processed == ["acme.txt"], log_path.read_text()[-2000:]
    assert f"WebUI at http://0.0.0.0:{port}/webui/" in log_path.read_text()


def test_serve_cli_serves_a_workspaces_root_under_its_caps(ray_cluster, tmp_path):
    """``serve --workspaces-root DIR --max-open-workspaces 1 --max-open-memory-mb MB`` end to end:
    two workspaces made by their first inserts, one left open, each holding its own document."""
    root = tmp_path / "root"
    flags = ("--workspaces-root", str(root), "--max-open-workspaces", "1", "--max-open-memory-mb", "4000")
    with _serve_cli(ray_cluster, tmp_path, *flags) as (port, _, log_path):
        base = f"http://127.0.0.1:{port}"
        texts = {"x": DOC_A, "y": "Dora Quinn sails from Lisbon. Dora Quinn studies whales near Lisbon."}
        for name, text in texts.items():
            job = httpx.post(f"{base}/w/{name}/documents/text", json={"text": text}, timeout=60).json()
            deadline = time.monotonic() + 180
            while (status := httpx.get(f"{base}/w/{name}/documents/track_status/{job['track_id']}", timeout=30)
                   .json()["job_status"]) in ("pending", "processing") and time.monotonic() < deadline:
                time.sleep(1)
            assert status == "processed", log_path.read_text()[-2000:]
        listed = {w["name"]: w for w in httpx.get(f"{base}/workspaces", timeout=30).json()["workspaces"]}
        assert set(listed) == {"default", "x", "y"} and [n for n, w in listed.items() if w["open"]] == ["y"]
        assert listed["x"]["documents"] == {"processed": 1} == listed["y"]["documents"]
        labels = httpx.get(f"{base}/graph/label/list", headers={"LIGHTRAG-WORKSPACE": "x"}, timeout=60).json()
        assert "Dora Quinn" not in labels and "Ebenezer Scrooge" in labels, labels
    assert sorted(p.name for p in root.iterdir()) == ["default", "x", "y"]
