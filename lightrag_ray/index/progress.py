"""Progress of a long stage as a few lines: done/total, rate and ETA, at a bounded rate."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

Progress = Callable[[str], None]


def print_progress(message: str) -> None:
    """Default progress sink: one line per step on stderr."""
    print(f"[lightrag-ray] {message}", file=sys.stderr, flush=True)


class StageProgress:
    """Counts the work of one stage and reports it through ``say`` at most once every
    ``interval_s`` seconds, plus once when the stage is done."""

    def __init__(self, say: Progress, label: str, total: int | None, unit: str, interval_s: float = 10.0,
                 on_advance: Callable[[int, int | None], None] | None = None) -> None:
        """``on_advance(done, total)``: told of every advance (the run's metrics)."""
        self.say, self.label, self.total, self.unit = say, label, total, unit
        self.interval_s = interval_s
        self.on_advance = on_advance
        self.done = 0
        self.started = self.last = time.monotonic()
        self.lock = threading.Lock()

    def advance(self, count: int) -> None:
        """Record ``count`` more items done; report if due."""
        with self.lock:
            self.done += count
            if self.on_advance is not None:
                self.on_advance(self.done, self.total)
            now = time.monotonic()
            finished = self.total is not None and self.done >= self.total
            if not finished and now - self.last < self.interval_s:
                return
            self.last = now
        self.say(self.line(now - self.started))

    def line(self, elapsed: float) -> str:
        """e.g. ``embedding chunks: 640/6401 chunks (53/s, ETA 1m49s)``."""
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.total is None:  # a stream whose size is unknown until it ends
            return f"{self.label}: {self.done} {self.unit} ({rate:.0f}/s)"
        head = f"{self.label}: {self.done}/{self.total} {self.unit} ({rate:.0f}/s"
        if self.done >= self.total:
            return f"{head}, done in {_duration(elapsed)})"
        eta = (self.total - self.done) / rate if rate > 0 else None
        return f"{head}, ETA {_duration(eta) if eta is not None else '?'})"


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
