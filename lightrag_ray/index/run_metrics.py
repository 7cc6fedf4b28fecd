"""An indexing run's figures for Prometheus (metrics.catalog): its counts sent as they grow,
its current stage and progress, and how it ended. The driver records them; they reach the
cluster's recorder actor within seconds, and for good when the run ends (``ended`` waits)."""

from __future__ import annotations

import time
from typing import Any

from lightrag_ray.metrics.client import metrics, workspace_label


def report_totals(report: Any) -> dict[tuple[str, str], int]:
    """(metric, outcome label) -> the run's total so far, from its IndexReport (a document that
    replaces an older version counts as replaced, not new)."""
    return {
        ("index_documents", "new"): max(report.docs_new - report.sources_replaced, 0),
        ("index_documents", "replaced"): report.sources_replaced,
        ("index_documents", "skipped"): report.docs_skipped,
        ("index_documents", "failed"): report.docs_failed,
        ("index_documents", "removed"): report.docs_removed,
        ("index_chunks", "extracted"): report.chunks_extracted,
        ("index_chunks", "cached"): report.chunks_cached,
        ("index_chunks", "failed"): report.chunks_failed,
        ("vectors_written", ""): report.vectors_upserted,
    }


class RunMetrics:
    """One run's figures, labelled by its workspace."""

    def __init__(self, workspace: str) -> None:
        self.workspace = workspace_label(workspace)
        self.stage = ""
        self.sent: dict[tuple[str, str], int] = {}
        self.started = time.monotonic()

    def _gauge(self, name: str, value: float, **tags: str) -> None:
        metrics().gauge(name, value, workspace=self.workspace, **tags)

    def begin(self) -> None:
        """The run started."""
        self._gauge("index_running", 1)
        self.touch()

    def touch(self) -> None:
        """The run made progress now (the alert on a stalled run reads this)."""
        self._gauge("index_last_progress_timestamp_seconds", time.time())

    def enter(self, stage: str) -> None:
        """The run entered ``stage`` (the previous one's gauge drops to 0)."""
        if self.stage:
            self._gauge("index_stage", 0, stage=self.stage)
            self._gauge("index_stage_progress", 1, stage=self.stage)
        self.stage = stage
        self._gauge("index_stage", 1, stage=stage)
        self._gauge("index_stage_progress", 0, stage=stage)
        self.touch()

    def progress(self, done: int, total: int | None) -> None:
        """``done`` of the current stage's ``total`` items (None: unknown yet) are done."""
        if total:
            self._gauge("index_stage_progress", min(done / total, 1.0), stage=self.stage)
        self.touch()

    def counts(self, report: Any) -> None:
        """Send what the report's counts grew by since the last call."""
        for (name, outcome), value in report_totals(report).items():
            self._send(name, outcome, value)

    def _send(self, name: str, outcome: str, value: int) -> None:
        grown = value - self.sent.get((name, outcome), 0)
        if grown > 0:
            self.sent[(name, outcome)] = value
            tags = {"outcome": outcome} if outcome else {}
            metrics().count(name, grown, workspace=self.workspace, **tags)

    def ended(self, outcome: str, report: Any) -> None:
        """The run ended (``outcome``: ok, failed, cancelled); waits until the recorder has its figures."""
        self.counts(report)
        if self.stage:
            self._gauge("index_stage", 0, stage=self.stage)
        self._gauge("index_running", 0)
        metrics().count("index_runs", 1, workspace=self.workspace, outcome=outcome)
        metrics().observe("index_run_seconds", time.monotonic() - self.started, workspace=self.workspace)
        metrics().flush(wait=True)
