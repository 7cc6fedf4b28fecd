"""Load test of the Serve app: N concurrent clients on POST /query/data for a fixed time.

Starts a local Ray cluster and the application (no LLM: keywords come from the question,
so the figures measure the service, not a model) over a workspace holding the bundled
Christmas Carol (indexed in fast mode on first use), or drives an app already running
(--url). For each number of ingress replicas (--replicas) and client count it prints
requests, throughput and p50/p95/p99 latency; with --during-insert it measures each
client count again while an insert job (copies of the book, new chunks each time) runs,
and prints the ratio of the two p50s. With --workspaces 2 the app serves a workspaces root
holding two copies of the workspace, ``a`` and ``b``: the queries go to ``b`` and the insert job
runs in ``a``, and once it runs a small insert into ``b`` is sent and the seconds until that job
starts are printed (a workspace's writes never wait for another's). The clients run on the
same machine, so on 2 cores they compete with the server.

    .venv/bin/python scripts/bench_serve.py --clients 1 8 32 --duration 20 --replicas 1 2 --during-insert
    .venv/bin/python scripts/bench_serve.py --clients 1 8 --duration 20 --during-insert --workspaces 2 --cpus 4
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench_kit import command_line, machine, offline, percentiles_ms, serve_app, start_ray, write_json
from lightrag_ray.query.params import RETRIEVAL_MODES

offline()

QUESTIONS = [
    "Who is Jacob Marley?", "What does the Ghost of Christmas Past show Scrooge?",
    "How does Bob Cratchit celebrate Christmas?", "Who is Tiny Tim?", "What happens to Scrooge at the end?",
    "Who is Fezziwig?", "What is Scrooge's nephew Fred like?", "Where does Scrooge work?",
    "What does the Ghost of Christmas Yet to Come reveal?", "Who is Belle?",
    "Why is Marley's ghost in chains?", "What do the charity gentlemen ask Scrooge for?",
]


SETTINGS = {"llm": {"backend": "none"}, "extraction": {"mode": "fast"}}
WORKSPACE_NAMES = "abcdefghijklmnopqrstuvwxyz"


def start_app(workspace: Path, corpus: str | None, replicas: int, workspaces: int = 1, cpus: int | None = None) -> str:
    """Index ``corpus`` (default: the bundled sample) into ``workspace/base`` if needed, start
    Ray (once) and the app with ``replicas`` ingress replicas over a fresh copy of it (so an
    earlier run's insert does not grow the graph of the next), or with ``workspaces`` > 1 over
    a workspaces root of that many copies (named a, b, ...); returns its URL."""
    import ray
    from ray import serve

    from lightrag_ray.cli.demo import SAMPLE
    from lightrag_ray.config import load_settings
    from lightrag_ray.service.indexing import index_paths

    if not ray.is_initialized():
        start_ray(cpus, address=None)
    base, served = workspace / "base", workspace / f"served-{replicas}"
    if not (base / "manifest.json").exists():
        source = corpus or str(SAMPLE)
        report = index_paths([source], load_settings(overrides={**SETTINGS, "workspace": str(base)}), None)
        print(f"indexed {source}: {report.chunks} chunks, {report.entities} entities, "
              f"{report.relations} relations in {report.seconds:.0f} s", file=sys.stderr)
    serve.shutdown()
    shutil.rmtree(served, ignore_errors=True)
    many = {"workspaces_root": str(served), "default_workspace": WORKSPACE_NAMES[0]} if workspaces > 1 else {}
    for name in WORKSPACE_NAMES[:workspaces] if many else [""]:
        shutil.copytree(base, served / name)
    return serve_app(workspace=str(served), settings=SETTINGS, ingress_replicas=replicas, **many)


def insert_text(corpus: str | None, copies: int, tag: str) -> list[str]:
    """``copies`` variants of the corpus text (default: the bundled book), each line marked
    with ``tag`` and its copy number so every chunk is new to the workspace."""
    from lightrag_ray.cli.demo import SAMPLE

    text = Path(corpus or SAMPLE).read_text(encoding="utf-8")
    return ["\n".join(f"{line} [{tag}.{n}]" if line.strip() else line for line in text.splitlines())
            for n in range(copies)]


async def start_insert(url: str, headers: dict[str, str], texts: list[str]) -> str:
    """Submit the texts as one insert job and wait until it is running; returns its track id."""
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:
        response = await client.post("/documents/texts", json={"texts": texts})
        response.raise_for_status()
        track = response.json()["track_id"]
        while (await job_status(client, track)) == "pending":
            await asyncio.sleep(0.2)
        return track


async def job_status(client: httpx.AsyncClient, track: str) -> str:
    return (await client.get(f"/documents/track_status/{track}")).json()["job_status"]


async def wait_for_job(url: str, headers: dict[str, str], track: str) -> str:
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:
        while (status := await job_status(client, track)) in ("pending", "processing"):
            await asyncio.sleep(1.0)
        return status


async def drive(url: str, clients: int, duration_s: float, mode: str, headers: dict[str, str]) -> dict[str, Any]:
    """``clients`` loops sending /query/data until ``duration_s`` has passed."""
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as client:
        deadline = time.perf_counter() + duration_s

        async def one_client(offset: int) -> None:
            nonlocal errors
            i = offset
            while time.perf_counter() < deadline:
                body = {"query": QUESTIONS[i % len(QUESTIONS)], "mode": mode}
                started = time.perf_counter()
                response = await client.post("/query/data", json=body)
                if response.status_code == 200:
                    latencies.append(time.perf_counter() - started)
                else:
                    errors += 1
                i += 1

        started = time.perf_counter()
        await asyncio.gather(*(one_client(c) for c in range(clients)))
        elapsed = time.perf_counter() - started
    ms = np.array(latencies) * 1000 if latencies else np.array([float("nan")])
    return {
        "clients": clients, "requests": len(latencies), "errors": errors,
        "throughput": round(len(latencies) / elapsed, 2),
        **percentiles_ms(ms, 50, 95, 99)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32], help="concurrent clients per run")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per client count")
    parser.add_argument("--mode", default="mix", choices=RETRIEVAL_MODES)
    parser.add_argument("--replicas", type=int, nargs="+", default=[1], help="ingress replicas per run (1)")
    parser.add_argument("--during-insert", action="store_true",
                        help="measure each client count again while an insert job runs")
    parser.add_argument("--insert-copies", type=int, default=8,
                        help="copies of the corpus in each insert job (8; enough to outlast the loads)")
    parser.add_argument("--workspaces", type=int, default=1, choices=range(1, 27), metavar="N",
                        help="serve N copies of the workspace (a, b, ...) from one app: queries to b, the insert job "
                        "in a, then a small insert into b, timed to its start (1: one workspace)")
    parser.add_argument("--cpus", type=int, help="logical CPUs of the local Ray cluster (default: the machine's; two "
                        "open workspaces and an insert job reserve more than 2)")
    parser.add_argument("--url", help="drive this running app instead of starting one (one --replicas value)")
    parser.add_argument("--api-key", default=os.environ.get("LIGHTRAG_RAY_API_KEY"), help="key for --url")
    parser.add_argument("--workspace", default=str(Path(tempfile.gettempdir()) / "lightrag_ray_bench_serve"))
    parser.add_argument("--corpus", help="files to index into a new workspace (default: the bundled book)")
    parser.add_argument("--json-out", help="also write the rows as JSON here")
    args = parser.parse_args(argv)

    if args.url and len(args.replicas) > 1:
        parser.error("--url drives one running app: give at most one --replicas value")
    if args.url and args.workspaces > 1:
        parser.error("--workspaces starts its own app: leave out --url")
    headers = {"X-API-Key": args.api_key} if args.api_key else {}
    # with several workspaces the queries go to b and the insert job runs in a
    reads, writes = (({**headers, "LIGHTRAG-WORKSPACE": "b"}, {**headers, "LIGHTRAG-WORKSPACE": "a"})
                     if args.workspaces > 1 else (headers, headers))
    rows: list[dict[str, Any]] = []
    for replicas in args.replicas:
        url = args.url or start_app(Path(args.workspace), args.corpus, replicas, args.workspaces, args.cpus)
        asyncio.run(drive(url, 2, 3.0, args.mode, reads))  # warm-up: models loaded, connections open
        for n in args.clients:
            rows.append({"replicas": replicas, "phase": "idle", **asyncio.run(drive(url, n, args.duration, args.mode, reads))})
        if args.during_insert:
            texts = insert_text(args.corpus, args.insert_copies, f"r{replicas}-{time.time_ns()}")
            track = asyncio.run(start_insert(url, writes, texts))
            if args.workspaces > 1:
                rows[-1]["other_insert_start_s"] = asyncio.run(other_insert_start(url, reads, args.corpus, replicas))
            for n in args.clients:
                row = asyncio.run(drive(url, n, args.duration, args.mode, reads))
                rows.append({"replicas": replicas, "phase": "insert", **row})
            rows[-1]["insert_still_running"] = asyncio.run(_running(url, writes, track))
            status = asyncio.run(wait_for_job(url, writes, track))
            print(f"insert job of {len(texts)} texts ended: {status}", file=sys.stderr)

    command = command_line("bench_serve.py", argv)
    print(table(rows))
    print(f"\nPOST /query/data, mode {args.mode}, {args.duration:g} s per row; machine: {machine()}")
    for row in rows:
        if "other_insert_start_s" in row:
            print(f"replicas {row['replicas']}: an insert into b, sent while a's job ran, started after "
                  f"{row['other_insert_start_s']:.2f} s")
    print(f"command: {command}")
    write_json(args.json_out, {"command": command, "mode": args.mode, "rows": rows})


async def other_insert_start(url: str, headers: dict[str, str], corpus: str | None, replicas: int) -> float:
    """Seconds from sending a one-text insert (``headers`` name its workspace) until its job
    runs, while another workspace's job runs."""
    started = time.perf_counter()
    track = await start_insert(url, headers, insert_text(corpus, 1, f"other-r{replicas}-{time.time_ns()}")[:1])
    seconds = time.perf_counter() - started
    print(f"insert into the other workspace ended: {await wait_for_job(url, headers, track)}", file=sys.stderr)
    return round(seconds, 3)


async def _running(url: str, headers: dict[str, str], track: str) -> bool:
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:
        return (await job_status(client, track)) == "processing"


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown rows, with the p50 during the insert over the idle p50 of the same run."""
    idle = {(r["replicas"], r["clients"]): r["p50_ms"] for r in rows if r["phase"] == "idle"}
    lines = ["| replicas | phase | clients | requests | errors | throughput (req/s) | p50 ms | p95 ms | p99 ms | p50 / idle |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ratio = r["p50_ms"] / idle[(r["replicas"], r["clients"])] if r["phase"] == "insert" else 1.0
        lines.append(f"| {r['replicas']} | {r['phase']} | {r['clients']} | {r['requests']} | {r['errors']} | "
                     f"{r['throughput']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {ratio:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
