"""Recording metrics from any process: ``metrics().count("index_chunks", 3, workspace=..., outcome=...)``.

Figures are summed in a per-process buffer (a dict update under a lock) and sent to the
cluster's recorder actor (``recorder``) every ``FLUSH_INTERVAL_S`` by a daemon thread, and on
``flush()``, which a short-lived process (an indexing driver, a Ray Data worker after a batch)
calls before its figures could be lost. Nothing is sent while metrics are off or this process is
not connected to Ray; a name or label set not in ``catalog`` raises (a programming error).
Ray is imported only by a process that already uses it, so pure logic (the query engine) may record."""

from __future__ import annotations

import atexit
import sys
import threading
import time
from typing import Any

from lightrag_ray.config import MetricsConfig
from lightrag_ray.metrics.catalog import Batch, spec

FLUSH_INTERVAL_S = 2.0
FLUSH_WAIT_S = 10.0


class MetricsClient:
    """One process's buffer of figures for the recorder actor."""

    def __init__(self, config: MetricsConfig | None = None) -> None:
        self.config = config or MetricsConfig()
        self._lock = threading.Lock()
        self._batch: Batch = {}
        self._thread: threading.Thread | None = None
        self._recorder: Any = None

    def configure(self, config: MetricsConfig) -> None:
        """Use ``config`` from now on (a process learns its settings after it imports this)."""
        self.config = config

    def count(self, name: str, value: float = 1.0, **tags: str) -> None:
        """Add ``value`` to counter ``name``."""
        if value:
            self._add(name, "counter", tags, lambda old: (old or 0.0) + value)

    def gauge(self, name: str, value: float, **tags: str) -> None:
        """Set gauge ``name`` to ``value``."""
        self._add(name, "gauge", tags, lambda old: float(value))

    def observe(self, name: str, value: float, **tags: str) -> None:
        """Add one observation to histogram ``name``."""
        self._add(name, "histogram", tags, lambda old: [*(old or []), float(value)])

    def _add(self, name: str, kind: str, tags: dict[str, str], update: Any) -> None:
        if not self.config.enabled:
            return
        metric = spec(name)
        if metric.kind != kind or set(tags) != set(metric.tags):
            raise ValueError(f"metric {name} is a {metric.kind} labelled {metric.tags}, "
                             f"recorded as a {kind} with {tuple(tags)}")
        key = tuple(sorted((label, str(value)) for label, value in tags.items()))
        with self._lock:
            series = self._batch.setdefault(name, {})
            series[key] = update(series.get(key))
            if self._thread is None:
                self._thread = threading.Thread(target=self._flush_forever, name="lightrag-metrics", daemon=True)
                self._thread.start()
                atexit.register(self.flush, True)

    def _flush_forever(self) -> None:
        while True:
            time.sleep(FLUSH_INTERVAL_S)
            self.flush()

    def flush(self, wait: bool = False) -> None:
        """Send the buffered figures now (``wait``: until the recorder has them, at most
        ``FLUSH_WAIT_S``). Figures that cannot be sent are dropped, never raised."""
        with self._lock:
            batch, self._batch = self._batch, {}
        ray = sys.modules.get("ray")
        if not batch or ray is None or not ray.is_initialized():
            return
        try:
            if self._recorder is None:
                from lightrag_ray.metrics.recorder import recorder_handle

                self._recorder = recorder_handle()
            sent = self._recorder.record.remote(batch, self.config.workspace_labels)
            if wait:
                ray.get(sent, timeout=FLUSH_WAIT_S)
        except Exception:  # noqa: BLE001 - metrics never fail the work they describe
            self._recorder = None


_CLIENT = MetricsClient()


def metrics() -> MetricsClient:
    """This process's metrics client."""
    return _CLIENT


def workspace_label(workspace: str) -> str:
    """The ``workspace`` label of a workspace path or URI: its last folder's name."""
    return workspace.rstrip("/").rsplit("/", 1)[-1] or workspace
