"""Small network helpers for tests that start servers on 127.0.0.1."""

from __future__ import annotations

import os
import socket
import subprocess
import atexit
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


class ServerProcess:
    """A server run as a child process: a subclass's ``start`` sets ``process`` (and registers
    ``stop`` with atexit); ``stop`` ends it; ``with`` starts and stops it."""

    stop_timeout_s = 30.0  # SIGTERM, then SIGKILL after this long
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self, timeout_s: float | None = None) -> None:
        """SIGTERM (the server shuts down cleanly), SIGKILL after ``timeout_s`` (default ``stop_timeout_s``)."""
        process, self.process = self.process, None
        if process is None:
            return
        atexit.unregister(self.stop)
        process.terminate()
        try:
            process.wait(timeout=self.stop_timeout_s if timeout_s is None else timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> Any:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
