"""scripts/bench_index.py runs end to end at a tiny size (lightrag-ray only, instant simulated LLM)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_helpers import script_env, tiny_corpus
from tests.scripted_llm import answer_for, classify, classify_system

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from bench_index import stage_profile  # noqa: E402


def test_scripted_llm_classifies_both_systems_prompts():
    from lightrag_ray.core import prompts

    ours = prompts.extraction_messages("Bob Cratchit works for Ebenezer Scrooge.", ["person"], "English")
    assert classify_system(ours) == ("ray", "extract") and classify(ours) == "extract"
    assert classify_system(prompts.gleaning_messages(ours, "x")) == ("ray", "glean")
    # lightrag-hku 1.5.x shapes (lightrag/prompt.py): passage fenced under ---Input Text---
    hku_user = ("---Task---\nExtract entities and relationships\n\n---Input Text---\n```\n"
                "Bob Cratchit works for Ebenezer Scrooge.\n```\n\n---Output---\n")
    hku = [{"role": "system", "content": "---Role---\nYou are a Knowledge Graph Specialist"},
           {"role": "user", "content": hku_user}]
    assert classify_system(hku) == ("hku", "extract") and classify(hku) == "extract"
    text = answer_for("extract", hku, "hku")
    assert "entity<|#|>Bob Cratchit<|#|>" in text and "relation<|#|>Bob Cratchit<|#|>Ebenezer Scrooge<|#|>" in text
    assert text.endswith("<|COMPLETE|>")
    glean = [*hku, {"role": "assistant", "content": text},
             {"role": "user", "content": "---Task---\nBased on the last extraction task, identify missed ones"}]
    assert classify_system(glean) == ("hku", "glean")
    summary = [{"role": "user", "content": "---Role---\n---Task---\nsynthesize\n---Input---\nEntity Name: X\n\n"
                "Description List:\n\n```\n{\"Description\": \"a\"}\n{\"Description\": \"b\"}\n```\n"}]
    assert classify_system(summary) == ("hku", "summary")
    assert answer_for("summary", summary, "hku").startswith("Summary of 2 descriptions")
    keywords = [{"role": "user", "content": "---Role---\nhigh_level_keywords\n---Real Data---\n"
                 "User Query: Who employs Bob Cratchit?\n\n---Output---\nOutput:"}]
    assert classify_system(keywords) == ("hku", "keywords")
    assert json.loads(answer_for("keywords", keywords, "hku"))["low_level_keywords"] == ["Bob Cratchit"]


@pytest.mark.integration  # runs the benchmark script in a subprocess
@pytest.mark.timeout(180)
def test_bench_index_prints_table_with_positive_counts(tmp_path):
    corpus = tiny_corpus(tmp_path)
    out = tmp_path / "rows.json"
    env = script_env()
    command = [sys.executable, str(ROOT / "scripts" / "bench_index.py"), "--corpus", str(corpus),
               "--concurrency", "4", "--latency", "0", "--workdir", str(tmp_path / "work"),
               "--json-out", str(out), "--plot", str(tmp_path / "stages.png")]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=170)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| system | LLM concurrency | chunks / entities / relations |" in done.stdout
    match = re.search(r"^\| lightrag-ray \| 4 \| (\d+) / (\d+) / (\d+) \| (\d+) \((\d+)/(\d+)/(\d+)\) \|",
                      done.stdout, re.MULTILINE)
    assert match, done.stdout
    chunks, entities, relations, total, extract, glean, _ = (int(g) for g in match.groups())
    assert chunks >= 1 and entities > 0 and relations > 0
    assert extract == chunks and glean == chunks and total >= extract + glean
    row = json.loads(out.read_text(encoding="utf-8"))["rows"][0]
    assert row["wall_s"] > 0 and row["peak_rss_mib"] > 0 and row["requests"]["extract"] == chunks
    assert row["ideal_s"] is not None and row["ideal_s"] >= 0
    stages = {name: (start, end) for name, start, end in row["stages"]}  # parsed from the child's progress lines
    assert {"reading", "extracting", "embedding entities and relations"} <= set(stages), row["stages"]
    assert all(0 <= start <= end <= row["wall_s"] + 1 for start, end in stages.values()), row["stages"]
    assert stages["reading"][1] <= stages["extracting"][1] <= stages["embedding entities and relations"][1]
    assert "lightrag-ray at 4, stages (s from the start of indexing): reading 0.0-" in done.stdout
    assert f"plot: {tmp_path / 'stages.png'}" in done.stdout  # one concurrency value: the stage chart
    assert (tmp_path / "stages.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_stage_profile_spans_each_stage_from_the_progress_lines():
    log = "\n".join([
        "[    0.0 s] reading 1 files", "[    0.9 s] 1 documents to index, 42 chunks",
        "[    0.9 s] extracting 42 chunks (0 from cache)", "[    3.9 s] extracting: 42/42 chunks (14/s, done in 3s)",
        "[    4.2 s] summarising 16 long descriptions", "[    5.0 s] some Ray line",
        "[   72.2 s] embedding entities and relations: 1147/1147 texts (61/s, done in 1m7s)"])
    assert stage_profile(log) == [("reading", 0.0, 0.9), ("extracting", 0.9, 3.9), ("summarising", 4.2, 5.0),
                                  ("embedding entities and relations", 5.2, 72.2)]
