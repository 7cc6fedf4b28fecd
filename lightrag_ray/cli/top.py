"""`lightrag-ray top`: the cluster's lightrag figures in a terminal, read from Prometheus.

For operators without Grafana: indexing runs in progress, then what the last N minutes added to
documents, chunks, LLM requests and tokens, and queries per mode (count, rate, p50). A count is
the difference between a counter now and N minutes ago (the whole counter when its series is
younger than that), so it is exact while the recorder actor keeps running (a restart resets its
counters). Latencies are of every workspace: their histograms have no workspace label."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Any

import httpx

from lightrag_ray.metrics.catalog import spec

DEFAULT_PROMETHEUS = "http://127.0.0.1:9090"
REFRESH_S = 5.0
CLEAR_SCREEN = "\x1b[H\x1b[2J"


class PrometheusUnreachable(Exception):
    """No answer from Prometheus's HTTP API."""


@dataclass
class Prometheus:
    """Instant queries through ``/api/v1/query``."""

    url: str
    timeout_s: float = 10.0

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The result vector of ``expr``; PrometheusUnreachable if nothing answers, RuntimeError
        if Prometheus refuses the query."""
        try:
            response = httpx.get(f"{self.url.rstrip('/')}/api/v1/query", params={"query": expr}, timeout=self.timeout_s)
            body = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise PrometheusUnreachable(f"{type(exc).__name__}: {exc}") from exc
        if body.get("status") != "success":
            raise RuntimeError(f"Prometheus refused {expr!r}: {body.get('error')}")
        return body["data"]["result"]

    def by(self, expr: str, label: str) -> dict[str, float]:
        """``expr``'s values keyed by ``label``, NaN (an empty histogram) left out."""
        values = {series["metric"].get(label, ""): float(series["value"][1]) for series in self.query(expr)}
        return {key: value for key, value in values.items() if value == value}


def _selector(name: str, workspace: str | None) -> str:
    """The exported series of catalog metric ``name`` (a histogram's buckets), limited to
    ``workspace`` when the metric has that label."""
    metric = spec(name)
    series = metric.prometheus_name + ("_bucket" if metric.kind == "histogram" else "")
    if not workspace or "workspace" not in metric.tags:
        return series
    quoted = workspace.replace("\\", "\\\\").replace('"', '\\"')
    return f'{series}{{workspace="{quoted}"}}'


def added(name: str, by: str, minutes: int, workspace: str | None) -> str:
    """PromQL: what counter ``name`` gained in the last ``minutes``, summed by ``by``."""
    series = _selector(name, workspace)
    now = f"sum by ({by}) ({series})"
    return f"{now} - sum by ({by}) ({series} offset {minutes}m) or {now}"


@dataclass
class Snapshot:
    """The figures one screen shows."""

    minutes: int
    running: dict[str, str]  # workspace -> "stage 42%"
    documents: dict[str, float]
    chunks: dict[str, float]
    llm_requests: dict[str, float]
    llm_tokens: dict[str, float]
    queries: dict[str, float]
    query_p50: dict[str, float]


def snapshot(prometheus: Prometheus, minutes: int, workspace: str | None) -> Snapshot:
    """Read the figures of the last ``minutes`` (of ``workspace``, else every workspace)."""
    running = prometheus.by(f"max by (workspace) ({_selector('index_running', workspace)}) == 1", "workspace")
    stages = prometheus.query(f"max by (workspace, stage) ({_selector('index_stage', workspace)}) == 1")
    progress = prometheus.query(f"max by (workspace, stage) ({_selector('index_stage_progress', workspace)})")
    done = {(s["metric"]["workspace"], s["metric"]["stage"]): float(s["value"][1]) for s in progress}
    now = {ws: "starting" for ws in running}
    for series in stages:
        key = (series["metric"]["workspace"], series["metric"]["stage"])
        if key[0] in now:
            now[key[0]] = f"{key[1]} {done.get(key, 0.0):.0%}"
    latency = added("query_latency_seconds", "mode, le", minutes, workspace)
    return Snapshot(
        minutes=minutes,
        running=now,
        documents=prometheus.by(added("index_documents", "outcome", minutes, workspace), "outcome"),
        chunks=prometheus.by(added("index_chunks", "outcome", minutes, workspace), "outcome"),
        llm_requests=prometheus.by(added("llm_requests", "outcome", minutes, workspace), "outcome"),
        llm_tokens=prometheus.by(added("llm_tokens", "type", minutes, workspace), "type"),
        queries=prometheus.by(added("query_requests", "mode", minutes, workspace), "mode"),
        query_p50=prometheus.by(f"histogram_quantile(0.5, {latency})", "mode"),
    )


