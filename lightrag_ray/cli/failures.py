"""How a command fails: one or two lines on stderr, the traceback in a log file."""

from __future__ import annotations

import datetime as dt
import os
import sys
import traceback
from pathlib import Path

from lightrag_ray.core.errors import short_error


def log_file() -> Path:
    """Where failures are logged: ``$XDG_CACHE_HOME/lightrag-ray/errors.log`` (~/.cache by default)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "lightrag-ray" / "errors.log"


def is_user_error(exc: BaseException) -> bool:
    """An error whose message was written for the user (a wrong path, setting or workspace),
    as opposed to one raised inside Ray or a library."""
    from_ray = hasattr(exc, "cause") or type(exc).__module__.startswith("ray")
    return isinstance(exc, (FileNotFoundError, ValueError, RuntimeError)) and not from_ray


def report_failure(exc: BaseException, argv: list[str]) -> int:
    """Print what failed (the traceback goes to ``log_file()``) and return the exit code."""
    if is_user_error(exc):
        print(f"error: {exc}", file=sys.stderr)
        return 2
    path = log_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as log:
            log.write(f"--- {dt.datetime.now().isoformat(timespec='seconds')} lightrag-ray {' '.join(argv)}\n")
            log.write("".join(traceback.format_exception(exc)))
        where = f" (details in {path})"
    except OSError:
        where = ""
    print(f"error: {short_error(exc)}{where}", file=sys.stderr)
    return 1
