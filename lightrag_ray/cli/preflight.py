"""Checks run before Ray starts, so a command that cannot work says why in a second:
input paths, the workspace's lock, the LLM the extraction mode needs, the backend's package."""

from __future__ import annotations

import importlib.util

from lightrag_ray.config import ENV_PREFIX, Settings
from lightrag_ray.index.documents import list_input_files
from lightrag_ray.models.llm_processor import require_vllm
from lightrag_ray.storage.vectors import lite_file_in_use


class PreflightError(RuntimeError):
    """A command that cannot run as asked; the message says what to do."""


def no_llm_message(settings: Settings) -> str | None:
    """Why indexing cannot run with these settings (extraction needs an LLM), or None."""
    if settings.llm.backend == "none" and settings.extraction.mode == "llm":
        return ("no LLM configured. Pass --llm-base-url http://HOST:PORT/v1 (any OpenAI-compatible "
                f"server) or set {ENV_PREFIX}LLM__BASE_URL, or --extraction-mode fast (no LLM).")
    return None


def check_backend(settings: Settings) -> None:
    """The LLM backend's Python package is installed."""
    try:
        require_vllm(settings.llm)
    except ImportError as exc:
        raise PreflightError(str(exc)) from None
    if settings.llm.backend == "transformers" and importlib.util.find_spec("transformers") is None:
        raise PreflightError("llm backend 'transformers' needs the transformers package: pip install "
                             "transformers (or use --llm-base-url with a server)")


def check_workspace_free(settings: Settings) -> None:
    """No other process (a running `lightrag-ray serve`, another index) holds the workspace."""
    uri = settings.milvus_uri()
    if lite_file_in_use(uri):
        raise PreflightError(
            f"workspace {settings.workspace} is in use by another process (a running `lightrag-ray serve` "
            "or index). Stop it first, or send documents to that server (POST /documents/upload).")


def check_index(settings: Settings, paths: list[str]) -> None:
    """Everything `index` can check before starting Ray."""
    list_input_files(paths, exclude=settings.workspace)  # raises FileNotFoundError for a wrong path
    message = no_llm_message(settings)
    if message:
        raise PreflightError(message)
    check_backend(settings)
    check_workspace_free(settings)
