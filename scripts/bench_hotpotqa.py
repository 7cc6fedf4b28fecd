"""Retrieval quality on HotpotQA: do the gold passages reach the context?

Indexes the passages of ``hotpotqa_train_corpus.json`` (title -> sentences; one document
per title, so a chunk's ``file_path`` ends in ``#Title``) with ``--extraction fast``
(``extraction.mode fast``, no LLM) or ``--extraction llm`` (LLM extraction against the
simulated LLM of ``tests/scripted_llm.py`` at zero latency: the graph an LLM-built index
has, with the simulator's records), asks the questions of ``hotpotqa_train.json`` and, per query mode,
takes the first ``--top`` chunks of the context in rank order. Gold passages are the
distinct titles of a question's ``supporting_facts``. Reported per mode: all-gold@k (share
of questions whose gold passages are ALL among the first k chunks, fast-graphrag's
convention), mean gold recall@k, MRR@k (mean reciprocal rank of the first gold passage)
and the median (p50) retrieve() latency; plus "vector search", plain numpy cosine search of
the question over the passage texts with the same MiniLM embedder.

Published reference (fast-graphrag's multi-hop benchmark, 2WikiMultihopQA, all-gold in
context: vector search 0.42, LightRAG 0.45, fast-graphrag 0.93) is a different dataset
and setup, so it is not directly comparable.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from lightrag_ray.config import load_settings  # noqa: E402
from lightrag_ray.core.tokenizer import count_tokens  # noqa: E402
from lightrag_ray.index.pipeline import index_paths  # noqa: E402
from lightrag_ray.query.engine import QueryParam  # noqa: E402
from lightrag_ray.query.session import LocalSession  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the simulated LLM lives in tests/
from tests.scripted_llm import ScriptedLLM  # noqa: E402

DATA = Path("/work/shared/data/hotpotqa")
MODES = ("naive", "local", "global", "hybrid", "mix", "walk")


def select(corpus: dict[str, list[str]], questions: list[dict[str, Any]], limit: int | None) -> dict[str, str]:
    """Passage title -> text: all, or the gold passages of ``questions`` plus the first distractors."""
    texts = {title: "".join(sentences).strip() for title, sentences in corpus.items()}
    if limit is None:
        return texts
    gold = {t for q in questions for t in gold_titles(q)}
    extra = [t for t in texts if t not in gold][: max(0, limit - len(gold))]
    return {t: texts[t] for t in texts if t in gold or t in extra}


def gold_titles(question: dict[str, Any]) -> set[str]:
    return {title for title, _ in question["supporting_facts"]}  # the distinct supporting titles


def score(ranked: list[str], gold: set[str], top: int) -> tuple[float, float, float]:
    """(all gold in the first ``top``, gold recall@top, reciprocal rank of the first gold
    passage or 0) of one ranked title list."""
    found = gold & set(ranked[:top])
    first = next((rank for rank, title in enumerate(ranked[:top], 1) if title in gold), None)
    return float(found == gold), len(found) / len(gold), 1.0 / first if first else 0.0


def row(name: str, scores: list[tuple[float, float, float]], ms: list[float]) -> dict[str, Any]:
    mean = np.mean(scores, axis=0)
    return {"mode": name, "all_gold": round(float(mean[0]), 3), "recall": round(float(mean[1]), 3),
            "mrr": round(float(mean[2]), 3), "p50_ms": round(float(np.median(ms)), 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workspace", default=str(Path(tempfile.gettempdir()) / "lightrag_ray_bench_hotpotqa"))
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--passages", type=int, default=None, help="default: all 994")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES, help="query modes (all)")
    parser.add_argument("--extraction", choices=("fast", "llm"), default="fast",
                        help="fast: no LLM (default); llm: LLM extraction against the simulated LLM (tests/scripted_llm.py)")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)

    questions = json.loads((DATA / "hotpotqa_train.json").read_text(encoding="utf-8"))[: args.questions]
    corpus = json.loads((DATA / "hotpotqa_train_corpus.json").read_text(encoding="utf-8"))
    passages = select(corpus, questions, args.passages)
    payload = json.dumps({t: [passages[t]] for t in passages}, ensure_ascii=False, sort_keys=True)
    digest = hashlib.sha1(payload.encode()).hexdigest()[:8]
    root = Path(args.workspace) / f"passages-{len(passages)}-{digest}{'' if args.extraction == 'fast' else '-llm'}"
    source = root / "input" / "hotpotqa_corpus.json"  # reruns reuse root/index (incremental: nothing new)
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(payload, encoding="utf-8")
    sim = ScriptedLLM(latency_s=0.0).start() if args.extraction == "llm" else None
    llm = {"backend": "openai", "base_url": sim.url, "model": "sim"} if sim else {"backend": "none"}
    settings = load_settings(overrides={"workspace": str(root / "index"), "llm": llm,
                                        "extraction": {"mode": args.extraction}})
    # Passages over one chunk are handled: one counts as found when any of its chunks is in the first `top`.
    long = sum(count_tokens(text) > settings.chunking.chunk_tokens for text in passages.values())

    ray.init(address=settings.ray.address, namespace=settings.ray.namespace, include_dashboard=False,
             logging_level=logging.WARNING)
    ray.data.DataContext.get_current().enable_progress_bars = False
    started = time.perf_counter()
    report = index_paths([str(source)], settings, progress=None)
    index_s = time.perf_counter() - started
    if sim:
        sim.stop()
    settings = settings.model_copy(update={"llm": settings.llm.model_copy(update={"backend": "none"})})  # context only
    print(f"indexed {len(passages)} passages in {index_s:.1f} s: {report.docs_new} new, {report.docs_skipped} "
          f"reused, {report.entities} entities, {report.relations} relations; {long} passages over one chunk",
          file=sys.stderr)

    budget = 6000 + 8000 + args.top * (settings.chunking.chunk_tokens + 100) + 2000  # never cuts `top` chunks
    rows: list[dict[str, Any]] = []
    with LocalSession(settings) as session:
        titles = list(passages)
        cache = root / "passage_vectors.npy"
        matrix = np.load(cache) if cache.exists() else session.embedder.embed([passages[t] for t in titles])
        np.save(cache, matrix)

        def ranked(mode: str, question: str) -> list[str]:
            """Titles of the first ``top`` results (a multi-chunk passage may appear twice)."""
            if mode == "vector search":  # numpy cosine (vectors are normalised), not Milvus
                order = np.argsort(-(matrix @ session.embedder.embed([question])[0]), kind="stable")
                return [titles[i] for i in order[: args.top]]
            param = QueryParam(mode=mode, chunk_top_k=args.top, max_total_tokens=budget)
            context, _, _ = asyncio.run(session.engine.retrieve(question, param))
            return [c["file_path"].split(f"{source.name}#", 1)[-1] for c in context.chunks[: args.top]]

        started = time.perf_counter()
        for mode in ("vector search", *args.modes):
            scores, ms = [], []
            for q in questions:
                t0 = time.perf_counter()
                found = ranked(mode, q["question"])
                ms.append((time.perf_counter() - t0) * 1000)
                scores.append(score(found, gold_titles(q), args.top))
            rows.append(row(mode, scores, ms))
        query_s = time.perf_counter() - started

    k = args.top
    lines = [f"| mode | all-gold@{k} | mean recall@{k} | MRR@{k} | p50 query ms |", "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['mode']} | {r['all_gold']:.3f} | {r['recall']:.3f} | {r['mrr']:.3f} | {r['p50_ms']:.1f} |" for r in rows]
    command = " ".join(shlex.quote(a) for a in ["python", "scripts/bench_hotpotqa.py", *sys.argv[1:]])
    print("\n".join(lines))
    print(f"\n{len(questions)} questions, {len(passages)} passages, {args.extraction} extraction; index {index_s:.1f} s, "
          f"queries {query_s:.1f} s\ncommand: {command}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({
            "command": command, "questions": len(questions), "passages": len(passages), "top": k,
            "extraction": args.extraction,
            "index_seconds": round(index_s, 1), "query_seconds": round(query_s, 1), "rows": rows,
        }, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
