"""Connecting to Ray and sizing actor pools (the only Ray set-up code)."""

from __future__ import annotations

import logging
import os
from typing import Any

import ray

from lightrag_ray.config import Settings


def ensure_ray(settings: Settings) -> None:
    """Join ``settings.ray.address`` (or start a local cluster) unless already connected."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(
        address=settings.ray.address,
        namespace=settings.ray.namespace,
        include_dashboard=False,
        logging_level=logging.WARNING,
    )
    ray.data.DataContext.get_current().enable_progress_bars = True


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
