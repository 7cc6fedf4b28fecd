"""Corpus-size benchmark: the ``lightrag-ray index`` CLI on synthetic corpora of N chunks, with
per-stage times and per-process memory and CPU (docs/benchmarks.md, "Corpus size").

For each ``--chunks`` size: a seeded corpus of that many chunks (cached in ``--workdir``),
indexed by the CLI as a subprocess joined to one Ray cluster this script starts, with hash
embeddings, vectors in a Milvus server or Milvus Lite; every process sampled by role. With
``--kill-at F`` the run is killed at F of its chunks, resumed, and its graph compared with an
uninterrupted run's.

    PYTHONPATH=. .venv/bin/python scripts/bench_corpus.py --chunks 1000 10000 30000 --store server \
        --workdir /tmp/bench_corpus/work --json-out /tmp/bench_corpus/bench_corpus.json \
        --plot /tmp/bench_corpus/bench_corpus.png
    # resume after a kill: --chunks 10000 --kill-at 0.5
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from bench_kit import (MIB, ROOT, ActorTable, HelpFormatter, Poller, child_env, command_line, cpu_seconds,
                       first_role, is_ray_worker, line_seconds, logger, machine, markdown, offline, pyplot, pythonpath,
                       ray_worker_role, save_plot, stage_name, start_ray, stop_ray, write_json)

offline()
os.environ["PYTHONPATH"] = pythonpath()  # Ray workers start with this environment: they import this checkout

import ray  # noqa: E402

from lightrag_ray.config import ENV_PREFIX, ChunkingConfig, load_settings  # noqa: E402
from lightrag_ray.core.tokenizer import get_encoding  # noqa: E402
from tests.graph_helpers import graph_differences, load_stored  # noqa: E402
from tests.hash_embeddings import HashEmbeddings  # noqa: E402
from tests.milvus_standalone import MilvusStandalone  # noqa: E402
from tests.multinode_scenario import add_worker  # noqa: E402
from tests.scripted_llm import ScriptedLLM, split_sentences  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
CORPUS_VERSION = 1  # part of the cache key: bump when the generator changes
DOC_SENTENCES = (30, 50)  # sentences per document (inclusive)
RUN_SENTENCES = (3, 8)  # consecutive sentences taken from one place of a source
SENTENCE_WORDS = (4, 80)
NAMESPACE = "lightrag_ray"  # the CLI's (settings.ray.namespace)
ROLES = ("driver", "shards", "extraction", "embedding", "vector writer", "milvus server", "ray daemons",
         "other ray workers")
RAY_ROLES = ("shards", "extraction", "embedding", "vector writer", "ray daemons", "other ray workers")
BENCH = "bench process"  # this process: stand-in servers and sampler, outside the run's total
# Role of a Ray worker from its actor class or process title (first match wins).
WORKER_ROLES = (
    ("shards", re.compile(r"GraphShard")),
    ("embedding", re.compile(r"EmbedWorker")),
    ("vector writer", re.compile(r"VectorStoreActor")),
    # Ray Data: the stages' actors and tasks, and its own helper actors
    ("extraction", re.compile(r"MapWorker|Extract|Summar|Read|Map|Filter|Project|Split|Write|Dataset|_StatsActor|"
                              r"ActorLocationTracker|Autoscaling")),
)
GAP_S = 0.2  # uncovered time shorter than this is not a row of its own
STAGE_LABELS = {"reading": "reading + chunking"}  # display names
MARKERS = {"documents to index"}  # lines that end the stage before them and start none
# Stages that run beside the others (a thread of the driver): the time they cover may still hide
# unreported work of the main sequence, which the stage table then shows as such.
BACKGROUND = {"embedding chunks"}
log = logger("bench_corpus")


# ---- corpus ----------------------------------------------------------------------------------
def _markdown_prose(text: str) -> str:
    """The prose of a markdown file: no headings, tables or code fences; list markers dropped."""
    lines = (line.strip() for line in text.splitlines())
    return " ".join(re.sub(r"^(?:[-*+]|\d+\.)\s+", "", line) for line in lines
                    if not line.startswith(("#", "|", "```", "---")))


def sentence_sources(data: Path = DATA) -> list[tuple[str, list[str]]]:
    """(name, sentences in reading order) of every English source; sentences of 4-80 words,
    each kept once (the two copies of the book share most of theirs)."""
    texts: list[tuple[str, list[str]]] = []
    for path in sorted((data / "christmas_carol").glob("*.txt")):
        texts.append((f"christmas_carol/{path.name}", split_sentences(path.read_text(encoding="utf-8"))))
    hotpot = json.loads((data / "hotpotqa" / "hotpotqa_train_corpus.json").read_text(encoding="utf-8"))
    texts.append(("hotpotqa", [s for sentences in hotpot.values() for s in split_sentences("".join(sentences))]))
    medical = json.loads((data / "graphrag_bench_medical" / "medical.json").read_text(encoding="utf-8"))
    texts.append(("medical", [s for record in medical for s in split_sentences(str(record["context"]))]))
    for path in sorted((data / "lightrag_eval_sample" / "sample_documents").glob("*.md")):
        texts.append((f"lightrag_eval_sample/{path.name}",
                      split_sentences(_markdown_prose(path.read_text(encoding="utf-8")))))
    seen: set[str] = set()
    sources = []
    for name, sentences in texts:
        kept = list(dict.fromkeys(s for s in sentences
                                  if s not in seen and SENTENCE_WORDS[0] <= len(s.split()) <= SENTENCE_WORDS[1]))
        seen.update(kept)
        if kept:
            sources.append((name, kept))
    return sources


def chunk_count(tokens: int, chunk_tokens: int, overlap_tokens: int) -> int:
    """Chunks ``core.chunking.chunk_text`` cuts from ``tokens`` tokens of text."""
    if tokens <= 0:
        return 0
    if tokens <= chunk_tokens:
        return 1
    return 1 + math.ceil((tokens - chunk_tokens) / (chunk_tokens - overlap_tokens))


def document_runs(sources: list[list[str]], seed: int, index: int, attempt: int = 0) -> list[list[str]]:
    """Document ``index``: paragraphs of consecutive sentences, 30-50 sentences in all."""
    rng = np.random.default_rng([seed, index, attempt])
    sizes = np.array([len(s) for s in sources], dtype=np.float64)
    wanted = int(rng.integers(DOC_SENTENCES[0], DOC_SENTENCES[1] + 1))
    runs: list[list[str]] = []
    total = 0
    while total < wanted:
        source = sources[int(rng.choice(len(sources), p=sizes / sizes.sum()))]
        start = int(rng.integers(0, len(source)))
        run = source[start : start + min(int(rng.integers(RUN_SENTENCES[0], RUN_SENTENCES[1] + 1)), wanted - total)]
        runs.append(run)
        total += len(run)
    return runs


def _text(runs: list[list[str]], sentences: int | None = None) -> str:
    """The document text: one paragraph per run; only its first ``sentences`` sentences."""
    left = sum(len(r) for r in runs) if sentences is None else sentences
    paragraphs = []
    for run in runs:
        if left <= 0:
            break
        paragraphs.append(" ".join(run[:left]))
        left -= len(run)
    return "\n\n".join(paragraphs)


@dataclass
class Corpus:
    folder: Path
    documents: int
    chunks: int
    tokens: int
    seconds: float
    cached: bool


def generate_corpus(root: Path, target: int, seed: int, chunk_tokens: int, overlap_tokens: int,
                    encoding: str) -> Corpus:
    """Documents under ``root`` whose chunks add up to exactly ``target`` (cached by key)."""
    if overlap_tokens >= chunk_tokens:
        raise SystemExit(f"--overlap-tokens ({overlap_tokens}) must be below --chunk-tokens ({chunk_tokens})")
    key = f"seed{seed}-chunks{target}-tok{chunk_tokens}-ov{overlap_tokens}-{encoding}-v{CORPUS_VERSION}"
    folder = root / key
    manifest = folder / "corpus.json"
    if manifest.exists():
        info = json.loads(manifest.read_text(encoding="utf-8"))
        return Corpus(folder / "docs", info["documents"], info["chunks"], info["tokens"], info["seconds"], True)
    started = time.perf_counter()
    shutil.rmtree(folder, ignore_errors=True)
    building = root / f".{key}.{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    (building / "docs").mkdir(parents=True)
    enc = get_encoding(encoding)
    sources = [sentences for _, sentences in sentence_sources()]
    seen: set[str] = set()
    chunks = tokens = documents = 0
    while chunks < target:
        attempt = 0
        while True:  # a document identical to an earlier one would be skipped by the index (same doc id)
            runs = document_runs(sources, seed, documents, attempt)
            text = _text(runs)
            digest = hashlib.md5(text.encode()).hexdigest()
            if digest not in seen:
                break
            attempt += 1
        count = len(enc.encode_ordinary(text))
        n = chunk_count(count, chunk_tokens, overlap_tokens)
        if chunks + n > target:  # the fewest sentences cut that fits: chunks grow with sentences
            lo, hi = 1, sum(len(r) for r in runs)
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if chunk_count(len(enc.encode_ordinary(_text(runs, mid))), chunk_tokens, overlap_tokens) <= target - chunks:
                    lo = mid
                else:
                    hi = mid - 1
            text = _text(runs, lo)
            digest = hashlib.md5(text.encode()).hexdigest()
            count = len(enc.encode_ordinary(text))
            n = chunk_count(count, chunk_tokens, overlap_tokens)
            if digest in seen:
                documents += 1
                continue
        seen.add(digest)
        (building / "docs" / f"doc-{documents:06d}.txt").write_text(text, encoding="utf-8")
        chunks, tokens, documents = chunks + n, tokens + count, documents + 1
    seconds = round(time.perf_counter() - started, 1)
    (building / "corpus.json").write_text(json.dumps({
        "target_chunks": target, "seed": seed, "chunk_tokens": chunk_tokens, "overlap_tokens": overlap_tokens,
        "encoding": encoding, "documents": len(seen), "chunks": chunks, "tokens": tokens, "seconds": seconds,
        "version": CORPUS_VERSION}, indent=2), encoding="utf-8")
    building.rename(folder)
    return Corpus(folder / "docs", len(seen), chunks, tokens, seconds, False)


# ---- per-process sampling -----------------------------------------------------------------
@dataclass
class ProcStat:
    role: str
    title: str
    base_cpu: float
    last_cpu: float = 0.0
    peak_rss: int = 0
    peak_private: int = 0  # RSS less its shared pages (files, the object store's shared memory)
    titles: set[str] = field(default_factory=set)


worker_role = functools.partial(first_role, roles=WORKER_ROLES)  # (name) -> role or None


def _rank(role: str) -> int:
    """How specific a role is: a process keeps the most specific role it was seen in."""
    return {"other ray workers": 0, "ray daemons": 1}.get(role, 2)


class Sampler(Poller):
    """Polls this process's descendants every ``interval`` s: each process's role, peak RSS
    and CPU-seconds, and per role the largest summed RSS at one moment.

    ``labels``: pid -> role of a process and its descendants (the driver, the Milvus
    server). Every other descendant belongs to the Ray cluster this process started: a
    ``ray::`` process title is a worker (role from the actor table or the title), any other
    process is a Ray daemon, a worker's children share its role."""

    def __init__(self, interval: float, labels: dict[int, str], actors: bool) -> None:
        super().__init__(interval)
        self.labels = dict(labels)
        self.actors = ActorTable(2.0, actors)
        self.procs: dict[int, ProcStat] = {}
        self.ticks: list[list[tuple[int, int]]] = []  # (pid, RSS) of each sample, summed by final role
        self.lock = threading.Lock()  # held by a tick; take it to add a label before its process exists
        self.first: set[int] | None = None
        self.me = psutil.Process()
        self.bench_base = cpu_seconds(self.me)
        self.bench_peak, self.bench_cpu = 0, 0.0

    def stop(self) -> None:
        super().stop()
        self.tick()  # the last values of the processes still alive

    def _processes(self) -> dict[int, tuple[int, str, float, int, int]]:
        """pid -> (parent pid, title, CPU-seconds, RSS, private) of this process's descendants."""
        seen = {}
        for proc in self.me.children(recursive=True):
            try:
                with proc.oneshot():
                    title = " ".join(proc.cmdline()).strip() or proc.name()
                    memory = proc.memory_info()
                    seen[proc.pid] = (proc.ppid(), title, cpu_seconds(proc), memory.rss, memory.rss - memory.shared)
            except psutil.Error:
                continue
        return seen

    def _roles(self, seen: dict[int, tuple[int, str, float, int, int]]) -> dict[int, str]:
        """pid -> role of each process seen (see the class docstring)."""
        actors = self.actors.refresh()
        roles: dict[int, str] = {}

        def role_of(pid: int, depth: int = 0) -> str:
            if pid not in roles:
                ppid, title = seen[pid][:2]
                if pid in self.labels:
                    roles[pid] = self.labels[pid]
                elif ppid in seen and depth < 50 and (self.labels.get(ppid) or
                                                      role_of(ppid, depth + 1) in ("driver", "milvus server")):
                    roles[pid] = role_of(ppid, depth + 1)
                elif is_ray_worker(title):
                    roles[pid] = ray_worker_role(title, actors.get(pid, ""), WORKER_ROLES)
                elif ppid in seen and seen[ppid][1].startswith("ray::"):
                    roles[pid] = role_of(ppid, depth + 1)  # a process a worker started
                else:
                    roles[pid] = "ray daemons"
            return roles[pid]

        return {pid: role_of(pid) for pid in seen}

    def tick(self) -> None:
        with self.lock:
            seen = self._processes()
            for pid, role in self._roles(seen).items():
                _, title, cpu, rss, private = seen[pid]
                stat = self.procs.get(pid)
                if stat is None:
                    base = cpu if self.first is None else 0.0  # started during the run: all its CPU counts
                    stat = self.procs[pid] = ProcStat(role, title, base)
                elif _rank(role) > _rank(stat.role) or role in ("driver", "milvus server"):
                    stat.role = role
                stat.last_cpu, stat.peak_rss, stat.peak_private = cpu, max(stat.peak_rss, rss), max(stat.peak_private, private)
                if len(stat.titles) < 20:
                    stat.titles.add(title[:120])
            self.ticks.append([(pid, sample[3]) for pid, sample in seen.items()])
            self.bench_peak = max(self.bench_peak, self.me.memory_info().rss)
            self.bench_cpu = cpu_seconds(self.me) - self.bench_base
            if self.first is None:
                self.first = set(seen)

    def peak_sums(self) -> tuple[dict[str, int], int]:
        """Per role, the largest RSS its processes added up to in one sample; and that of all
        Ray processes (workers and daemons). Roles are the processes' final ones (an idle pool
        worker that became an actor counts for the actor's role throughout)."""
        peaks: Counter[str] = Counter()
        ray_peak = 0
        for sample in self.ticks:
            sums: Counter[str] = Counter()
            for pid, rss in sample:
                sums[self.procs[pid].role] += rss
            peaks |= sums  # the larger count of each role
            ray_peak = max(ray_peak, sum(sums[role] for role in RAY_ROLES))
        return dict(peaks), ray_peak

    def roles(self, driver_rusage: Any = None) -> dict[str, dict[str, Any]]:
        """Per role: processes, peak RSS MiB (largest process; largest sum at one moment),
        CPU-seconds, and the distinct titles seen. The driver's CPU and peak RSS come from
        ``driver_rusage`` (its wait4 record) when given: exact, where sampling misses the last
        interval."""
        result: dict[str, dict[str, Any]] = {}
        for stat in self.procs.values():
            row = result.setdefault(stat.role, {"processes": 0, "peak_rss_mib": 0.0, "peak_private_mib": 0.0,
                                                "cpu_s": 0.0, "titles": set()})
            row["processes"] += 1
            row["peak_rss_mib"] = max(row["peak_rss_mib"], stat.peak_rss / MIB)
            row["peak_private_mib"] = max(row["peak_private_mib"], stat.peak_private / MIB)
            row["cpu_s"] += max(0.0, stat.last_cpu - stat.base_cpu)
            row["titles"] |= {t.split(" ")[0] for t in stat.titles}
        peaks, _ = self.peak_sums()
        for role, row in result.items():
            row["peak_sum_rss_mib"] = peaks.get(role, 0) / MIB
        if driver_rusage is not None and "driver" in result:
            row = result["driver"]
            row["sampled_cpu_s"] = row["cpu_s"]
            row["cpu_s"] = driver_rusage.ru_utime + driver_rusage.ru_stime
            row["sampled_peak_rss_mib"] = row["peak_rss_mib"]
            row["peak_rss_mib"] = max(row["peak_rss_mib"], driver_rusage.ru_maxrss / 1024)  # KiB on Linux
            row["peak_sum_rss_mib"] = max(row["peak_sum_rss_mib"], row["peak_rss_mib"])
        total = sum(row["cpu_s"] for row in result.values())
        ordered = {role: result[role] for role in ROLES if role in result}
        for row in ordered.values():
            row["cpu_share"] = round(row["cpu_s"] / total if total else 0.0, 4)
            row["titles"] = sorted(row["titles"])[:12]
            for key in ("peak_rss_mib", "peak_sum_rss_mib", "peak_private_mib", "cpu_s", "sampled_cpu_s",
                        "sampled_peak_rss_mib"):
                if key in row:
                    row[key] = round(row[key], 2 if key.endswith("cpu_s") else 1)
        ordered[BENCH] = {"processes": 1, "peak_rss_mib": round(self.bench_peak / MIB, 1),
                          "peak_sum_rss_mib": round(self.bench_peak / MIB, 1), "peak_private_mib": None,
                          "cpu_s": round(self.bench_cpu, 2), "cpu_share": None, "titles": []}
        return ordered


