"""Many workspaces under one Serve app: memory held through eviction, cold and warm latency.

Starts a local Ray cluster (``--cpus`` logical CPUs) and the app over a fresh workspaces root
(fast extraction, no LLM) that keeps at most ``--max-open`` workspaces open, and with
``--max-open-memory-mb`` closes idle ones while the open ones' actors hold more. It fills
``--workspaces`` workspaces (w01, w02, ...) with LightRAG's sample documents (../shared/data),
each created by its first insert (POST /documents/texts with LIGHTRAG-WORKSPACE), then asks every
workspace two questions in turn (POST /query/data, mix): the first reopens a workspace the caps
closed (cold), the second finds it open (warm). Every ``--sample-every`` s it sums the resident
memory of the processes that hold workspaces open (graph shards, Milvus Lite owners) and of
the whole app, and prints the peaks, the latencies and whether each answer came from its own
workspace (its name is in every sample document's copy).

    .venv/bin/python scripts/bench_workspaces.py --workspaces 50 --max-open 4 --max-open-memory-mb 1500
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import psutil

from bench_kit import (MIB, ROOT, Poller, command_line, machine, offline, percentiles_ms, serve_app, start_ray,
                       write_json)

offline()

SAMPLES = ROOT.parent / "shared" / "data" / "lightrag_eval_sample" / "sample_documents"
SETTINGS = {"llm": {"backend": "none"}, "extraction": {"mode": "fast"}}
HOLDERS = ("GraphShard", "VectorStoreActor")  # the processes an open workspace keeps
MARK = re.compile(r"Workspace (w\d+) copy")


class MemorySampler(Poller):
    """Every ``every`` s: RSS of the workspace-holding actors and of every Ray process, summed."""

    def __init__(self, every: float) -> None:
        super().__init__(every)
        self.samples: list[tuple[float, float, float, int]] = []  # (time, holders MiB, all MiB, holder processes)
        self.started = time.monotonic()

    def tick(self) -> None:
        holders = total = 0.0
        count = 0
        for process in psutil.process_iter(["cmdline", "memory_info"]):
            title = " ".join(process.info["cmdline"] or [])
            if not title.startswith("ray::") or process.info["memory_info"] is None:
                continue
            rss = process.info["memory_info"].rss / MIB
            total += rss
            if any(title.startswith(f"ray::{holder}") for holder in HOLDERS):
                holders += rss
                count += 1
        self.samples.append((time.monotonic() - self.started, holders, total, count))


def documents(name: str) -> list[str]:
    """LightRAG's sample documents, each marked with the workspace's name (so an answer shows
    which workspace it came from)."""
    return [f"Workspace {name} copy.\n\n{path.read_text(encoding='utf-8')}"
            for path in sorted(SAMPLES.glob("*.md")) if path.name != "README.md"]


def start_app(root: Path, cpus: int, max_open: int, max_memory_mb: float | None) -> str:
    """Ray and the app over the workspaces root ``root``, under the caps; returns its URL."""
    start_ray(cpus, address=None)
    return serve_app(workspace=str(root / "default"), settings=SETTINGS, workspaces_root=str(root),
                     max_open_workspaces=max_open, max_open_memory_mb=max_memory_mb, ingress_replicas=1)


def fill(client: httpx.Client, name: str) -> float:
    """Insert the sample documents into workspace ``name`` (creating it); seconds to processed."""
    started = time.perf_counter()
    response = client.post("/documents/texts", json={"texts": documents(name)}, headers={"LIGHTRAG-WORKSPACE": name})
    response.raise_for_status()
    track = response.json()["track_id"]
    while (status := client.get(f"/documents/track_status/{track}",
                                headers={"LIGHTRAG-WORKSPACE": name}).json()["job_status"]) in ("pending", "processing"):
        time.sleep(0.2)
    if status != "processed":
        raise RuntimeError(f"the insert into {name} ended {status}")
    return time.perf_counter() - started


def ask(client: httpx.Client, name: str) -> tuple[float, bool]:
    """Seconds for one /query/data in workspace ``name``; whether every chunk came from it."""
    started = time.perf_counter()
    response = client.post("/query/data", json={"query": "Which databases does LightRAG support?", "mode": "mix"},
                           headers={"LIGHTRAG-WORKSPACE": name})
    seconds = time.perf_counter() - started
    if response.status_code != 200:
        raise RuntimeError(f"/query/data in {name}: {response.status_code} {response.text[:500]}")
    marks = {mark for chunk in response.json()["data"]["chunks"] for mark in MARK.findall(chunk["content"])}
    return seconds, marks == {name}


def percentiles(values: list[float]) -> dict[str, float]:
    ms = np.array(values) * 1000
    return {**percentiles_ms(ms, 50, 95), "max_ms": round(float(ms.max()), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workspaces", type=int, default=50, help="workspaces to create and query (50)")
    parser.add_argument("--max-open", type=int, default=4, help="the app's max_open_workspaces (4)")
    parser.add_argument("--max-open-memory-mb", type=float, help="the app's max_open_memory_mb (default: none)")
    parser.add_argument("--cpus", type=int, default=4, help="logical CPUs of the local Ray cluster (4)")
    parser.add_argument("--sample-every", type=float, default=0.5, help="seconds between memory samples (0.5)")
    parser.add_argument("--root", help="the workspaces root (default: a new temporary folder)")
    parser.add_argument("--json-out", help="also write the figures as JSON here")
    args = parser.parse_args(argv)

    root = Path(args.root or tempfile.mkdtemp(prefix="lightrag_ray_workspaces_"))
    names = [f"w{n:02d}" for n in range(1, args.workspaces + 1)]
    url = start_app(root, args.cpus, args.max_open, args.max_open_memory_mb)
    sampler = MemorySampler(args.sample_every).start()
    with httpx.Client(base_url=url, timeout=300) as client:
        inserts = []
        for number, name in enumerate(names, 1):
            inserts.append(fill(client, name))
            print(f"[bench] {number}/{len(names)} workspaces filled", file=sys.stderr, flush=True)
        cold, warm, own = [], [], []
        for name in names:
            for timings in (cold, warm):
                seconds, mine = ask(client, name)
                timings.append(seconds)
                own.append(mine)
        listed = client.get("/workspaces").json()["workspaces"]
    sampler.stop()
    holders = [s[1] for s in sampler.samples]
    result = {
        "workspaces": len(names), "max_open": args.max_open, "max_open_memory_mb": args.max_open_memory_mb,
        "insert_s": percentiles(inserts), "cold": percentiles(cold), "warm": percentiles(warm),
        "answers_from_own_workspace": f"{sum(own)}/{len(own)}",
        "open_at_end": sum(1 for w in listed if w["open"]), "listed": len(listed),
        "peak_holders_mib": round(max(holders), 1), "peak_holder_processes": max(s[3] for s in sampler.samples),
        "peak_app_mib": round(max(s[2] for s in sampler.samples), 1),
        "command": command_line("bench_workspaces.py", argv),
        "machine": machine(),
    }
    print(f"| workspaces | max open | memory cap MiB | peak MiB of workspace actors (processes) | peak MiB of all Ray "
          f"processes | cold query p50 / p95 / max ms | warm query p50 / p95 / max ms | insert p50 s |\n"
          f"|---:|---:|---:|---:|---:|---|---|---:|\n"
          f"| {result['workspaces']} | {args.max_open} | {args.max_open_memory_mb or '-'} | "
          f"{result['peak_holders_mib']} ({result['peak_holder_processes']}) | {result['peak_app_mib']} | "
          f"{result['cold']['p50_ms']} / {result['cold']['p95_ms']} / {result['cold']['max_ms']} | "
          f"{result['warm']['p50_ms']} / {result['warm']['p95_ms']} / {result['warm']['max_ms']} | "
          f"{result['insert_s']['p50_ms'] / 1000:.2f} |")
    print(f"\nanswers from their own workspace: {result['answers_from_own_workspace']}; open at the end: "
          f"{result['open_at_end']} of {result['listed']}; machine: {result['machine']}\ncommand: {result['command']}")
    write_json(args.json_out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
