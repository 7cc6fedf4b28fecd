"""Query benchmark: context-only retrieval latency per mode and LLM traffic per query, lightrag-ray
vs lightrag-hku (method and figures: docs/benchmarks.md, "Query latency vs lightrag-hku").

Both systems query the same index (built by scripts/bench_index.py in ``--workdir``, reused by a
later run) with the same embedder and the scripted LLM at zero latency, each in its own child
process; per mode one warm-up question, then every question timed once. Prints the latency /
LLM-calls table and issue 5's targets, a PNG and ``--json-out``.

    bash scripts/install_peer.sh     # once, for --peer
    .venv/bin/python scripts/bench_query.py --peer --workdir /tmp/bench_query_work
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from itertools import combinations, zip_longest
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

# bench_index's top level is stdlib only, so the peer venv's child can import this module too
from bench_index import (  # noqa: E402
    CORPORA,
    DATA,
    PEER_DRIVER,
    PEER_VENV,
    load_corpus,
    ray_settings,
    run_child,
    sim_get,
)
from bench_kit import child_env, command_line, pyplot, save_plot, stop_ray, write_json  # noqa: E402

MODES = ("naive", "local", "global", "hybrid", "mix")
SYSTEMS = ("lightrag-ray", "lightrag-hku")
ENCODING = "cl100k_base"
QUESTION_FILES = {
    "medical": DATA / "graphrag_bench_medical" / "medical_questions.json",
    "hotpotqa": DATA / "hotpotqa" / "hotpotqa_train.json",
}
# lightrag-hku 1.5.7 on this machine, Christmas Carol, keyword LLM at 0 s (issue 5)
HKU_BASELINE_P50_MS = {"local": 106, "global": 98, "hybrid": 111, "mix": 113, "naive": 32}
TARGET_RATIO = {"naive": 1.0, "local": 1 / 3, "global": 1 / 3, "hybrid": 1 / 3, "mix": 1 / 3}

Ask = Callable[[str, str], Awaitable[str]]  # (mode, question) -> context text (or the answer)


# ---- questions --------------------------------------------------------------------------
def generated_questions(text: str, n: int) -> list[str]:
    """``n`` questions about the most frequent names of ``text`` (see the module docstring)."""
    from tests.scripted_llm import capitalised_phrases, split_sentences

    names: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    for sentence in split_sentences(text):
        head = sentence.lstrip("\"'“‘_([ ")
        found = sorted({p for p in capitalised_phrases(sentence) if not head.startswith(p)})  # not "Oh", "Come"
        names.update(found)
        pairs.update(combinations(found, 2))
    couples = [f"What is the relationship between {a} and {b}?" for (a, b), _ in pairs.most_common()]
    singles = [f"Who or what is {name}?" for name, _ in names.most_common()]
    mixed = [q for both in zip_longest(couples, singles) for q in both if q]
    if not mixed:
        raise SystemExit("no capitalised names in the corpus to ask about")
    return [mixed[i % len(mixed)] for i in range(n)]  # a tiny corpus repeats its few questions


def corpus_questions(corpus: str, docs: list[tuple[str, str]], n: int) -> list[str]:
    """``n`` questions: from the corpus's question file, else generated."""
    path = QUESTION_FILES.get(corpus)
    if path is None:
        return generated_questions("\n\n".join(text for _, text in docs), n)
    return [str(q["question"]) for q in json.loads(path.read_text(encoding="utf-8"))][:n]


# ---- measurement (runs in both children) --------------------------------------------------
async def measure(context: Ask, answer: Ask, cfg: dict[str, Any], tokens: Callable[[str], int]) -> dict[str, Any]:
    """Per mode: warm up, time every context-only query, read the simulator's counters; answer a few in full."""
    url, questions = cfg["base_url"], cfg["questions"]
    result: dict[str, Any] = {}
    for mode in cfg["modes"]:
        await context(mode, cfg["warmup"])
        sim_get(url, "/admin/reset", {})
        ms, context_tokens = [], []
        for question in questions:
            started = time.perf_counter()
            text = await context(mode, question)
            ms.append(round((time.perf_counter() - started) * 1000, 2))
            context_tokens.append(tokens(text))
        retrieval = sim_get(url, "/admin/counts")
        sim_get(url, "/admin/reset", {})
        for question in questions[: cfg["answers"]]:
            await answer(mode, question)
        result[mode] = {"ms": ms, "context_tokens": context_tokens, "retrieval_llm": retrieval,
                        "answer_llm": sim_get(url, "/admin/counts")}
    return result


