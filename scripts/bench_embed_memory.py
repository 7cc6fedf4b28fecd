#!/usr/bin/env python3
"""RSS of the embedding model over time under each malloc setting (issue 29's soak).

Each allocator runs in a fresh process that loads the configured embedding model and embeds
batches of varying size and length (1 to 64 pieces of the demo book, 20-2,500 characters; a
fifth of them from a new thread, as request threads come and go) for ``--seconds``. Printed:
RSS after the first third (the model warm) and at the end, its growth, and batches per second.

  glibc      glibc's malloc as it comes (its mmap threshold slides up as large blocks are freed)
  threshold  glibc with MALLOC_MMAP_THRESHOLD_ fixed as on a cluster lightrag-ray starts
  jemalloc   jemalloc preloaded (Debian's libjemalloc2; skipped when not installed)

  .venv/bin/python scripts/bench_embed_memory.py --seconds 180
"""

from __future__ import annotations

import argparse
import ctypes.util
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lightrag_ray.ray_runtime import LOCAL_CLUSTER_ENV  # noqa: E402

MMAP_ENV = "MALLOC_MMAP_THRESHOLD_"
BATCH_SIZES = (1, 1, 1, 2, 8, 32, 64)  # mostly single queries, some indexing-sized batches


def allocator_env(name: str) -> dict[str, str] | None:
    """The environment changes of allocator ``name`` (None: not available here)."""
    if name == "glibc":
        return {}
    if name == "threshold":
        return {MMAP_ENV: LOCAL_CLUSTER_ENV[MMAP_ENV]}
    if name == "jemalloc":
        library = ctypes.util.find_library("jemalloc")
        return {"LD_PRELOAD": library} if library else None
    raise SystemExit(f"unknown allocator {name!r}: choose from glibc, threshold, jemalloc")


def rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS"))


def embed_for(seconds: float, samples: int) -> dict[str, object]:
    """The child: embed varied batches for ``seconds``; RSS ``samples`` times along the way."""
    from lightrag_ray.config import EmbeddingConfig
    from lightrag_ray.models.embedding import make_embedder

    text = (ROOT / "lightrag_ray" / "data" / "christmas_carol.txt").read_text(encoding="utf-8")
    rng = random.Random(7)
    embedder = make_embedder(EmbeddingConfig())
    points: list[tuple[float, float]] = []
    start, batches = time.monotonic(), 0
    while (elapsed := time.monotonic() - start) < seconds:
        if elapsed >= len(points) * seconds / samples:
            points.append((round(elapsed, 1), round(rss_mib(), 1)))
        batch = []
        for _ in range(rng.choice(BATCH_SIZES)):
            at = rng.randrange(len(text) - 2500)
            batch.append(text[at:at + rng.randrange(20, 2500)])
        if rng.random() < 0.2:
            worker = threading.Thread(target=embedder.embed, args=(batch,))
            worker.start()
            worker.join()
        else:
            embedder.embed(batch)
        batches += 1
    points.append((round(time.monotonic() - start, 1), round(rss_mib(), 1)))
    return {"points": points, "batches_per_s": round(batches / (time.monotonic() - start), 2)}


def run_allocator(name: str, env: dict[str, str], seconds: float) -> dict[str, object]:
    """One allocator's figures, from a fresh process."""
    clean = {k: v for k, v in os.environ.items() if k not in (MMAP_ENV, "LD_PRELOAD")}
    done = subprocess.run([sys.executable, __file__, "--child", "--seconds", str(seconds)], cwd=ROOT,
                          env={**clean, "HF_HUB_OFFLINE": "1", **env}, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name}: the embedding process failed:\n{done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    points = figures["points"]
    warm = next(rss for t, rss in points if t >= seconds / 3)
    end = points[-1][1]
    return {"allocator": name, "warm_mib": warm, "end_mib": end, "growth_pct": round(100 * (end / warm - 1), 1),
            "batches_per_s": figures["batches_per_s"], "points": points}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--seconds", type=float, default=180.0, help="seconds of embedding per allocator (default 180)")
    parser.add_argument("--allocators", default="glibc,threshold,jemalloc", help="comma-separated, run one after another")
    parser.add_argument("--json-out", default=None, help="write the figures (with every RSS sample) here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(embed_for(args.seconds, samples=12)))
        return
    rows = []
    for name in args.allocators.split(","):
        env = allocator_env(name.strip())
        if env is None:
            print(f"{name}: not installed here, skipped (Debian: apt-get install libjemalloc2)", flush=True)
            continue
        rows.append(run_allocator(name.strip(), env, args.seconds))
        row = rows[-1]
        print(f"{row['allocator']:<10} RSS {row['warm_mib']:>7.1f} -> {row['end_mib']:>7.1f} MiB "
              f"({row['growth_pct']:+.1f}%)  {row['batches_per_s']:.2f} batches/s", flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
