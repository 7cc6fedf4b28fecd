"""What the benchmarks and the soak share: the repository on the import path, a local Ray
cluster started one way, progress logs, children's environments, JSON output, process
sampling by role, the machine's description, markdown tables and matplotlib plots. Every
script under scripts/ takes these from here. Standard library only at import (psutil and
Ray are imported where used)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(ROOT / "scripts"), str(ROOT)):  # tests/ (scripted servers) and the other scripts
    if _path not in sys.path:
        sys.path.insert(0, _path)


MIB = 2**20
OFFLINE = {"RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """--help with the module docstring as written and every option's default."""


def logger(name: str) -> Callable[[str], None]:
    """A script's ``log(message)``: progress on stderr, timestamped from now (the script's start)."""
    started = time.monotonic()

    def log(message: str) -> None:
        print(f"[{name} {time.monotonic() - started:7.1f} s] {message}", file=sys.stderr, flush=True)

    return log


def offline() -> None:
    """This process (and the Ray workers it starts) offline, with no Ray auth, unless already set."""
    for key, value in OFFLINE.items():
        os.environ.setdefault(key, value)


def pythonpath() -> str:
    """PYTHONPATH with this checkout first: children and Ray workers import its code."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


def child_env(settings: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """A child's environment: this one offline, with no Ray auth and no RAY_ADDRESS (it is told its
    cluster), ``extra`` variables and ``settings`` (SECTION.FIELD -> value) as LIGHTRAG_RAY_ variables."""
    from lightrag_ray.config import ENV_PREFIX

    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    env.update(OFFLINE, **extra)
    for key, value in (settings or {}).items():
        env[ENV_PREFIX + "__".join(part.upper() for part in key.split("."))] = value
    return env


def command_line(script: str, argv: list[str] | None) -> str:
    """How a script was run, for its tables and JSON: ``python scripts/<script> <arguments>``."""
    given = argv if argv is not None else sys.argv[1:]
    return " ".join(shlex.quote(a) for a in ["python", f"scripts/{script}", *given])


def write_json(path: str | Path | None, data: Any) -> None:
    """``data`` as indented JSON at ``path`` (its folder made), when a path is given."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")


# ---- progress lines -----------------------------------------------------------------------
# "done in 12s)", "done in 3m05s)", "done in 1h02m)" (progress.StageProgress) or "(1.2 s)"
DURATION = re.compile(r"(?:done in (?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?\)|\((\d+(?:\.\d+)?) s\))\s*$")


def stage_name(text: str) -> str:
    """A progress line's stage: the words before a ':' or the first number ("extracting: 5/9
    chunks" and "extracting 9 chunks" -> "extracting"); a line that starts with a number is
    named by the words after it ("3 documents to index, 9 chunks" -> "documents to index")."""
    head = text.split(":", 1)[0]
    name = re.split(r"[\d(,;]", head, maxsplit=1)[0].strip()
    if not name:
        words = re.sub(r"[\d./%]+", " ", head)
        name = re.split(r"[(,;]", words, maxsplit=1)[0].strip()
    return " ".join(name.split()) or text.strip()[:40]


def line_seconds(text: str) -> float | None:
    """The duration a line reports for its stage, or None."""
    match = DURATION.search(text)
    if not match:
        return None
    if match[4] is not None:
        return float(match[4])
    if not any(match[i] for i in (1, 2, 3)):
        return None
    return int(match[1] or 0) * 3600 + int(match[2] or 0) * 60 + int(match[3] or 0)


# ---- latencies, the Serve app, Ray -----------------------------------------------------------
def percentiles_ms(ms: Any, *percents: int) -> dict[str, float]:
    """``{"p50_ms": ...}``: the given percentiles of latencies ``ms`` (milliseconds), to 0.1 ms."""
    import numpy as np

    return {f"p{q}_ms": round(float(np.percentile(ms, q)), 1) for q in percents}


def serve_app(**app_args: Any) -> str:
    """The lightrag Serve app (``AppArgs`` fields) on a free local port of the Ray cluster this
    process joined; returns its URL."""
    from ray import serve

    from lightrag_ray.serve.app import AppArgs, build_app
    from tests.net_helpers import free_port

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config={"log_level": "WARNING"})
    serve.run(build_app(AppArgs(**app_args)), name="lightrag", route_prefix="/")
    return f"http://127.0.0.1:{port}"


def start_ray(cpus: int | None = None, *, address: str | None = "local", namespace: str | None = None,
              temp_dir: Path | None = None, object_store_mb: int | None = None) -> str:
    """``ray.init`` as every benchmark wants it (no dashboard, warnings only, no Ray Data progress
    bars): a new local cluster of ``cpus`` CPUs, or the one at ``address``; returns its GCS address."""
    import ray

    options: dict[str, Any] = {"namespace": namespace, "include_dashboard": False, "logging_level": logging.WARNING}
    if address == "local" or address is None:
        options.update(num_cpus=cpus)
        if temp_dir is not None:
            options["_temp_dir"] = str(temp_dir)
        if object_store_mb is not None:
            options["object_store_memory"] = object_store_mb * 1024 * 1024
    ray.init(address=address, **options)
    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    return ray.get_runtime_context().gcs_address


