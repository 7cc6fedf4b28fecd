"""Small network helpers for tests that start servers on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(check: Callable[[], bool], timeout_s: float, what: str, process: subprocess.Popen | None = None,
               log_path: Path | None = None) -> None:
    """Poll ``check`` until it holds; raise (with the log's tail) on timeout or if ``process`` ended."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if process is not None and process.poll() is not None or time.monotonic() > deadline:
            tail = log_path.read_text(errors="replace")[-3000:] if log_path and log_path.exists() else ""
            raise RuntimeError(f"{what} did not come up{' (it exited)' if process and process.poll() is not None else ''}"
                               f"\n{tail}")
        time.sleep(0.5)


def answers(url: str, path: str) -> bool:
    """Whether ``url + path`` answers 200 now (False while it refuses or fails)."""
    try:
        return httpx.get(url + path, timeout=10).status_code == 200
    except httpx.HTTPError:
        return False


EVENT_LOOP_DESCRIPTORS = ("anon_inode:[eventpoll]", "anon_inode:[io_uring]", "anon_inode:[eventfd]")


def event_loop_descriptors() -> int:
    """How many descriptors of this process are of the kinds an event loop opens (an epoll; uvloop
    also an io_uring and an eventfd). Ray opens its own at start, not per call."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") in EVENT_LOOP_DESCRIPTORS
        except OSError:  # closed meanwhile (the listing's own descriptor)
            pass
    return count
