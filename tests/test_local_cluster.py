"""A served workspace's memory must not grow with its traffic (issue 29's soak): a cluster the CLI
starts records no task events unless the operator asks, and the graph shards, which every query
reads, record none even then; its workers' malloc keeps a fixed mmap threshold. Each case starts
its own cluster in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVENTS_ENV = "RAY_task_events_report_interval_ms"
MMAP_ENV = "MALLOC_MMAP_THRESHOLD_"


def _probe(tmp_path: Path, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", EVENTS_ENV, MMAP_ENV)}
    done = subprocess.run([sys.executable, "-m", "tests.local_cluster_probe", str(tmp_path / "ws")], cwd=ROOT,
                          env={**clean, "PYTHONPATH": str(ROOT), **env}, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.integration  # starts a Ray cluster in a subprocess
def test_a_cluster_the_cli_starts_keeps_no_task_events_and_fixes_the_mmap_threshold(tmp_path):
    seen = _probe(tmp_path)
    assert seen["names"] == []
    assert seen["malloc"] == {MMAP_ENV: "131072"}


@pytest.mark.integration
def test_with_task_events_asked_for_the_shards_still_record_none(tmp_path):
    seen = _probe(tmp_path, **{EVENTS_ENV: "200", MMAP_ENV: "65536"})
    assert seen["malloc"] == {MMAP_ENV: "65536"}  # the operator's settings win
    names = seen["names"]
    assert any("plain_task" in name for name in names), names
    assert not any("GraphShard" in name for name in names), names
