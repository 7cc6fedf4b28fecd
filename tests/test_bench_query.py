"""scripts/bench_query.py runs end to end at a tiny size (lightrag-ray only, instant simulated LLM)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # each test runs a benchmark script in a subprocess

from tests.bench_helpers import script_env, tiny_corpus

ROOT = Path(__file__).resolve().parents[1]
MODES = ("naive", "local", "global", "hybrid", "mix")


@pytest.mark.timeout(240)
def test_bench_query_reports_latency_and_llm_calls_per_mode(tmp_path):
    corpus = tiny_corpus(tmp_path)
    out = tmp_path / "rows.json"
    env = script_env()
    command = [sys.executable, str(ROOT / "scripts" / "bench_query.py"), "--corpus", str(corpus),
               "--questions", "3", "--answers", "1", "--workdir", str(tmp_path / "work"),
               "--json-out", str(out), "--plot", str(tmp_path / "latency.png")]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=230)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| system | mode | queries | p50 ms | p95 ms |" in done.stdout
    assert "lightrag-hku" not in done.stdout  # no --peer
    for mode in MODES:
        assert re.search(rf"^\| lightrag-ray \| {mode} \| 3 \| [0-9.]+ \| [0-9.]+ \|", done.stdout, re.MULTILINE), \
            done.stdout
    result = json.loads(out.read_text(encoding="utf-8"))
    rows = {r["mode"]: r for r in result["rows"]}
    assert list(rows) == list(MODES) and {r["system"] for r in result["rows"]} == {"lightrag-ray"}
    assert len(result["questions"]) == 3 and result["warmup"]
    for mode, row in rows.items():
        graph = mode != "naive"
        assert len(row["ms"]) == 3 and all(ms > 0 for ms in row["ms"])
        assert 0 < row["p50_ms"] <= row["p95_ms"] and row["context_tokens"] > 0
        assert row["llm_calls_per_query"] == row["keyword_calls_per_query"] == (1 if graph else 0)
        assert (row["keyword_prompt_tokens_per_query"] > 0) == graph
        assert row["answered"] == 1  # one full answer: its generation call, plus the keyword call in graph modes
        assert row["answered_calls_per_query"] == ({"keywords": 1, "answer": 1} if graph else {"answer": 1})
        assert row["answer_prompt_tokens_per_query"] > row["keyword_prompt_tokens_per_query"]
    index = {r["system"]: r for r in result["index"]}
    assert index["lightrag-ray"]["entities"] > 0
    assert (tmp_path / "latency.png").stat().st_size > 0