def ray_child(cfg: dict[str, Any]) -> dict[str, Any]:
    """Runs in a child process: query the lightrag-ray workspace cfg["workspace"]."""
    from lightrag_ray.core.tokenizer import count_tokens
    from lightrag_ray.query.engine import QueryParam
    from lightrag_ray.service.session import LocalSession

    settings = ray_settings(cfg)  # its own local Ray cluster, LLM = the simulator
    with LocalSession(settings) as session:
        engine = session.engine

        async def context(mode: str, question: str) -> str:
            found, _, _ = await engine.retrieve(question, QueryParam(mode=mode))
            return found.text

        async def answer(mode: str, question: str) -> str:
            return (await engine.query(question, QueryParam(mode=mode))).answer

        result = asyncio.run(measure(context, answer, cfg, lambda text: count_tokens(text, ENCODING)))
    stop_ray()
    return result


def hku_child(cfg: dict[str, Any]) -> dict[str, Any]:
    """Runs in the peer venv: query lightrag-hku's working dir cfg["working_dir"]."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("peer_driver", cfg["driver"])
    driver = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(driver)  # bench_index.PEER_DRIVER: offline tiktoken, open_rag()
    import tiktoken
    from lightrag import QueryParam

    encoding = tiktoken.get_encoding(ENCODING)

    async def run() -> dict[str, Any]:
        rag = await driver.open_rag(enable_llm_cache=False)

        async def context(mode: str, question: str) -> str:
            param = QueryParam(mode=mode, only_need_context=True, enable_rerank=False)
            return str(await rag.aquery(question, param=param) or "")

        async def answer(mode: str, question: str) -> str:
            return str(await rag.aquery(question, param=QueryParam(mode=mode, enable_rerank=False)))

        try:
            return await measure(context, answer, cfg, lambda text: len(encoding.encode(text, disallowed_special=())))
        finally:
            await rag.finalize_storages()

    return asyncio.run(run())


# ---- simulated LLM that counts prompt tokens ----------------------------------------------
def start_sim() -> Any:
    """The scripted LLM answering at once, whose counts add "prompt_tokens" by kind."""
    from lightrag_ray.core.tokenizer import count_tokens
    from tests.scripted_llm import ScriptedLLM

    class TokenCountingLLM(ScriptedLLM):
        """Counts the tokens of the recorded prompts, by kind, when the counters are read."""

        def snapshot(self) -> dict[str, Any]:
            tokens: dict[str, int] = {}
            for kind, messages in list(self.requests):
                text = "\n".join(str(m.get("content") or "") for m in messages)
                tokens[kind] = tokens.get(kind, 0) + count_tokens(text, ENCODING)
            return {**super().snapshot(), "prompt_tokens": tokens}

    return TokenCountingLLM(latency_s=0.0).start()


# ---- indexes --------------------------------------------------------------------------------
def ensure_indexes(corpus: str, chars: int, systems: list[str], workdir: Path, peer_python: str) -> dict[str, Any]:
    """bench_index's index.json for ``systems`` in ``workdir``: reused if it matches, else indexed now."""
    summary = workdir / "index.json"
    if summary.exists():
        done = json.loads(summary.read_text(encoding="utf-8"))
        ok = {r["system"] for r in done["rows"] if not r.get("error")}
        if done["corpus"] == corpus and done["characters"] == chars and set(systems) <= ok \
                and all((workdir / f"{s}-default").is_dir() for s in systems):
            print(f"[bench] reusing the indexes in {workdir}", file=sys.stderr)
            return done
    command = [sys.executable, str(SCRIPTS / "bench_index.py"), "--corpus", corpus, "--concurrency", "default",
               "--latency", "0", "--no-ideal", "--workdir", str(workdir), "--json-out", str(summary)]
    if "lightrag-hku" in systems:
        command += ["--peer", "--peer-python", peer_python]
    print(f"[bench] indexing {corpus} with {', '.join(systems)} (log: {workdir / 'index.log'}) ...",
          file=sys.stderr, flush=True)
    summary.unlink(missing_ok=True)
    with (workdir / "index.log").open("w") as log:
        run = subprocess.run(command, cwd=workdir, env=child_env(), stdout=log, stderr=subprocess.STDOUT)
    done = json.loads(summary.read_text(encoding="utf-8")) if summary.exists() else {"rows": []}
    if run.returncode != 0 or not done["rows"] or any(r.get("error") for r in done["rows"]):
        tail = (workdir / "index.log").read_text(errors="replace")[-3000:]
        raise SystemExit(f"indexing failed (exit {run.returncode}):\n{tail}")
    return done