def _number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.3g}"


def _counts(values: dict[str, float]) -> str:
    return "  ".join(f"{key} {_number(value)}" for key, value in sorted(values.items())) or "-"


def render(shot: Snapshot, title: str) -> str:
    """The screen: one line per figure, a row per query mode."""
    lines = [title,
             "indexing now  " + ("  ".join(f"{ws}: {state}" for ws, state in sorted(shot.running.items())) or "-"),
             f"last {shot.minutes} min:",
             f"documents     {_counts(shot.documents)}",
             f"chunks        {_counts(shot.chunks)}",
             f"LLM requests  {_counts(shot.llm_requests)}",
             f"LLM tokens    {_counts(shot.llm_tokens)}",
             f"queries       {'mode':<10}{'requests':>10}{'per s':>10}{'p50 s':>10}"]
    for mode, count in sorted(shot.queries.items()):
        p50 = shot.query_p50.get(mode)
        lines.append(f"              {mode:<10}{_number(count):>10}{count / (shot.minutes * 60):>10.3f}"
                     f"{'-' if p50 is None else f'{p50:.3f}':>10}")
    return "\n".join(lines)


def _minutes(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of minutes, got {value!r}")
    return int(value)


def add_parser(sub: Any) -> None:
    """Register `top` on the CLI's subparsers."""
    top = sub.add_parser(
        "top", help="lightrag figures of a cluster in the terminal, read from Prometheus",
        description="Indexing runs in progress; documents, chunks, LLM requests and tokens, and queries per mode "
        "(count, rate, p50) over the last minutes, from the Prometheus that scrapes the cluster "
        "(docs/deployment.md, Monitoring). Refreshes until Ctrl-C.")
    top.add_argument("--prometheus", default=DEFAULT_PROMETHEUS, metavar="URL",
                     help=f"Prometheus's address ({DEFAULT_PROMETHEUS})")
    top.add_argument("--minutes", type=_minutes, default=5, help="the window counts and rates cover (5)")
    top.add_argument("--workspace", "-w", help="only this workspace's figures (latencies are of every workspace)")
    top.add_argument("--once", action="store_true", help="print one screen and exit")


def run(args: argparse.Namespace) -> int:
    """Print the figures every REFRESH_S seconds (once with --once); 1 if Prometheus is unreachable."""
    prometheus = Prometheus(args.prometheus)
    scope = f"workspace {args.workspace}" if args.workspace else "all workspaces"
    try:
        while True:
            shot = snapshot(prometheus, args.minutes, args.workspace)
            screen = render(shot, f"lightrag-ray top  {args.prometheus}  {scope}  {time.strftime('%H:%M:%S')}")
            if args.once:
                print(screen)
                return 0
            print((CLEAR_SCREEN if sys.stdout.isatty() else "") + screen + "\n", flush=True)
            time.sleep(REFRESH_S)
    except PrometheusUnreachable as exc:
        print(f"lightrag-ray top: no Prometheus at {args.prometheus} ({exc}); start one that scrapes the cluster's "
              "metrics port and pass its address with --prometheus (docs/deployment.md, Monitoring)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
