"""User-facing error text: one line, no traceback, no terminal colour codes."""

from __future__ import annotations

import re
from typing import TypeVar

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MAX_CHARS = 300


def short_error(exc: BaseException) -> str:
    """One line naming what failed: the root cause of a remote (Ray) error, its first
    line, without ANSI codes, cut to ``MAX_CHARS``."""
    cause = getattr(exc, "cause", None)  # RayTaskError wraps the cause
    while isinstance(cause, BaseException) and cause is not exc:
        exc, cause = cause, getattr(cause, "cause", None)
    text = _ANSI.sub("", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    plain = first and isinstance(exc, (OSError, ValueError, RuntimeError))  # messages written for users
    message = first if plain else f"{type(exc).__name__}: {first}".rstrip(": ")
    return message if len(message) <= MAX_CHARS else message[: MAX_CHARS - 3] + "..."


T = TypeVar("T")


def required(value: T | None, what: str) -> T:
    """``value``, which must be there by now: a RuntimeError naming ``what`` otherwise (a step
    of a run or an opening asked for something not opened yet)."""
    if value is None:
        raise RuntimeError(f"{what} is not open yet")
    return value