# ---- stages from the progress lines ---------------------------------------------------------
PROGRESS_PREFIX = "[lightrag-ray] "
ITEMS = re.compile(r":\s*(\d+)/(\d+) (\w+)")


def stage_intervals(lines: list[tuple[float, str]], exit_s: float) -> list[dict[str, Any]]:
    """Stages of a run from its progress lines ((seconds since the driver started, text)):
    start, end, seconds, items, sorted by start, with "start-up" before the first line,
    "finishing" after the last stage ends (committing, exiting) and "(unreported, after X)"
    for other time no stage covers. See the module docstring."""
    stages: dict[str, dict[str, Any]] = {}
    for at, text in lines:
        name = stage_name(text)
        stage = stages.setdefault(name, {"name": name, "first": at, "lines": 0})
        stage["lines"] += 1
        stage["last_line"] = text
        seconds = line_seconds(text)
        if seconds is not None:
            stage["done"], stage["done_s"] = at, seconds
        items = ITEMS.search(text)
        if items:
            stage["items"], stage["unit"] = int(items[2]), items[3]
    for stage in stages.values():
        stage["start"] = stage["first"]
        if "done" in stage:
            began = max(0.0, stage["done"] - stage["done_s"])
            # A stage's own duration says when it began, unless it has an earlier line (a
            # header) within a second of that: "done in" durations are whole seconds.
            if stage["first"] == stage["done"] or began < stage["first"] - 1.0:
                stage["start"] = began
    for stage in stages.values():
        if "done" in stage:
            stage["end"] = stage["done"]
            continue
        # the next stage that started after this one (a stage that started clearly before it,
        # e.g. the chunk embedding beside the extraction, is running alongside, not next)
        later = [other["start"] for other in stages.values()
                 if other is not stage and other["first"] > stage["first"] and other["start"] > stage["start"] - 1.0]
        stage["end"] = max(stage["start"], min(later, default=exit_s))
    rows = sorted((s for s in stages.values() if s["name"] not in MARKERS), key=lambda s: (s["start"], s["first"]))
    # Time no stage covers gets a row too: before the first line, between stages (work that
    # prints nothing, e.g. collecting the shards' changes), after the last one.
    covered, gaps, previous = 0.0, [], None
    for stage in (s for s in rows if s["name"] not in BACKGROUND):
        if stage["start"] - covered >= GAP_S:
            gaps.append({"name": "start-up" if previous is None else f"(unreported, after {previous})",
                         "start": covered, "end": stage["start"], "lines": 0,
                         "last_line": "(Python, imports, joining Ray)" if previous is None else "(no progress line)"})
        if stage["end"] >= covered:
            covered, previous = stage["end"], STAGE_LABELS.get(stage["name"], stage["name"])
    if exit_s - covered >= GAP_S or not rows:
        gaps.append({"name": "finishing", "start": covered, "end": exit_s, "lines": 0,
                     "last_line": "(after the last line: commit, documents' status, exit)"})
    rows = sorted(rows + gaps, key=lambda s: (s["start"], s.get("first", s["start"])))
    return [{"stage": STAGE_LABELS.get(s["name"], s["name"]), "start_s": round(s["start"], 2),
             "end_s": round(s["end"], 2), "seconds": round(s["end"] - s["start"], 2), "last_line": s["last_line"],
             "progress": bool(s["lines"]), **{key: s[key] for key in ("items", "unit") if key in s}} for s in rows]