# ---- rows, tables, plot -----------------------------------------------------------------------
def percentile(values: list[float], q: int) -> float:
    """The q-th percentile, linearly interpolated (numpy's default)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def summarise(system: str, measured: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per mode from a child's raw timings and the simulator's counters."""
    rows = []
    for mode, m in measured.items():
        n = len(m["ms"])
        retrieval, answered = m["retrieval_llm"], m["answer_llm"]
        answers = max(1, answered["counts"].get("answer", 0))
        rows.append({
            "system": system, "mode": mode, "queries": n, "p50_ms": round(percentile(m["ms"], 50), 1),
            "p95_ms": round(percentile(m["ms"], 95), 1), "mean_ms": round(statistics.fmean(m["ms"]), 1),
            "context_tokens": round(statistics.fmean(m["context_tokens"])),
            "llm_calls_per_query": retrieval["total"] / n,
            "keyword_calls_per_query": retrieval["counts"].get("keywords", 0) / n,
            "keyword_prompt_tokens_per_query": round(retrieval["prompt_tokens"].get("keywords", 0) / n),
            "answered": answered["counts"].get("answer", 0),
            "answered_calls_per_query": {k: v / answers for k, v in answered["counts"].items()},
            "answer_prompt_tokens_per_query": round(answered["prompt_tokens"].get("answer", 0) / answers),
            "ms": m["ms"],
        })
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| system | mode | queries | p50 ms | p95 ms | mean ms | context tokens | LLM calls / query "
             "| keyword prompt tokens / query | LLM calls / answered query | answer prompt tokens |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['system']} | | failed: {r['error'][:120]} | | | | | | | | |")
            continue
        calls = " + ".join(f"{v:g} {k}" for k, v in sorted(r["answered_calls_per_query"].items())) or "-"
        answer_tokens = r["answer_prompt_tokens_per_query"] if r["answered"] else "-"
        lines.append(
            f"| {r['system']} | {r['mode']} | {r['queries']} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} "
            f"| {r['mean_ms']:.1f} | {r['context_tokens']} | {r['llm_calls_per_query']:g} "
            f"| {r['keyword_prompt_tokens_per_query']} | {calls} | {answer_tokens} |")
    return "\n".join(lines)


def targets_table(rows: list[dict[str, Any]]) -> str:
    """Issue 5's targets per mode: p50 ratio to lightrag-hku's, keyword calls per query."""
    by = {(r["system"], r["mode"]): r for r in rows if not r.get("error")}
    lines = ["| mode | lightrag-hku p50 ms | lightrag-ray p50 ms | ray / hku | target ratio | latency target "
             "| keyword calls / query (ray) | calls target | issue baseline hku p50 ms |",
             "|---|---:|---:|---:|---:|---|---:|---|---:|"]
    for mode in MODES:
        ours, peer = by.get(("lightrag-ray", mode)), by.get(("lightrag-hku", mode))
        if ours is None:
            continue
        hku, ratio, latency = "", "", ""
        if peer:
            hku, ratio = f"{peer['p50_ms']:.1f}", f"{ours['p50_ms'] / peer['p50_ms']:.2f}"
            latency = "met" if ours["p50_ms"] <= TARGET_RATIO[mode] * peer["p50_ms"] else "missed"
        want = 0 if mode == "naive" else 1
        calls = "met" if ours["llm_calls_per_query"] == ours["keyword_calls_per_query"] == want else "missed"
        lines.append(f"| {mode} | {hku} | {ours['p50_ms']:.1f} | {ratio} | {'<= 1' if mode == 'naive' else '<= 1/3'} "
                     f"| {latency} | {ours['keyword_calls_per_query']:g} | {want}: {calls} "
                     f"| {HKU_BASELINE_P50_MS[mode]} |")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> bool:
    """Grouped bars: p50 per mode and system, whiskers up to p95."""
    plt = pyplot()
    if plt is None:
        return False
    good = [r for r in rows if not r.get("error")]
    modes = [m for m in MODES if any(r["mode"] == m for r in good)]
    systems = [s for s in SYSTEMS if any(r["system"] == s for r in good)]
    width = 0.8 / max(1, len(systems))
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, system in enumerate(systems):
        mine = {r["mode"]: r for r in good if r["system"] == system}
        xs = [j + (i - (len(systems) - 1) / 2) * width for j, m in enumerate(modes) if m in mine]
        p50 = [mine[m]["p50_ms"] for m in modes if m in mine]
        up = [mine[m]["p95_ms"] - mine[m]["p50_ms"] for m in modes if m in mine]
        ax.bar(xs, p50, width, yerr=[[0] * len(up), up], capsize=3, label=system)
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels(modes)
    ax.set_ylabel("context-only retrieval ms (bar p50, whisker p95)")
    save_plot(fig, ax, path, title, grid_axis="y")
    return True