def stop_ray() -> None:
    import ray

    ray.shutdown()


def machine() -> str:
    """This machine for a table's caption: cores, CPU model, kernel."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}"


def markdown(headers: list[str], rows: list[list[Any]]) -> str:
    """A markdown table; columns of numbers right-aligned."""
    numeric = [all(isinstance(row[i], (int, float)) for row in rows) for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "|" + "".join("---:|" if n else "---|" for n in numeric)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or None (with a note) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return None
    return plt


def save_plot(fig: Any, ax: Any, path: Path, title: str, grid_axis: str = "both") -> None:
    """Title, grid and legend on ``ax``; write ``fig`` to ``path`` and close it."""
    ax.set_title(title)
    ax.grid(True, axis=grid_axis, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    pyplot().close(fig)


# ---- process sampling ----------------------------------------------------------------------
# a worker's command line before it sets its title: python [-u] [setup_worker.py] default_worker.py ...
WORKER_SCRIPTS = ("ray/_private/workers/default_worker.py", "ray/_private/workers/setup_worker.py")
RAY_AGENTS = re.compile(r"ray::(DashboardAgent|RuntimeEnvAgent)\b")  # per-node daemons with ray:: titles
Roles = tuple[tuple[str, "re.Pattern[str]"], ...]  # (role, pattern of actor class or title), first match wins


def is_starting_worker(command_line: str) -> bool:
    """A Ray worker that has not set its title yet: ``python [-u] .../default_worker.py ...``
    (the raylet's own command line names that script too, further on)."""
    args = command_line.split()
    return bool(args) and Path(args[0]).name.startswith("python") and any(a.endswith(WORKER_SCRIPTS) for a in args[1:3])


def is_ray_worker(title: str) -> bool:
    """A Ray worker process (not a daemon) by its title or command line."""
    return (title.startswith("ray::") and not RAY_AGENTS.match(title)) or is_starting_worker(title)


def first_role(name: str, roles: Roles) -> str | None:
    """The first role whose pattern ``name`` (actor class or process title) matches, or None."""
    return next((role for role, pattern in roles if pattern.search(name)), None)


def ray_worker_role(title: str, actor_class: str, roles: Roles) -> str:
    """The role of a Ray worker: by its actor class, else its title's first word, else "other ray workers"."""
    name = title.split()[0][5:] if title.startswith("ray::") else ""
    return first_role(actor_class, roles) or first_role(name, roles) or "other ray workers"


def actor_classes() -> dict[int, str]:
    """pid -> actor class name of the live actors, from the GCS (no dashboard needed)."""
    from ray._private import state

    return {int(a["Pid"]): a["ActorClassName"] for a in state.actors().values()
            if a.get("Pid") and a.get("State") == "ALIVE"}


def cpu_seconds(proc: Any) -> float:
    """User + system CPU-seconds of a psutil process (not its children's: those are sampled themselves)."""
    times = proc.cpu_times()
    return times.user + times.system


class Poller:
    """Calls ``tick`` now and every ``every`` s on a daemon thread until ``stop``; a failed
    tick is logged, not fatal."""

    def __init__(self, every: float) -> None:
        self.every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=type(self).__name__, daemon=True)

    def tick(self) -> None:
        raise NotImplementedError

    def start(self) -> Any:
        self.tick()  # the baseline
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.tick()
            except Exception as error:  # noqa: BLE001 - a failed sample must not end the run
                print(f"process sample failed: {error}", file=sys.stderr, flush=True)


class ActorTable:
    """:func:`actor_classes`, asked at most every ``every`` s; empty for good once the GCS fails."""

    def __init__(self, every: float, enabled: bool = True) -> None:
        self.every, self.enabled = every, enabled
        self.classes: dict[int, str] = {}
        self.at = -1e9

    def refresh(self) -> dict[int, str]:
        if self.enabled and time.monotonic() - self.at >= self.every:
            self.at = time.monotonic()
            try:
                self.classes.update(actor_classes())
            except Exception as error:  # noqa: BLE001 - the titles still classify the workers
                print(f"actor table unavailable: {error}", file=sys.stderr, flush=True)
                self.enabled = False
        return self.classes


class TreeMemory(Poller):
    """The peak summed RSS (bytes) of a process and its descendants, sampled every ``every`` s."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        super().__init__(every)
        self.pid, self.peak = pid, 0
        self.start()

    def tick(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        total = 0
        for proc in procs:
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                pass
        self.peak = max(self.peak, total)

    def stop(self) -> int:  # type: ignore[override]
        super().stop()
        return self.peak
