"""Connecting to Ray and sizing actor pools (the only Ray set-up code)."""

from __future__ import annotations

import logging
import os
import signal
import time
import warnings
from typing import Any

import ray
from ray.util.annotations import RayDeprecationWarning

from lightrag_ray.config import Settings

# Ray starts its workers at niceness 15 (its `worker_niceness`), behind its own daemons at 0;
# this variable in a runtime_env sets it for the workers started with that runtime_env.
WORKER_NICENESS_ENV = "RAY_worker_niceness"
SERVING_NICENESS = 0  # query-serving replicas and the graph shards they read
BACKGROUND_NICENESS = 19  # an insert job's workers on nodes that also answer queries (the lowest)


# A cluster started here has no dashboard, so nothing reads Ray's task events, while its GCS
# keeps them for the last 100k tasks: a served workspace's GCS grew ~1.2 MiB a minute under
# the soak's traffic with them, and stayed flat without (issue 29). glibc's malloc raises its
# mmap threshold as large blocks are freed, then serves torch's tensors from a heap that
# fragments: an embedding model fed batches of varying length grew 19% in 2 minutes, and
# stayed flat (+0.8%) with the threshold fixed at 128 KiB, at ~8% of its embedding rate
# (jemalloc was as flat at full rate, but is not on every host; docs/benchmarks.md). Clusters of
# `ray start` (KubeRay) keep their task events and get the threshold from the image
# (cluster/docker/Dockerfile); an environment variable of the same name overrides these defaults.
LOCAL_CLUSTER_ENV = {"RAY_task_events_report_interval_ms": "0", "MALLOC_MMAP_THRESHOLD_": "131072"}


def local_cluster_defaults() -> None:
    """Set this process's defaults for a Ray cluster it may start (its processes inherit them)."""
    for name, value in {"RAY_AUTH_MODE": "disabled", **LOCAL_CLUSTER_ENV}.items():
        os.environ.setdefault(name, value)


def ensure_ray(settings: Settings) -> None:
    """Join ``settings.ray.address`` (or start a local cluster) unless already connected.

    Ray's own output (worker logs, Ray Data's INFO lines and progress bars) is off unless
    ``ray.verbose``; the pipeline reports its stages itself."""
    if ray.is_initialized():
        return
    verbose = settings.ray.verbose
    local_cluster_defaults()
    if not verbose:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # models' "Loading weights" bars
        warnings.filterwarnings("ignore", category=RayDeprecationWarning)
    on_sigterm = signal.getsignal(signal.SIGTERM)
    ray.init(
        address=settings.ray.address,
        namespace=settings.ray.namespace,
        include_dashboard=False,
        logging_level=logging.INFO if verbose else logging.ERROR,
        log_to_driver=verbose,
    )
    if callable(on_sigterm):  # the caller's handler (the CLI's clean stop), not Ray's stack dump
        signal.signal(signal.SIGTERM, on_sigterm)
    quiet_ray_data(not verbose)


def quiet_ray_data(quiet: bool = True) -> None:
    """Ray Data in this process: no progress bars or INFO lines on the console when ``quiet``
    (they still go to Ray's session log files)."""
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = not quiet
    context.print_on_execution_start = not quiet
    for handler in logging.getLogger("ray.data").handlers:
        if not isinstance(handler, logging.FileHandler) and "File" not in type(handler).__name__:
            handler.setLevel(logging.ERROR if quiet else logging.INFO)


def actor_pool(size: int, num_cpus: float, num_gpus: float = 0.0) -> dict[str, Any]:
    """``map_batches`` keyword arguments for a pool of ``size`` actors, all started at once
    and given one batch at a time: each actor's LLM concurrency is its share of the
    configured total, so a batch queued behind another on a busy actor (while a slower
    starting one idles) would halve the requests in flight."""
    options: dict[str, Any] = {
        "compute": ray.data.ActorPoolStrategy(size=size, max_tasks_in_flight_per_actor=1),
        "num_cpus": num_cpus,
    }
    if num_gpus:
        options["num_gpus"] = num_gpus
    return options


def lower_thread_priority(niceness: int) -> None:
    """Run the calling thread at ``niceness`` unless it is already nicer (Linux: niceness is
    per thread, and threads started later inherit it; lowering it back needs privileges)."""
    os.setpriority(os.PRIO_PROCESS, 0, max(niceness, os.getpriority(os.PRIO_PROCESS, 0)))


def niceness_options(niceness: int | None) -> dict[str, Any]:
    """Ray remote options whose workers start at ``niceness`` (0-19; None: Ray's default,
    15). Tasks and actors started from such a worker inherit it unless they set their own."""
    if niceness is None:
        return {}
    return {"runtime_env": {"env_vars": {WORKER_NICENESS_ENV: str(niceness)}}}


def named_actor(name: str, namespace: str | None, wait_s: float = 10.0) -> Any | None:
    """The actor called ``name`` in ``namespace``, or None when there is none.

    For a few milliseconds after the driver that made a (non-detached) actor dies, the actor is
    still listed while Ray has already dropped its class, and ``ray.get_actor`` fails on an
    assertion inside Ray (seen in CI on a killed indexing run). That actor is on its way out:
    this waits up to ``wait_s`` for Ray to finish removing it."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return ray.get_actor(name, namespace=namespace)
        except ValueError:
            return None
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