# ---- main -----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: .venv/bin/python scripts/bench_query.py --peer")
    parser.add_argument("--corpus", default="carol", help="carol (default) | medical | hotpotqa | path to a .txt/.md")
    parser.add_argument("--questions", type=int, default=20, help="measured questions per mode (20)")
    parser.add_argument("--answers", type=int, default=1,
                        help="questions answered in full per mode, to count keyword + generation calls (1; 0: none)")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES, help="query modes (all five)")
    parser.add_argument("--peer", action="store_true", help="also run lightrag-hku from the peer venv")
    parser.add_argument("--peer-python", default=str(PEER_VENV / "bin" / "python"), help="lightrag-hku's python")
    parser.add_argument("--workdir", default=None,
                        help="keeps the indexes (reused by later runs on the same corpus); default: a temp dir, removed")
    parser.add_argument("--json-out", default=None, help="write rows and raw timings as JSON")
    parser.add_argument("--plot", default=None, help="PNG path (default: bench_query_<corpus>.png in the cwd)")
    args = parser.parse_args(argv)
    if args.questions < 1:
        parser.error("--questions must be at least 1")

    docs = load_corpus(args.corpus)
    corpus_label = args.corpus if args.corpus in CORPORA else Path(args.corpus).name
    chars = sum(len(t) for _, t in docs)
    asked = corpus_questions(args.corpus, docs, args.questions + 1)
    questions, warmup = asked[:-1], asked[-1]
    systems = ["lightrag-ray"] + (["lightrag-hku"] if args.peer else [])
    if args.peer and not Path(args.peer_python).exists():
        raise SystemExit(f"no peer venv at {args.peer_python}: run scripts/install_peer.sh first")
    workdir = Path(args.workdir).resolve() if args.workdir else Path(tempfile.mkdtemp(prefix="bench_query_"))
    workdir.mkdir(parents=True, exist_ok=True)

    rows: list[dict[str, Any]] = []
    load = [os.getloadavg()[0]]  # other work on the machine inflates latencies: reported with the table
    try:
        indexed = ensure_indexes(args.corpus, chars, systems, workdir, args.peer_python)
        sim = start_sim()
        try:
            for system in systems:
                run = workdir / f"{system}-default"
                cfg = {"base_url": sim.url, "modes": args.modes, "questions": questions, "warmup": warmup,
                       "answers": args.answers}
                if system == "lightrag-ray":
                    cfg["workspace"] = str(run / "ws")
                    command = [sys.executable, str(Path(__file__).resolve()), "--child-ray", json.dumps(cfg)]
                else:
                    driver = workdir / "peer_driver.py"
                    driver.write_text(PEER_DRIVER, encoding="utf-8")
                    cfg.update({"working_dir": str(run / "rag"), "driver": str(driver),
                                "tiktoken_cache": str(workdir / "tiktoken")})
                    (workdir / "query_cfg.json").write_text(json.dumps(cfg), encoding="utf-8")
                    command = [args.peer_python, str(Path(__file__).resolve()), "--child-hku",
                               "@" + str(workdir / "query_cfg.json")]
                print(f"[bench] querying {system}: {len(questions)} questions x {len(args.modes)} modes ...",
                      file=sys.stderr, flush=True)
                try:
                    measured, _ = run_child(command, workdir / f"query-{system}.log", workdir, child_env())
                except RuntimeError as exc:
                    print(f"[bench] {system} failed: {exc}", file=sys.stderr)
                    rows.append({"system": system, "error": str(exc).splitlines()[0]})
                    continue
                measured.pop("process_s")
                rows.extend(summarise(system, measured))
            load.append(os.getloadavg()[0])
        finally:
            sim.stop()
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    command = command_line("bench_query.py", argv)
    graphs = "; ".join(f"{r['system']} {r['chunks']} chunks / {r['entities']} entities / {r['relations']} relations"
                       for r in indexed["rows"] if r["system"] in systems)
    print(f"corpus {corpus_label}: {len(docs)} documents, {chars} characters; {graphs}")
    print(f"{len(questions)} questions per mode after 1 warm-up; simulated LLM answers at once (keywords 0 s); "
          f"tokens: {ENCODING}; 1-min load average {load[0]:.2f} at start, {load[-1]:.2f} at end")
    print(table(rows))
    if args.peer:
        print()
        print(targets_table(rows))
    print(f"command: {command}")
    png = Path(args.plot or f"bench_query_{corpus_label}.png")
    if plot(rows, png, f"Context-only retrieval, {corpus_label}, {len(questions)} questions"):
        print(f"plot: {png}")
    write_json(args.json_out, {
        "command": command, "corpus": corpus_label, "documents": len(docs), "characters": chars,
        "questions": questions, "warmup": warmup, "encoding": ENCODING, "load_average": load, "index": indexed["rows"],
        "rows": rows})
    return 1 if any(r.get("error") for r in rows) else 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] in ("--child-ray", "--child-hku"):
        arg = sys.argv[2]
        child_cfg = json.loads(Path(arg[1:]).read_text(encoding="utf-8") if arg.startswith("@") else arg)
        child = ray_child if sys.argv[1] == "--child-ray" else hku_child
        print(json.dumps(child(child_cfg)), flush=True)
    else:
        sys.exit(main())
