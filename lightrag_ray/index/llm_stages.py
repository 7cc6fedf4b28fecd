"""Ray Data stages that call the LLM: chunk extraction and description summaries.

Each stage is a callable class run in an actor pool. An actor keeps one LLM client and
one event loop, and works on a whole batch concurrently (the client bounds requests in
flight), so many requests are outstanding per actor and across actors.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pandas as pd

from lightrag_ray.config import Settings
from lightrag_ray.core import prompts
from lightrag_ray.core.parsing import parse_extraction
from lightrag_ray.core.records import Extraction
from lightrag_ray.index.summaries import summarize, summary_limits
from lightrag_ray.models.llm import LLMError, make_llm_client
from lightrag_ray.storage.extraction_cache import extraction_fingerprint, to_row, write_rows
from lightrag_ray.storage.workspace import Workspace


def _rows(batch: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    keys = list(batch)
    return [dict(zip(keys, values)) for values in zip(*(batch[k] for k in keys))]


def _columns(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows)


class _LLMStage:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = Settings.model_validate(settings)
        self.client = make_llm_client(self.settings.llm)
        self.loop = asyncio.new_event_loop()

    def _run_all(self, coroutines: list[Any]) -> list[Any]:
        async def gather() -> list[Any]:
            return await asyncio.gather(*coroutines)

        return self.loop.run_until_complete(gather())


class ExtractChunks(_LLMStage):
    """Chunk rows -> extraction rows; each result is cached in the workspace at once."""

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__(settings)
        self.workspace = Workspace(self.settings.workspace)
        self.fingerprint = extraction_fingerprint(self.settings)

    def __call__(self, batch: dict[str, np.ndarray]) -> pd.DataFrame:
        return _columns(self._run_all([self._extract(row) for row in _rows(batch)]))

    async def _extract(self, chunk: dict[str, Any]) -> dict[str, Any]:
        ex = self.settings.extraction
        messages = prompts.extraction_messages(chunk["text"], ex.entity_types, ex.language)
        requests = 0
        try:
            answer = await self.client.complete(messages)
            requests += 1
            result = extraction_result(answer, chunk["chunk_id"], chunk["file_path"])
            for _ in range(ex.gleaning_rounds):
                messages = prompts.gleaning_messages(messages, answer)
                answer = await self.client.complete(messages)
                requests += 1
                extra = parse_extraction(answer, chunk["chunk_id"], chunk["file_path"])
                if not (extra.entities or extra.relations):
                    break
                result.extend(extra)
        except LLMError as exc:
            failed = to_row(chunk["chunk_id"], chunk["doc_id"], self.fingerprint, Extraction(), requests)
            return {**failed, "error": str(exc)}
        row = to_row(chunk["chunk_id"], chunk["doc_id"], self.fingerprint, result, requests)
        await asyncio.to_thread(write_rows, self.workspace, [row])
        return {**row, "error": ""}


def extraction_result(answer: str, chunk_id: str, file_path: str) -> Extraction:
    """The records of an extraction answer; LLMError when it is unusable: no records and no
    sign of a finished answer (the chunk then counts as failed and is retried next run)."""
    result = parse_extraction(answer, chunk_id, file_path)
    if not (result.entities or result.relations) and (result.dropped > 0 or prompts.COMPLETE not in answer):
        raise LLMError(f"unparseable LLM output ({result.dropped} malformed records): {answer[:120]!r}")
    return result


class SummarizeItems(_LLMStage):
    """Rows (kind, name, hash, base, fragments) -> rows (hash, summary, error)."""

    def __call__(self, batch: dict[str, np.ndarray]) -> pd.DataFrame:
        return _columns(self._run_all([self._summarize(row) for row in _rows(batch)]))

    async def _summarize(self, item: dict[str, Any]) -> dict[str, Any]:
        try:
            summary = await summarize(
                self.client, item["kind"], item["name"], list(item["fragments"]), str(item.get("base") or ""),
                **summary_limits(self.settings),
            )
        except LLMError as exc:
            return {"hash": item["hash"], "summary": "", "error": str(exc)}
        return {"hash": item["hash"], "summary": summary, "error": ""}
