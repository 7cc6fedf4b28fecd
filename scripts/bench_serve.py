"""Load test of the Serve app: N concurrent clients on POST /query/data for a fixed time.

Starts a local Ray cluster and the application (no LLM: keywords come from the question,
so the figures measure the service, not a model) over a workspace holding the bundled
Christmas Carol (indexed in fast mode on first use), or drives an app already running
(--url). For each client count it prints requests, throughput and p50/p95/p99 latency.
The clients run on the same machine, so on 2 cores they compete with the server.

    .venv/bin/python scripts/bench_serve.py --clients 1 8 32 --duration 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import shlex
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUESTIONS = [
    "Who is Jacob Marley?", "What does the Ghost of Christmas Past show Scrooge?",
    "How does Bob Cratchit celebrate Christmas?", "Who is Tiny Tim?", "What happens to Scrooge at the end?",
    "Who is Fezziwig?", "What is Scrooge's nephew Fred like?", "Where does Scrooge work?",
    "What does the Ghost of Christmas Yet to Come reveal?", "Who is Belle?",
    "Why is Marley's ghost in chains?", "What do the charity gentlemen ask Scrooge for?",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_app(workspace: Path, corpus: str | None) -> str:
    """Index ``corpus`` (default: the bundled sample) if needed, start Ray and the app; returns its URL."""
    import ray
    from ray import serve

    from lightrag_ray.cli.demo import SAMPLE
    from lightrag_ray.config import load_settings
    from lightrag_ray.index.pipeline import index_paths
    from lightrag_ray.serve.app import AppArgs, build_app

    ray.init(include_dashboard=False, logging_level=logging.WARNING)
    ray.data.DataContext.get_current().enable_progress_bars = False
    settings = {"llm": {"backend": "none"}, "extraction": {"mode": "fast"}}
    if not (workspace / "manifest.json").exists():
        source = corpus or str(SAMPLE)
        report = index_paths([source], load_settings(overrides={**settings, "workspace": str(workspace)}), None)
        print(f"indexed {source}: {report.chunks} chunks, {report.entities} entities, "
              f"{report.relations} relations in {report.seconds:.0f} s", file=sys.stderr)
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config={"log_level": "WARNING"})
    serve.run(build_app(AppArgs(workspace=str(workspace), settings=settings)), name="lightrag", route_prefix="/")
    return f"http://127.0.0.1:{port}"


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
        "p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
    }


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32], help="concurrent clients per run")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per client count")
    parser.add_argument("--mode", default="mix", choices=["mix", "local", "global", "hybrid", "naive"])
    parser.add_argument("--url", help="drive this running app instead of starting one")
    parser.add_argument("--api-key", default=os.environ.get("LIGHTRAG_RAY_API_KEY"), help="key for --url")
    parser.add_argument("--workspace", default=str(Path(tempfile.gettempdir()) / "lightrag_ray_bench_serve"))
    parser.add_argument("--corpus", help="files to index into a new workspace (default: the bundled book)")
    parser.add_argument("--json-out", help="also write the rows as JSON here")
    args = parser.parse_args(argv)

    url = args.url or start_app(Path(args.workspace), args.corpus)
    headers = {"X-API-Key": args.api_key} if args.api_key else {}
    asyncio.run(drive(url, 2, 3.0, args.mode, headers))  # warm-up: models loaded, connections open
    rows = [asyncio.run(drive(url, n, args.duration, args.mode, headers)) for n in args.clients]

    lines = ["| clients | requests | errors | throughput (req/s) | p50 ms | p95 ms | p99 ms |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['clients']} | {r['requests']} | {r['errors']} | {r['throughput']} | {r['p50_ms']} | "
              f"{r['p95_ms']} | {r['p99_ms']} |" for r in rows]
    command = "python scripts/bench_serve.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    print("\n".join(lines))
    print(f"\nPOST /query/data, mode {args.mode}, {args.duration:g} s per row; machine: {machine()}")
    print(f"command: {command.strip()}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"command": command, "mode": args.mode, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
