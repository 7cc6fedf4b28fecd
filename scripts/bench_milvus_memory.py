#!/usr/bin/env python3
"""RSS of a Milvus server under a served workspace's steady small writes (issue 29's soak).

Starts one Milvus standalone server (tests/milvus_standalone.py) per variant, side by side, and
drives each with the same mix for ``--minutes``: every 15 s an insert job upserts 5-30 chunk,
entity and relation vectors (384-d, with text) and re-upserts a few entities and relations of
earlier jobs; once 12 jobs are kept, each new one deletes an earlier job's rows (the soak's
corpus stays about constant); each kind is searched every 0.4 s. Every 30 s it samples the
server's RSS and the part the Go runtime holds (from its /metrics; ``--sample-every``). Printed: RSS at a third of
the run and at its end, growth in MiB per minute and in percent (the soak's window).

  defaults  Milvus's own settings
  steady    tests/milvus_standalone.py's STEADY_WRITE_SETTINGS (what tests and benchmarks run)

  .venv/bin/python scripts/bench_milvus_memory.py --minutes 30
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lightrag_ray.storage.vectors import MilvusStore  # noqa: E402
from tests.milvus_standalone import STEADY_WRITE_SETTINGS, MilvusStandalone  # noqa: E402

VARIANTS: dict[str, dict[str, Any]] = {"defaults": {}, "steady": STEADY_WRITE_SETTINGS}
DIM, JOB_EVERY_S, SEARCH_EVERY_S, KEPT_JOBS = 384, 15.0, 0.4, 12
KINDS = ("chunks", "entities", "relations")
MIB = 2**20


def _unit_vector(rng: random.Random) -> list[float]:
    v = [rng.gauss(0.0, 1.0) for _ in range(DIM)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


def _sample(server: MilvusStandalone) -> dict[str, float]:
    """The server's RSS and the memory its Go runtime keeps resident, in MiB."""
    assert server.process is not None
    rss = psutil.Process(server.process.pid).memory_info().rss / MIB
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    go = {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line.startswith("go_memstats_")}
    go_resident = (go["go_memstats_sys_bytes"] - go["go_memstats_heap_released_bytes"]) / MIB
    return {"rss_mib": round(rss, 1), "go_mib": round(go_resident, 1)}


def drive(server: MilvusStandalone, minutes: float, seed: int, sample_every_s: float = 30.0) -> list[dict[str, float]]:
    """Run the write and search mix on ``server``; samples every ``sample_every_s``."""
    rng = random.Random(seed)
    store = MilvusStore(server.uri, DIM, prefix="memory")
    kept: list[dict[str, list[str]]] = []
    samples: list[dict[str, float]] = []
    start = time.monotonic()
    next_job = next_sample = start
    job = 0
    try:
        while (now := time.monotonic()) - start < minutes * 60:
            if now >= next_job:
                job, next_job = job + 1, next_job + JOB_EVERY_S
                written: dict[str, list[str]] = {}
                for kind in KINDS:
                    rows = [{"id": f"{kind}-{job}-{i}", "vector": _unit_vector(rng), "text": "x" * rng.randint(50, 900)}
                            for i in range(rng.randint(5, 30))]
                    if kind != "chunks":  # entities and relations seen again: upserts of kept rows
                        rows += [{"id": row_id, "vector": _unit_vector(rng), "text": "y" * 200}
                                 for earlier in rng.sample(kept, min(3, len(kept))) for row_id in earlier[kind][:3]]
                    store.upsert(kind, rows)
                    written[kind] = [row["id"] for row in rows if row["id"].startswith(f"{kind}-{job}-")]
                kept.append(written)
                if len(kept) > KEPT_JOBS:
                    for kind, ids in kept.pop(rng.randrange(len(kept))).items():
                        store.delete(kind, ids)
            for kind in KINDS:
                store.search(kind, [_unit_vector(rng)], top_k=10)
            if now >= next_sample:
                next_sample += sample_every_s
                samples.append({"minute": round((now - start) / 60, 2), **_sample(server)})
            time.sleep(SEARCH_EVERY_S)
    finally:
        store.close()
    return samples


def growth(samples: list[dict[str, float]]) -> dict[str, float]:
    """RSS from a third of the run to its end."""
    first = next(s for s in samples if s["minute"] >= samples[-1]["minute"] / 3)
    last = samples[-1]
    span = last["minute"] - first["minute"]
    return {"from_minute": first["minute"], "from_mib": first["rss_mib"], "to_mib": last["rss_mib"],
            "mib_per_minute": round((last["rss_mib"] - first["rss_mib"]) / span, 2),
            "growth_pct": round(100 * (last["rss_mib"] / first["rss_mib"] - 1), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="how long each server is driven (default 30)")
    parser.add_argument("--sample-every", type=float, default=30.0,
                        help="seconds between RSS samples (default 30; the tests' short run takes 8)")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=sorted(VARIANTS))
    parser.add_argument("--json-out", default=None, help="write every sample and the growth figures here")
    args = parser.parse_args()

    results: dict[str, list[dict[str, float]]] = {}
    servers = {name: MilvusStandalone(tempfile.mkdtemp(prefix=f"milvus_memory_{name}_"), settings=VARIANTS[name])
               for name in args.variants}
    try:
        for server in servers.values():
            server.start()

        def run(name: str) -> None:
            results[name] = drive(servers[name], args.minutes, seed=1, sample_every_s=args.sample_every)

        threads = [threading.Thread(target=run, args=(name,)) for name in servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for server in servers.values():
            server.stop()

    print(f"{'minute':>6} " + " ".join(f"{name + ' RSS':>14} {'(Go)':>7}" for name in args.variants))
    for i in range(0, min(len(samples) for samples in results.values()), 4):
        print(f"{results[args.variants[0]][i]['minute']:>6.1f} " + " ".join(
            f"{results[name][i]['rss_mib']:>14.1f} {results[name][i]['go_mib']:>7.1f}" for name in args.variants))
    summary = {name: growth(samples) for name, samples in results.items()}
    print()
    for name, figures in summary.items():
        print(f"{name:>8}: RSS {figures['from_mib']} MiB at minute {figures['from_minute']} -> {figures['to_mib']} MiB "
              f"at the end: {figures['mib_per_minute']} MiB/min, {figures['growth_pct']}%")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(
            {"minutes": args.minutes, "settings": {name: VARIANTS[name] for name in args.variants},
             "summary": summary, "samples": results}, indent=1))


if __name__ == "__main__":
    main()