def stage_rows(report: dict[str, Any], lines: list[tuple[float, str]], exit_s: float) -> tuple[list[dict[str, Any]], str]:
    """The run's stages with chunks/s: from the report's ``stage_seconds`` when it has them,
    else from the progress lines; and which source was used."""
    chunks = report.get("chunks") or 0
    if isinstance(report.get("stage_seconds"), dict):
        rows = [{"stage": name, "seconds": round(float(sec), 2)} for name, sec in report["stage_seconds"].items()]
        source = "report stage_seconds"
    else:
        rows, source = stage_intervals(lines, exit_s), "progress lines"
    for row in rows:  # not for the time between stages, nor for a stage of a single line
        row["chunks_per_s"] = (round(chunks / row["seconds"], 1)
                               if row["seconds"] >= 0.1 and row.get("progress", True) else None)
    return rows, source


# ---- one run of the CLI -------------------------------------------------------------------
def extracted_chunks(workspace: Path) -> int:
    """Rows in the workspace's extraction cache (part files are written atomically)."""
    import pyarrow.parquet as pq

    total = 0
    for part in (workspace / "extractions").glob("*.parquet"):
        try:
            total += pq.read_metadata(part).num_rows
        except (OSError, ValueError):
            pass
    return total


def run_index(command: list[str], env: dict[str, str], log_path: Path, interval: float, labels: dict[int, str],
              tag: str, kill_at: int | None = None, workspace: Path | None = None) -> dict[str, Any]:
    """Run the index command with the sampler on; ``kill_at``: SIGKILL it once that many
    chunks are in ``workspace``'s extraction cache. Returns wall time, exit code, report,
    stages, roles (and the kill, if one happened)."""
    sampler = Sampler(interval, labels, ray.is_initialized()).start()
    lines: list[tuple[float, str]] = []
    out: list[str] = []
    killed: dict[str, Any] = {}
    with sampler.lock:
        started = time.perf_counter()
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, bufsize=1)
        sampler.labels[proc.pid] = "driver"
    extracted = {"lines": 0}

    def read_stderr() -> None:
        with log_path.open("w", encoding="utf-8") as sink:
            for raw in proc.stderr:
                at = time.perf_counter() - started
                sink.write(f"[{at:8.2f} s] {raw}")
                sink.flush()
                if raw.startswith(PROGRESS_PREFIX):
                    text = raw[len(PROGRESS_PREFIX):].strip()
                    lines.append((at, text))
                    log(f"{tag}: {text}")
                    done = re.match(r"extracting: (\d+)/", text)
                    if done:
                        extracted["lines"] = int(done[1])

    def watch() -> None:  # --kill-at
        while proc.poll() is None and not killed:
            now = max(extracted["lines"], extracted_chunks(workspace))
            if now >= kill_at:
                os.kill(proc.pid, signal.SIGKILL)
                killed.update({"at_s": round(time.perf_counter() - started, 2), "seen_extracted": now})
                return
            time.sleep(0.1)

    readers = [threading.Thread(target=read_stderr, daemon=True),
               threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)]
    if kill_at is not None:
        readers.append(threading.Thread(target=watch, daemon=True))
    for thread in readers:
        thread.start()
    _, status, usage = os.wait4(proc.pid, 0)  # the driver's exact CPU time and peak RSS
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    for thread in readers[:2]:
        thread.join(timeout=60)
    sampler.stop()
    stdout = "".join(out)
    report: dict[str, Any] = {}
    if "{" in stdout:
        try:
            report = json.loads(stdout[stdout.index("{"):])
        except ValueError:
            pass
    result = {"wall_s": round(wall, 2), "exit_code": proc.returncode, "driver_pid": proc.pid, "report": report,
              "roles": sampler.roles(usage), "ray_peak_sum_rss_mib": round(sampler.peak_sums()[1] / MIB, 1),
              "log": str(log_path), "progress_lines": [[round(at, 2), text] for at, text in lines]}
    if killed:
        result["killed"] = killed
    elif not report:
        tail = log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RuntimeError(f"{tag}: the index command exited with code {proc.returncode} and no report:\n{tail}")
    if report:
        result["stages"], result["stages_source"] = stage_rows(report, lines, wall)
    return result


