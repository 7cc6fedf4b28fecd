"""A/B benchmark of one setting: runs a benchmark command with the environment of A, then of B,
in turn (A B, B A, A B ...), reads one figure from each run's --json-out, and prints each side's
runs, medians, the ratio of the medians A/B and each pair's ratio (interleaving, with the first
side alternating, keeps the machine's warm-up and drift out of the ratio).

Metrics overhead (docs/benchmarks.md, "Metrics overhead"):

    .venv/bin/python scripts/bench_ab.py --repeats 3 --a LIGHTRAG_RAY__METRICS__ENABLED=true \\
        --b LIGHTRAG_RAY__METRICS__ENABLED=false --figure rows.system=lightrag-ray.wall_s \\
        -- .venv/bin/python scripts/bench_index.py --corpus carol --concurrency 32

A figure is a dotted path into the JSON; a ``key=value`` step picks the first list item whose
``key`` equals ``value`` (``rows.clients=8.p50_ms``)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_kit import HelpFormatter, command_line, logger, markdown, write_json

log = logger("bench_ab")


def figure(data: Any, path: str) -> float:
    """The number at ``path`` in ``data`` (see the module doc); KeyError naming the step that failed."""
    for step in path.split("."):
        if isinstance(data, list):
            key, _, wanted = step.partition("=")
            found = [item for item in data if str(item.get(key)) == wanted]
            if not found:
                raise KeyError(f"no item with {step} in {[{key: i.get(key)} for i in data]}")
            data = found[0]
        else:
            data = data[step]
    return float(data)


def run_once(command: list[str], env: dict[str, str], path: str) -> float:
    """One run of ``command`` with ``env`` added, its figure read from its --json-out."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "run.json"
        subprocess.run([*command, "--json-out", str(out)], env={**os.environ, **env}, check=True,
                       stdout=sys.stderr)
        return figure(json.loads(out.read_text(encoding="utf-8")), path)


def pair_order(repeat: int) -> tuple[str, str]:
    """Which side runs first in pair ``repeat``: A B, then B A, in turn, so that a machine warming up
    or drifting through the runs weighs on both sides alike."""
    return ("A", "B") if repeat % 2 == 0 else ("B", "A")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--a", nargs="+", required=True, metavar="NAME=VALUE", help="environment of side A")
    parser.add_argument("--b", nargs="+", required=True, metavar="NAME=VALUE", help="environment of side B")
    parser.add_argument("--figure", required=True, help="dotted path of the figure in the command's JSON")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each side")
    parser.add_argument("--json-out", help="also write the runs and medians as JSON here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the benchmark command (it must take --json-out)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the benchmark command after --")
    sides = {"A": dict(item.split("=", 1) for item in args.a), "B": dict(item.split("=", 1) for item in args.b)}
    runs: dict[str, list[float]] = {"A": [], "B": []}
    for repeat in range(args.repeats):
        for side in pair_order(repeat):
            env = sides[side]
            log(f"run {repeat + 1}/{args.repeats}, side {side} ({' '.join(f'{k}={v}' for k, v in env.items())})")
            runs[side].append(run_once(command, env, args.figure))
    medians = {side: statistics.median(values) for side, values in runs.items()}
    ratio = medians["A"] / medians["B"] if medians["B"] else float("nan")
    pair_ratios = [a / b if b else float("nan") for a, b in zip(runs["A"], runs["B"])]
    print(markdown(["side", "environment", f"{args.figure} per run", "median"],
                   [[side, " ".join(f"{k}={v}" for k, v in sides[side].items()), ", ".join(f"{v:g}" for v in runs[side]),
                     f"{medians[side]:g}"] for side in sides]))
    print(f"\nratio of the medians A/B: {ratio:.3f} (pairs: {', '.join(f'{r:.3f}' for r in pair_ratios)})")
    print(f"command: {command_line('bench_ab.py', argv)}")
    write_json(args.json_out, {"command": command_line("bench_ab.py", argv), "figure": args.figure,
                               "environments": sides, "runs": runs, "medians": medians, "ratio": ratio,
                               "pair_ratios": pair_ratios})


if __name__ == "__main__":
    main()
