"""A query's figures for Prometheus (metrics.catalog): the time of each step's calls, what its
context holds, and, for the Serve middleware that counts requests, which mode it ran in.

The middleware puts a ``QueryRecord`` in ``CURRENT`` before the route runs; the engine fills it
in (tasks the route starts share the record: a context copy keeps the same object)."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from lightrag_ray.metrics.client import metrics, workspace_label

T = TypeVar("T")
NO_MODE = "none"  # a request that failed before its query began (e.g. a malformed body)


@dataclass
class QueryRecord:
    """What a served request's query was: its mode and workspace label."""

    mode: str = NO_MODE
    workspace: str = ""


CURRENT: ContextVar[QueryRecord | None] = ContextVar("lightrag_query", default=None)
_MODE: ContextVar[str] = ContextVar("lightrag_query_mode", default=NO_MODE)


def begin_query(mode: str, workspace: str) -> None:
    """A query in ``mode`` starts in this task (its steps are labelled with it)."""
    _MODE.set(mode)
    record = CURRENT.get()
    if record is not None:
        record.mode, record.workspace = mode, workspace_label(workspace)


async def timed(step: str, work: Awaitable[T]) -> T:
    """``await work``, its wall time observed as one call of ``step``."""
    started = time.perf_counter()
    try:
        return await work
    finally:
        metrics().observe("query_step_seconds", time.perf_counter() - started, mode=_MODE.get(), step=step)


def observe_step(step: str, seconds: float) -> None:
    """One call of ``step`` that took ``seconds`` (a stream, timed by its reader)."""
    metrics().observe("query_step_seconds", seconds, mode=_MODE.get(), step=step)


def context_returned(mode: str, passages: int, graph_items: int) -> None:
    """A context of ``passages`` chunks and ``graph_items`` entities and relations was built."""
    metrics().count("query_passages", passages, mode=mode)
    metrics().count("query_graph_items", graph_items, mode=mode)
