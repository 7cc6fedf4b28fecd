"""The actor that holds every lightrag metric (one per cluster, detached, named).

Ray exports a process's metrics labelled with its worker id and drops them when the process
ends, so figures recorded by a Ray Data worker or an indexing driver would vanish with it, and
series of many short-lived processes would not add up. Processes therefore send their buffered
figures here (``client.MetricsClient``) and this long-lived actor records them: one series per
label set for the whole cluster, kept after the run that produced it ended.

Ray's metrics agent drops a gauge that was not set again within two report intervals
(``RAY_metrics_report_interval_ms``, 10 s by default), so a gauge set once (an indexing run's
stage, a stalled run's last progress) would vanish from Prometheus after 20 s: the recorder sets
every gauge again each ``GAUGE_REFRESH_S``."""

from __future__ import annotations

import threading
import time
from typing import Any

import ray
from ray.util import metrics as ray_metrics

from lightrag_ray.metrics.catalog import Batch, MetricSpec, Tags, spec

NAME = "lightrag_metrics"
NAMESPACE = "lightrag_metrics"
OTHER_WORKSPACES = "other"  # the label of workspaces past the cap
ALL_WORKSPACES = "all"  # the label when workspace labels are off
GAUGE_REFRESH_S = 1.0  # under the agent's eviction age, two report intervals of at least 1 s


def _make(metric: MetricSpec) -> Any:
    if metric.kind == "counter":
        return ray_metrics.Counter(metric.ray_name, description=metric.help, tag_keys=metric.tags)
    if metric.kind == "gauge":
        return ray_metrics.Gauge(metric.ray_name, description=metric.help, tag_keys=metric.tags)
    return ray_metrics.Histogram(metric.ray_name, description=metric.help, boundaries=list(metric.buckets),
                                 tag_keys=metric.tags)


class MetricsRecorder:
    """Records batches of figures into Ray's metrics; caps the workspace label."""

    def __init__(self) -> None:
        self._metrics: dict[str, Any] = {}
        self._workspaces: list[str] = []  # named workspaces, in the order they first reported
        self._gauges: dict[tuple[str, Tags], float] = {}  # every gauge's last value, set again periodically
        self._lock = threading.Lock()
        threading.Thread(target=self._refresh_gauges, name="gauge-refresh", daemon=True).start()

    def _refresh_gauges(self) -> None:
        while True:
            time.sleep(GAUGE_REFRESH_S)
            with self._lock:
                for (name, pairs), value in self._gauges.items():
                    self._metrics[name].set(value, tags=dict(pairs))

    def _workspace(self, name: str, limit: int) -> str:
        """``name`` while fewer than ``limit`` workspaces have a label of their own, else "other"."""
        if limit <= 0:
            return ALL_WORKSPACES
        if name in self._workspaces:
            return name
        if len(self._workspaces) < limit:
            self._workspaces.append(name)
            return name
        return OTHER_WORKSPACES

    def record(self, batch: Batch, workspace_labels: int) -> int:
        """Apply one process's buffered figures; the number of series touched."""
        with self._lock:
            return self._record(batch, workspace_labels)

    def _record(self, batch: Batch, workspace_labels: int) -> int:
        touched = 0
        for name, series in batch.items():
            metric = spec(name)
            recorder = self._metrics.get(name) or self._metrics.setdefault(name, _make(metric))
            for pairs, value in series.items():
                tags = dict(pairs)
                if "workspace" in tags:
                    tags["workspace"] = self._workspace(tags["workspace"], workspace_labels)
                if metric.kind == "counter":
                    recorder.inc(value, tags=tags)
                elif metric.kind == "gauge":
                    recorder.set(value, tags=tags)
                    self._gauges[name, tuple(sorted(tags.items()))] = value
                else:
                    for observed in value:
                        recorder.observe(observed, tags=tags)
                touched += 1
        return touched


def recorder_handle() -> Any:
    """The cluster's recorder actor, started on first use (no CPU, restarted if it dies)."""
    actor = ray.remote(MetricsRecorder).options(
        name=NAME, namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
        num_cpus=0, max_restarts=-1,
    )
    return actor.remote()