def summarise_roles(roles: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Run totals: CPU-seconds of the run (every role but this process) and the driver's share."""
    total = sum(row["cpu_s"] for role, row in roles.items() if role != BENCH)
    driver = roles.get("driver", {})
    return {"total_cpu_s": round(total, 2), "driver_cpu_s": driver.get("cpu_s", 0.0),
            "driver_cpu_share": round(driver.get("cpu_s", 0.0) / total, 4) if total else 0.0,
            "driver_peak_rss_mib": driver.get("peak_rss_mib", 0.0),
            "driver_peak_private_mib": driver.get("peak_private_mib", 0.0)}


# ---- cluster, servers, workspaces ------------------------------------------------------------
class RayCluster:
    """The benchmark's Ray cluster, started in this process; ``address`` for the drivers."""

    def __init__(self, nodes: int, cpus: int, temp_dir: Path, object_store_mb: int) -> None:
        self.cluster = None
        self.temp_dir = temp_dir
        store = object_store_mb * MIB
        if nodes <= 1:
            start_ray(cpus, namespace=NAMESPACE, temp_dir=temp_dir, object_store_mb=object_store_mb)
            self.layout = f"1 node, {cpus} CPUs"
        else:
            from ray.cluster_utils import Cluster

            per_worker = max(1, round(cpus / (nodes - 1)))
            self.cluster = Cluster(initialize_head=True, head_node_args={
                "num_cpus": 0, "temp_dir": str(temp_dir), "object_store_memory": store, "include_dashboard": False})
            for _ in range(nodes - 1):
                add_worker(self.cluster, per_worker, object_store_memory=store)
            self.cluster.wait_for_nodes()
            start_ray(address=self.cluster.address, namespace=NAMESPACE)
            self.layout = f"{nodes} nodes: head 0 CPUs, {nodes - 1} workers x {per_worker} CPUs"
        self.address = ray.get_runtime_context().gcs_address

    def shutdown(self) -> None:
        stop_ray()
        if self.cluster is not None:
            self.cluster.shutdown()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def start_milvus(server: MilvusStandalone) -> None:
    """The Milvus server, in an emptied base folder."""
    shutil.rmtree(server.base_dir, ignore_errors=True)
    server.base_dir.mkdir(parents=True)
    server.start()


def index_command(folder: str | Path, workspace: str | Path, args: argparse.Namespace, address: str,
                  llm: ScriptedLLM | None, server: MilvusStandalone | None, *flags: str) -> list[str]:
    """``lightrag-ray index`` of ``folder`` into ``workspace`` on the cluster at ``address``, as the
    corpus benchmarks run it (``args``: --mode and the chunk sizes)."""
    command = [sys.executable, "-m", "lightrag_ray.cli.main", "index", str(folder), "--workspace", str(workspace),
               "--extraction-mode", args.mode, "--json", "--ray-address", address,
               "--chunk-tokens", str(args.chunk_tokens), "--overlap-tokens", str(args.overlap_tokens), *flags]
    if llm is not None:
        command += ["--llm-base-url", llm.url, "--llm-model", "scripted"]
    if server is not None:
        command += ["--milvus-uri", server.uri]
    return command


def job_actors_gone(driver_pid: int, timeout_s: float = 90.0) -> dict[str, Any]:
    """After a driver was killed: wait until its job's actors are dead (Ray kills the actors of
    a dead owner) and their processes gone; kill named leftovers. Returns what was found
    (also how long the wait took)."""
    from ray._private import state

    job = next((j["JobID"] for j in state.jobs() if j.get("DriverPid") == driver_pid), None)
    began = time.monotonic()
    deadline = began + timeout_s
    left: list[dict[str, Any]] = []
    while job is not None:
        # detached actors (Ray Data's _StatsActor, ActorLocationTracker, ...) serve every job: not leftovers
        actors = [a for a in state.actors().values() if a["JobID"] == job and not a.get("IsDetached")]
        left = [a for a in actors if a["State"] != "DEAD"]
        pids = [a["Pid"] for a in actors if a.get("Pid")]
        if not left and not any(psutil.pid_exists(p) and _is_worker(p) for p in pids):
            break
        if time.monotonic() > deadline:
            for actor in left:
                if actor.get("Name"):
                    try:
                        ray.kill(ray.get_actor(actor["Name"], namespace=NAMESPACE), no_restart=True)
                    except (ValueError, ray.exceptions.RayError):
                        pass
            break
        time.sleep(0.5)
    return {"job": job, "actors_left_after_wait": [a["ActorClassName"] for a in left],
            "waited_s": round(time.monotonic() - began, 1)}


def _is_worker(pid: int) -> bool:
    try:
        title = " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False
    return title.startswith("ray::") and "IDLE" not in title


def drop_collections(uri: str, prefix: str) -> None:
    """Drop a run's collections from the Milvus server (its memory is not the next size's)."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri)
    try:
        for name in client.list_collections():
            if name.startswith(prefix + "_"):
                client.drop_collection(name)
    finally:
        client.close()


def machine_info(cluster: RayCluster | None) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    def package(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    return {"machine": machine(), "nproc": os.cpu_count(), "ram_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "load_avg": [round(x, 2) for x in os.getloadavg()], "python": platform.python_version(),
            "ray": ray.__version__, "pymilvus": package("pymilvus"), "milvus": package("milvus"),
            "milvus_lite": package("milvus-lite"), "psutil": psutil.__version__,
            "git_commit": git("rev-parse", "HEAD"), "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "ray_cluster": cluster.layout if cluster else None}


# ---- tables and plot --------------------------------------------------------------------------
def run_line(label: str, run: dict[str, Any], target: int) -> str:
    r = run["report"]
    totals = run["totals"]
    return (f"{label}: {r.get('docs_new')} documents, {r.get('chunks')} chunks (target {target}), "
            f"{r.get('entities')} entities, {r.get('relations')} relations, {r.get('vectors_upserted')} vectors; "
            f"wall {run['wall_s']} s ({run['chunks_per_s']} chunks/s), index report {r.get('seconds')} s; "
            f"extraction ran in: {r.get('stages')}; run CPU {totals['total_cpu_s']} s, driver "
            f"{totals['driver_cpu_s']} s ({100 * totals['driver_cpu_share']:.1f}%)"
            + (f"; exit code {run['exit_code']}" if run["exit_code"] else ""))


def stage_table(run: dict[str, Any]) -> str:
    rows = [[s["stage"], s.get("start_s", ""), s.get("end_s", ""), s["seconds"],
             "" if s["chunks_per_s"] is None else s["chunks_per_s"],
             f"{s['items']} {s['unit']}" if "items" in s else ""] for s in run["stages"]]
    return markdown(["stage", "from s", "to s", "seconds", "chunks/s", "items"], rows)


def role_table(run: dict[str, Any]) -> str:
    rows = []
    for role, r in run["roles"].items():
        share = "" if r["cpu_share"] is None else f"{100 * r['cpu_share']:.1f}%"
        private = "" if r["peak_private_mib"] is None else round(r["peak_private_mib"])
        rows.append([role if role != BENCH else f"({BENCH}: stand-in servers, not in the total)", r["processes"],
                     round(r["peak_rss_mib"]), round(r["peak_sum_rss_mib"]), private, r["cpu_s"], share])
    rows.append(["total (run)", sum(r["processes"] for k, r in run["roles"].items() if k != BENCH), "",
                 f"{round(run['ray_peak_sum_rss_mib'])} (Ray)", "", run["totals"]["total_cpu_s"], "100%"])
    return markdown(["role", "processes", "peak RSS MiB (largest)", "peak RSS MiB (sum)",
                     "peak private MiB (largest)", "CPU s", "CPU share"], rows)


def summary_table(rows: list[dict[str, Any]]) -> str:
    lines = [[row["target_chunks"], label, run["report"].get("chunks"), run["report"].get("stages"), run["wall_s"],
              run["chunks_per_s"], round(run["totals"]["driver_peak_rss_mib"]),
              round(run["totals"]["driver_peak_private_mib"]), round(run["ray_peak_sum_rss_mib"]),
              run["totals"]["driver_cpu_s"], run["totals"]["total_cpu_s"],
              f"{100 * run['totals']['driver_cpu_share']:.1f}%"]
             for row in rows for label, run in row["runs"].items() if run.get("report")]
    return markdown(["target", "run", "chunks", "extraction in", "wall s", "chunks/s", "driver peak RSS MiB",
                     "driver peak private MiB", "Ray peak RSS MiB (sum)", "driver CPU s", "run CPU s",
                     "driver CPU share"], lines)


def one_runs(rows: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    """(chunks, run) of the uninterrupted run of each size, by size."""
    return sorted(((r["runs"]["one run"]["report"]["chunks"], r["runs"]["one run"]) for r in rows
                   if r["runs"].get("one run", {}).get("report")), key=lambda p: p[0])


def plot(series: list[tuple[str, list[dict[str, Any]]]], path: Path, title: str) -> bool:
    """Peak RSS (driver, Ray total) and chunks/s against the chunk count for each labelled
    series of rows (e.g. before and after a change), and the last series' stage seconds, on
    a log x-axis (the uninterrupted run of each size)."""
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    last: list[tuple[int, dict[str, Any]]] = []
    for label, rows in series:
        runs = one_runs(rows)
        if not runs:
            continue
        last, xs, tag = runs, [x for x, _ in runs], f"{label}: " if label else ""
        axes[0].plot(xs, [r["totals"]["driver_peak_rss_mib"] for _, r in runs], marker="o", label=f"{tag}driver")
        axes[0].plot(xs, [r["totals"]["driver_peak_private_mib"] for _, r in runs], marker="o", linestyle="--",
                     label=f"{tag}driver, private (RSS - shared)")
        axes[0].plot(xs, [r["ray_peak_sum_rss_mib"] for _, r in runs], marker="s", label=f"{tag}Ray processes (sum)")
        axes[1].plot(xs, [r["chunks_per_s"] for _, r in runs], marker="o", label=f"{tag}whole run (wall)")
    if not last:
        return False
    names = list(dict.fromkeys(s["stage"] for _, r in last for s in r["stages"] if s["seconds"] > 0))
    for name in names:
        points = [(x, s["seconds"]) for x, r in last for s in r["stages"] if s["stage"] == name]
        axes[2].plot(*zip(*points), marker="o", label=name)
    for ax, name, unit in zip(axes, ("Peak RSS", "Indexing throughput", "Stages"),
                              ("peak RSS (MiB)", "chunks/s", "stage wall time (s)")):
        ax.set_ylabel(unit)
        ax.set_xscale("log")
        ax.set_xlabel("chunks")
        ax.set_ylim(bottom=0)
        if ax is not axes[2]:
            ax.set_title(name)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_plot(fig, axes[2], path, "Stages")
    return True


# ---- main ----------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter, epilog=(
        "CI smoke (~1 min): --chunks 1000 --chunk-tokens 200 --store lite\n"
        "1000 chunks, fast mode, Milvus server: ~2-4 min on 2 cores (its corpus is cached in --workdir)"))
    parser.add_argument("--chunks", type=int, nargs="+", default=[1000],
                        help="target chunk counts; each size is indexed into a fresh workspace")
    parser.add_argument("--mode", choices=["fast", "llm"], default="fast",
                        help="extraction: fast (no LLM) or llm (the scripted LLM of tests/scripted_llm.py, zero latency)")
    parser.add_argument("--store", choices=["lite", "server"], default="server",
                        help="vectors: a Milvus 2.3 standalone server started in the work folder, or Milvus Lite "
                        "in the workspace")
    parser.add_argument("--nodes", type=int, default=1,
                        help="Ray nodes on this machine: 1 (one node, --cpus CPUs) or more (a head with 0 CPUs and "
                        "nodes-1 workers sharing --cpus, ray.cluster_utils.Cluster as in tests/multinode_scenario.py)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="CPUs the Ray cluster offers in all")
    parser.add_argument("--object-store-mb", type=int, default=2048, help="object store of each Ray node (MiB)")
    parser.add_argument("--seed", type=int, default=0, help="corpus seed")
    parser.add_argument("--chunk-tokens", type=int, default=ChunkingConfig().chunk_tokens,
                        help="tokens per chunk (passed to the index; smaller: more chunks from less text)")
    parser.add_argument("--overlap-tokens", type=int, default=ChunkingConfig().overlap_tokens,
                        help="tokens shared by neighbouring chunks (passed to the index)")
    parser.add_argument("--dim", type=int, default=384, help="dimension of the hash embeddings")
    parser.add_argument("--embed-batch", type=int, default=64,
                        help="texts per request to the embeddings server (embedding.batch_size)")
    parser.add_argument("--set", nargs="*", default=[], metavar="SECTION.FIELD=VALUE",
                        help=f"more settings of the index run, as {ENV_PREFIX}SECTION__FIELD variables, e.g. "
                        "embedding.actors=2 ray.local_stages_max_mb=0")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between process samples")
    parser.add_argument("--kill-at", type=float, default=None, metavar="FRACTION",
                        help="kill each size's run once this fraction of its chunks is extracted, resume it, and "
                        "compare its graph with an uninterrupted run's")
    parser.add_argument("--workdir", default=None,
                        help="work folder, kept (corpora cached there); default a temp dir, removed at the end")
    parser.add_argument("--keep-workspaces", action="store_true",
                        help="keep each size's workspace (and its Milvus collections)")
    parser.add_argument("--json-out", default=None, help="write every row, the settings and the machine as JSON here")
    parser.add_argument("--plot", default=None, help="PNG: peak RSS and chunks/s against corpus size, stage times")
    parser.add_argument("--plot-from", nargs="+", default=None, metavar="LABEL=JSON",
                        help="no run: draw --plot from earlier --json-out files, one series each (e.g. "
                        "before=old.json after=new.json; the stage panel shows the last)")
    args = parser.parse_args(argv)
    if args.kill_at is not None and not 0 < args.kill_at < 1:
        parser.error("--kill-at takes a fraction between 0 and 1")
    if args.overlap_tokens >= args.chunk_tokens:
        parser.error("--overlap-tokens must be below --chunk-tokens")
    for item in args.set:
        key, sep, _ = item.partition("=")
        if not sep or "." not in key:
            parser.error(f"--set wants SECTION.FIELD=VALUE, got {item!r}")
        if key.startswith("chunking.") and key != "chunking.encoding":
            parser.error("set the chunk size with --chunk-tokens / --overlap-tokens (the corpus is cut to them)")
    return args


def driver_env(args: argparse.Namespace, embeddings: HashEmbeddings, prefix: str) -> dict[str, str]:
    """The driver's environment: offline, this checkout's code, hash embeddings, --set values."""
    settings = {"embedding.backend": "openai", "embedding.base_url": embeddings.url,
                "embedding.model": embeddings.model, "embedding.batch_size": str(args.embed_batch),
                "vectors.collection_prefix": prefix}
    return child_env({**settings, **dict(item.split("=", 1) for item in args.set)})


def replot(sources: list[str], png: str | None) -> None:
    """``--plot-from LABEL=JSON ...``: the plot of earlier runs, one series per file."""
    if not png:
        raise SystemExit("--plot-from needs --plot PNG")
    pairs = [source.rpartition("=")[::2] for source in sources]  # (label, path)
    series = [(label, json.loads(Path(path).read_text(encoding="utf-8"))["rows"]) for label, path in pairs]
    if not plot(series, Path(png), "lightrag-ray index: " + ", ".join(label or path for label, path in pairs)):
        raise SystemExit("nothing to plot: no uninterrupted run in those files (or matplotlib is missing)")
    print(f"plot: {png}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.plot_from:
        replot(args.plot_from, args.plot)
        return
    command = command_line("bench_corpus.py", argv)
    workdir = Path(args.workdir).resolve() if args.workdir else Path(tempfile.mkdtemp(prefix="bench_corpus_"))
    workdir.mkdir(parents=True, exist_ok=True)
    encoding = next((item.split("=", 1)[1] for item in args.set if item.startswith("chunking.encoding=")),
                    ChunkingConfig().encoding)
    embeddings = HashEmbeddings(dim=args.dim).start()
    llm = ScriptedLLM(latency_s=0.0).start() if args.mode == "llm" else None
    server = MilvusStandalone(workdir / "milvus") if args.store == "server" else None
    cluster: RayCluster | None = None
    rows: list[dict[str, Any]] = []
    info: dict[str, Any] = {}
    try:
        labels: dict[int, str] = {}
        if server is not None:
            log(f"starting a Milvus server in {server.base_dir}")
            start_milvus(server)
            labels[server.process.pid] = "milvus server"
        log(f"starting Ray ({args.nodes} node{'s' if args.nodes > 1 else ''}, {args.cpus} CPUs)")
        cluster = RayCluster(args.nodes, args.cpus, Path(tempfile.mkdtemp(prefix="bcray_", dir="/tmp")),
                             args.object_store_mb)
        info = machine_info(cluster)
        for target in args.chunks:
            rows.append(run_size(args, target, workdir, encoding, embeddings, llm, server, cluster, labels))
    finally:
        if cluster is not None:
            cluster.shutdown()
        for service in (server, llm, embeddings):
            if service is not None:
                service.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)

    store = "Milvus server (2.3 standalone)" if args.store == "server" else "Milvus Lite"
    for row in rows:
        print(f"\n## {row['target_chunks']} chunks: {args.mode} mode, {store}, {info.get('ray_cluster')}\n")
        c = row["corpus"]
        made = "cached" if c["cached"] else f"generated in {c['seconds']} s"
        print(f"corpus: {c['documents']} documents, {c['chunks']} chunks, {c['tokens']} tokens ({made})")
        for label, run in row["runs"].items():
            if label == "killed":
                k = run
                print(f"\nkilled run: SIGKILL at {k['killed']['at_s']} s with {k['extracted_at_kill']} of "
                      f"{row['corpus']['chunks']} chunks extracted ({100 * k['extracted_fraction']:.0f}%); its job's "
                      f"actors were gone {k['after_kill']['waited_s']} s later (left: "
                      f"{k['after_kill']['actors_left_after_wait'] or 'none'})")
                continue
            print(f"\n{run_line(label, run, row['target_chunks'])}\n")
            print(f"Stages ({run['stages_source']}):\n")
            print(stage_table(run))
            print("\nProcesses:\n")
            print(role_table(run))
        if "comparison" in row:
            c = row["comparison"]
            print(f"\nresumed vs one run: graphs {'EQUAL' if c['equal'] else 'DIFFERENT'} ({c['entities']} entities, "
                  f"{c['relations']} relations; {len(c['differences'])} differences)")
            for problem in c["differences"][:10]:
                print(f"  {problem[:300]}")
    print("\n## Summary\n")
    print(summary_table(rows))
    print(f"\nmachine: {info.get('machine')}, {info.get('ram_gib')} GiB; load {info.get('load_avg')}; "
          f"Ray {info.get('ray_cluster')}; command: {command}")
    if args.plot and plot([("", rows)], Path(args.plot), f"lightrag-ray index, {args.mode} mode, {store}, "
                          f"{info.get('ray_cluster')}"):
        print(f"plot: {args.plot}")
    write_json(args.json_out, {"command": command, "settings": {**vars(args), "encoding": encoding, "store_name": store},
                               "machine": info, "rows": rows})
    if any(run.get("exit_code") for row in rows for label, run in row["runs"].items() if label != "killed"):
        sys.exit(1)


def run_size(args: argparse.Namespace, target: int, workdir: Path, encoding: str, embeddings: HashEmbeddings,
             llm: ScriptedLLM | None, server: MilvusStandalone | None, cluster: RayCluster,
             labels: dict[int, str]) -> dict[str, Any]:
    """Index one corpus size (with --kill-at: killed, resumed and compared with one run)."""
    log(f"corpus of {target} chunks ({args.chunk_tokens}-token chunks, {args.overlap_tokens} overlap)")
    corpus = generate_corpus(workdir / "corpus", target, args.seed, args.chunk_tokens, args.overlap_tokens, encoding)
    log(f"  {corpus.documents} documents, {corpus.chunks} chunks, {corpus.tokens} tokens "
        f"({'cached' if corpus.cached else f'generated in {corpus.seconds} s'})")
    row: dict[str, Any] = {"target_chunks": target, "corpus": {**vars(corpus), "folder": str(corpus.folder)},
                           "runs": {}}
    base = f"{target}-{args.mode}-{args.store}-n{args.nodes}"

    def fresh(name: str) -> tuple[Path, str, dict[str, str]]:
        workspace = workdir / "workspaces" / name
        shutil.rmtree(workspace, ignore_errors=True)
        workspace.parent.mkdir(parents=True, exist_ok=True)
        prefix = "bc_" + re.sub(r"\W", "_", name)
        if server is not None:
            drop_collections(server.uri, prefix)
        return workspace, prefix, driver_env(args, embeddings, prefix)

    def measured(name: str, label: str, workspace: Path, env: dict[str, str], kill_at: int | None = None) -> dict[str, Any]:
        run = run_index(index_command(corpus.folder, workspace, args, cluster.address, llm, server), env, workspace.parent / f"{name}.{label.replace(' ', '_')}.log",
                        args.interval, labels, f"{target} {label}", kill_at=kill_at, workspace=workspace)
        run["totals"] = summarise_roles(run["roles"])
        chunks = run["report"].get("chunks") or 0
        run["chunks_per_s"] = round(chunks / run["wall_s"], 1) if run["wall_s"] else None
        return run

    cleanup: list[tuple[Path, str]] = []
    try:
        if args.kill_at is None:
            workspace, prefix, env = fresh(base)
            cleanup.append((workspace, prefix))
            row["runs"]["one run"] = measured(base, "one run", workspace, env)
        else:
            resumed, prefix, env = fresh(f"{base}-resumed")
            cleanup.append((resumed, prefix))
            kill_at = max(1, math.ceil(args.kill_at * corpus.chunks))
            killed = measured(f"{base}-resumed", "killed", resumed, env, kill_at=kill_at)
            if "killed" not in killed:
                raise RuntimeError(f"the run ended before {kill_at} chunks were extracted: raise --kill-at's size")
            killed["after_kill"] = job_actors_gone(killed["driver_pid"])
            killed["extracted_at_kill"] = extracted_chunks(resumed)
            killed["extracted_fraction"] = round(killed["extracted_at_kill"] / corpus.chunks, 3)
            log(f"  killed at {killed['killed']['at_s']} s with {killed['extracted_at_kill']} chunks extracted; "
                f"actors left: {killed['after_kill']['actors_left_after_wait'] or 'none'}")
            row["runs"]["killed"] = killed
            row["runs"]["resumed"] = measured(f"{base}-resumed", "resumed", resumed, env)
            one, one_prefix, one_env = fresh(f"{base}-one")
            cleanup.append((one, one_prefix))
            row["runs"]["one run"] = measured(f"{base}-one", "one run", one, one_env)
            got = load_stored(load_settings(overrides={"workspace": str(resumed)}, environ=env))
            want = load_stored(load_settings(overrides={"workspace": str(one)}, environ=one_env))
            problems, _ = graph_differences(got, want)
            row["comparison"] = {"equal": not problems, "differences": problems[:50],
                                 "entities": len(want.graph["entities"]), "relations": len(want.graph["relations"])}
            log(f"resumed vs one run: {'equal' if not problems else f'{len(problems)} differences'}")
    finally:
        if not args.keep_workspaces:
            for workspace, prefix in cleanup:
                shutil.rmtree(workspace, ignore_errors=True)
                if server is not None:
                    drop_collections(server.uri, prefix)
    return row


if __name__ == "__main__":
    main()
