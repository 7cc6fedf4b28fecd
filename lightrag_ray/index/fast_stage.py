"""Ray Data stage for "fast" extraction mode: heuristics instead of LLM calls.

Same constructor and output rows as :class:`lightrag_ray.index.llm_stages.ExtractChunks`
(the cache row columns plus ``error``), with ``requests`` = 0. A batch is processed
sequentially (a few ms per chunk) and its cache rows are written as one part file.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from lightrag_ray.config import Settings
from lightrag_ray.core.fast_extraction import CHINESE_NAMES, fast_extract
from lightrag_ray.storage.extraction_cache import SCHEMA, extraction_fingerprint, to_row, write_rows
from lightrag_ray.storage.workspace import Workspace

COLUMNS = [*SCHEMA.names, "error"]


def fast_language(setting: str) -> str:
    """The language hint for :func:`fast_extract`: "zh" when the setting names Chinese,
    else "auto" (the default "English" describes LLM answers, not the documents)."""
    return "zh" if setting.strip().lower() in CHINESE_NAMES else "auto"


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class FastExtractChunks:
    """Chunk rows -> extraction rows by :func:`fast_extract`; results are cached at once."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = Settings.model_validate(settings)
        self.workspace = Workspace(self.settings.workspace)
        self.fingerprint = extraction_fingerprint(self.settings)
        self.language = fast_language(self.settings.extraction.language)

    def __call__(self, batch: dict[str, np.ndarray]) -> pd.DataFrame:
        rows = []
        for index in range(len(batch["chunk_id"])):
            chunk_id, doc_id = _text(batch["chunk_id"][index]), _text(batch["doc_id"][index])
            file_path = _text(batch["file_path"][index]) if "file_path" in batch else ""
            result = fast_extract(_text(batch["text"][index]), chunk_id, file_path, self.language)
            rows.append(to_row(chunk_id, doc_id, self.fingerprint, result, 0))
        if rows:
            write_rows(self.workspace, rows)
        return pd.DataFrame([{**row, "error": ""} for row in rows], columns=COLUMNS)


def extraction_stage_class(settings: Settings | dict[str, Any]) -> type:
    """FastExtractChunks for extraction mode "fast", else the LLM stage ExtractChunks."""
    if isinstance(settings, dict):
        settings = Settings.model_validate(settings)
    if settings.extraction.mode == "fast":
        return FastExtractChunks
    from lightrag_ray.index.llm_stages import ExtractChunks

    return ExtractChunks
