"""scripts/bench_corpus.py: its corpus generator, the hash-embedding server it indexes with
(through the real ``openai`` embedding backend), its stage parser, and the script end to end
at a tiny size (a subprocess with its own Ray cluster)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from lightrag_ray.config import EmbeddingConfig
from lightrag_ray.core.chunking import chunk_text
from lightrag_ray.models.embedding import make_embedder
from tests.bench_helpers import script_env
from tests.hash_embeddings import HashEmbeddings, hash_vectors

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_corpus  # noqa: E402
import bench_kit  # noqa: E402


def _texts(corpus: bench_corpus.Corpus) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(corpus.folder.glob("*.txt"))}


def test_corpus_is_deterministic_and_cut_to_the_target_chunk_count(shared_data, tmp_path):
    first = bench_corpus.generate_corpus(tmp_path / "a", 40, 7, 200, 50, "cl100k_base")
    again = bench_corpus.generate_corpus(tmp_path / "b", 40, 7, 200, 50, "cl100k_base")
    other = bench_corpus.generate_corpus(tmp_path / "c", 40, 8, 200, 50, "cl100k_base")
    texts = _texts(first)
    assert texts == _texts(again) and texts != _texts(other)
    assert (first.chunks, first.documents) == (40, len(texts)) and not first.cached
    # the count the index will find: what core.chunking cuts from these files
    cut = [chunk_text(name, text, chunk_tokens=200, overlap_tokens=50) for name, text in texts.items()]
    assert sum(len(rows) for rows in cut) == 40
    assert len(set(texts.values())) == len(texts)  # no two documents share a doc id
    sentences = [len(bench_corpus.split_sentences(t)) for t in texts.values()]
    assert all(30 <= n <= 50 for n in sentences[:-1]), sentences  # only the last one may be cut short
    cached = bench_corpus.generate_corpus(tmp_path / "a", 40, 7, 200, 50, "cl100k_base")
    assert cached.cached and _texts(cached) == texts
    assert bench_corpus.chunk_count(200, 200, 50) == 1 and bench_corpus.chunk_count(201, 200, 50) == 2
    assert bench_corpus.chunk_count(351, 200, 50) == 3


def test_hash_embeddings_serve_the_openai_backend_unit_vectors_in_input_order():
    texts = ["Ebenezer Scrooge counted coins.", "Bob Cratchit copied letters.", "Ebenezer Scrooge counted coins.",
             "Tiny Tim", "...", "Jacob Marley"]
    with HashEmbeddings(dim=64) as server:
        # batch_size 4: two requests, the second holding the rest
        embedder = make_embedder(EmbeddingConfig(backend="openai", base_url=server.url, model="hash-64", batch_size=4))
        assert embedder.dim == 64  # from the dimension probe
        vectors = embedder.embed(texts)
        assert vectors.shape == (6, 64) and vectors.dtype == np.float32
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)  # "..." has no words: still a unit vector
        assert np.allclose(vectors, hash_vectors(texts, 64), atol=1e-6)  # row i is text i's vector
        assert np.allclose(vectors[0], vectors[2]) and not np.allclose(vectors[0], vectors[1])
        assert float(vectors[0] @ vectors[1]) < float(vectors[0] @ hash_vectors(["Scrooge counted"], 64)[0])
        assert server.counts()["requests"] == 3 and server.counts()["texts"] == 7

        body = httpx.post(f"{server.url}/embeddings", json={"model": "m", "input": texts}).json()
        assert [item["index"] for item in body["data"]] == list(range(6)) and body["model"] == "m"
        single = httpx.post(f"{server.url}/embeddings", json={"input": "Tiny Tim", "dimensions": 8}).json()
        assert len(single["data"]) == 1 and len(single["data"][0]["embedding"]) == 8
        assert httpx.post(f"{server.url}/embeddings", json={"input": [1, 2]}).status_code == 400
        assert httpx.get(f"{server.url}/models").json()["data"][0]["id"] == "hash-64"


def test_stages_come_from_the_progress_lines_even_unknown_and_overlapping_ones():
    lines = [(2.0, "reading 12 files"), (3.0, "12 documents to index, 40 chunks"),
             (3.1, "extracting 40 chunks (0 from cache)"),
             (13.5, "embedding chunks: 20/40 chunks (2/s, ETA 10s)"),  # beside the extraction
             (20.2, "extracting: 40/40 chunks (2/s, done in 17s)"),
             (20.3, "reticulating splines over 3 shards"),  # a stage this parser has never seen
             (24.0, "embedding chunks: 40/40 chunks (2/s, done in 21s)"),  # still running: not next
             (26.0, "summarising 4 long descriptions"),
             (91.0, "embedding entities and relations: 700/700 texts (11/s, done in 1m05s)"),
             (92.0, "linked name variants: 3 alias links (0.5 s)")]
    stages = {s["stage"]: s for s in bench_corpus.stage_intervals(lines, exit_s=95.0)}
    assert list(stages) == ["start-up", "reading + chunking", "embedding chunks", "extracting",
                            "reticulating splines over", "summarising", "embedding entities and relations",
                            "(unreported, after embedding entities and relations)", "linked name variants",
                            "finishing"]
    span = {name: (s["start_s"], s["end_s"]) for name, s in stages.items()}
    assert span["start-up"] == (0.0, 2.0) and span["reading + chunking"] == (2.0, 3.0)
    assert span["extracting"] == (3.1, 20.2)  # its header line starts it
    assert span["embedding chunks"] == (3.0, 24.0)  # done in 21s: began with the extraction
    assert span["reticulating splines over"] == (20.3, 26.0)  # until the next stage that started after it
    assert span["summarising"] == (26.0, 26.0)  # the entity embedding began 65 s before 91.0
    assert span["embedding entities and relations"] == (26.0, 91.0)
    assert span["linked name variants"] == (91.5, 92.0) and span["finishing"] == (92.0, 95.0)
    assert span["(unreported, after embedding entities and relations)"] == (91.0, 91.5)  # no stage covers it
    assert stages["extracting"]["items"] == 40 and stages["embedding entities and relations"]["unit"] == "texts"
    rows, source = bench_corpus.stage_rows({"chunks": 40, "stage_seconds": {"extract": 8.0}}, lines, 95.0)
    assert source == "report stage_seconds" and rows == [{"stage": "extract", "seconds": 8.0, "chunks_per_s": 5.0}]


def test_worker_roles_come_from_actor_classes_and_titles():
    assert bench_corpus.worker_role("graph-1a2b-0000-of-0002:GraphShard.apply") == "shards"
    assert bench_corpus.worker_role("MapWorker(MapBatches(FastExtractChunks))") == "extraction"
    assert bench_corpus.worker_role("ReadBinary->FlatMap(parse)") == "extraction"
    assert bench_corpus.worker_role("EmbedWorker.embed") == "embedding"
    assert bench_corpus.worker_role("VectorStoreActor.upsert") == "vector writer"
    assert bench_corpus.worker_role("IDLE") is None
    assert bench_corpus.worker_role("_AutoscalingCoordinatorActor.request_resources") == "extraction"  # Ray Data's
    venv = "/venv/lib/python3.11/site-packages/ray"
    assert bench_kit.is_starting_worker(f"/venv/bin/python -u {venv}/_private/workers/default_worker.py --node-ip-address=x")
    assert bench_kit.is_starting_worker(f"/venv/bin/python {venv}/_private/workers/setup_worker.py "
                                           f"{venv}/_private/workers/default_worker.py --node-ip-address=x")
    raylet = f"{venv}/core/src/ray/raylet/raylet --python_worker_command=python {venv}/_private/workers/default_worker.py"
    assert not bench_kit.is_starting_worker(raylet)


@pytest.mark.integration  # runs the script in a subprocess with its own Ray cluster
@pytest.mark.timeout(480)
def test_bench_corpus_indexes_1k_chunks_and_reports_stages_and_processes(tmp_path):
    out, png = tmp_path / "rows.json", tmp_path / "corpus.png"
    command = [sys.executable, str(ROOT / "scripts" / "bench_corpus.py"), "--chunks", "1000", "--chunk-tokens", "200",
               "--store", "lite", "--workdir", str(tmp_path / "work"), "--json-out", str(out), "--plot", str(png)]
    done = subprocess.run(command, cwd=tmp_path, env=script_env(), capture_output=True, text=True, timeout=470)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| role | processes | peak RSS MiB (largest) |" in done.stdout and "| stage | from s |" in done.stdout
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["machine"]["nproc"] >= 1 and result["machine"]["ray"] and result["machine"]["git_commit"]
    [row] = result["rows"]
    run = row["runs"]["one run"]
    report = run["report"]
    assert abs(report["chunks"] - 1000) <= 3 and row["corpus"]["chunks"] == 1000  # the CI smoke of issue 27: 1k chunks
    assert report["entities"] > 0 and report["relations"] > 0 and report["vectors_upserted"] > report["chunks"]
    roles = run["roles"]
    assert roles["driver"]["peak_rss_mib"] > 50 and roles["driver"]["cpu_s"] > 0.5
    for role in ("shards", "embedding", "vector writer", "ray daemons"):
        assert roles[role]["processes"] >= 1 and roles[role]["peak_rss_mib"] > 0, (role, roles)
    assert roles["shards"]["processes"] == 2  # the default shard count
    assert 0 < run["totals"]["driver_cpu_share"] < 1 and run["totals"]["total_cpu_s"] > roles["driver"]["cpu_s"]
    assert abs(sum(r["cpu_share"] for k, r in roles.items() if k != bench_corpus.BENCH) - 1) < 0.01
    # the stages are the run's own steps (its report's stage_seconds), in order, each with chunks/s
    assert run["stages_source"] == "report stage_seconds"
    stages = {s["stage"]: s for s in run["stages"]}
    assert list(stages) == list(report["stage_seconds"]), list(stages)
    assert {"read and chunk", "embed chunks, extract and merge", "embed graph", "commit graph"} <= set(stages)
    assert all(s["seconds"] >= 0 for s in run["stages"])
    assert sum(s["seconds"] for s in run["stages"]) <= run["wall_s"]
    assert png.stat().st_size > 10_000
    # --plot-from redraws the plot from --json-out files, one series each, without a run
    again = tmp_path / "compared.png"
    redraw = subprocess.run([*command[:2], "--plot-from", f"before={out}", f"after={out}", "--plot", str(again)],
                            cwd=tmp_path, env=script_env(), capture_output=True, text=True, timeout=120)
    assert redraw.returncode == 0 and f"plot: {again}" in redraw.stdout, redraw.stderr[-2000:]
    assert again.stat().st_size > 10_000
