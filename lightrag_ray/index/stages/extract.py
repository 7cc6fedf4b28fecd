"""Stage ``extract``: chunk rows -> extraction rows (the cache's columns, ``error`` and
``cached``), from the extraction cache when it holds the chunk, else from the LLM (or, in fast
mode, the heuristics of core.fast_extraction). New results are cached, one part per batch,
before they are returned.

An LLM actor keeps one client and one event loop and works on a whole batch concurrently (the
client bounds requests in flight), so many requests are outstanding per actor and across actors.
"""

from __future__ import annotations

from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.core import prompts
from lightrag_ray.core.fast_extraction import CHINESE_NAMES, fast_extract
from lightrag_ray.core.ids import chunk_text_key
from lightrag_ray.core.parsing import parse_extraction
from lightrag_ray.core.records import Extraction
from lightrag_ray.models.llm import LLMError
from lightrag_ray.metrics.client import metrics
from lightrag_ray.models.llm_clients import BatchCaller
from lightrag_ray.models.usage import LLMCall, TokenUsage
from lightrag_ray.storage.extraction_cache import CacheIndex, extraction_fingerprint, to_row, write_rows
from lightrag_ray.storage.run_files import RunFiles
from lightrag_ray.storage.workspace import Workspace

Row = dict[str, Any]


def extraction_result(answer: str, chunk_id: str, file_path: str) -> Extraction:
    """The records of an extraction answer; LLMError when it is unusable: no records and no
    sign of a finished answer (the chunk then counts as failed and is retried next run)."""
    result = parse_extraction(answer, chunk_id, file_path)
    if not (result.entities or result.relations) and (result.dropped > 0 or prompts.COMPLETE not in answer):
        raise LLMError(f"unparseable LLM output ({result.dropped} malformed records): {answer[:120]!r}")
    return result


def fast_language(setting: str) -> str:
    """The language hint for :func:`fast_extract`: "zh" when the setting names Chinese,
    else "auto" (the default "English" describes LLM answers, not the documents)."""
    return "zh" if setting.strip().lower() in CHINESE_NAMES else "auto"


class _Extract:
    """Cache lookup and cache writes around ``_extract_new`` (a subclass's). ``earlier_parts``:
    the cache's part files when the run began (``cache_parts``); a hit elsewhere is this run's
    own extraction, found again when a batch is retried, and counts as extracted, not cached."""

    def __init__(self, settings: dict[str, Any], earlier_parts: list[str], run: RunFiles | None = None) -> None:
        self.settings = Settings.model_validate(settings)
        metrics().configure(self.settings.metrics)  # a Ray Data worker's process
        self.workspace = run.workspace if run is not None else Workspace(self.settings.workspace)
        self.fingerprint = extraction_fingerprint(self.settings)
        self.cache = CacheIndex(self.workspace, self.fingerprint)
        self.earlier_parts = set(earlier_parts)

    def __call__(self, chunks: list[Row]) -> list[Row]:
        cached = self.cache.lookup(chunks)
        new = [chunk for chunk in chunks if chunk["chunk_id"] not in cached]
        rows = self._extract_new(new) if new else []
        keys = {chunk["chunk_id"]: chunk_text_key(str(chunk["text"])) for chunk in new}
        good = [{**{k: v for k, v in row.items() if k != "error"}, "text_key": keys[row["chunk_id"]]}
                for row in rows if not row["error"]]
        write_rows(self.workspace, good)
        parts = {chunk["chunk_id"]: self.cache.part_of(chunk) for chunk in chunks if chunk["chunk_id"] in cached}
        metrics().flush()  # a Ray Data worker may be killed after its last batch
        no_usage = TokenUsage().counts()
        return ([{**row, "error": "", "cached": parts[chunk] in self.earlier_parts, **no_usage}
                 for chunk, row in cached.items()]
                + [{**no_usage, **row, "cached": False} for row in rows])

    def _extract_new(self, chunks: list[Row]) -> list[Row]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the stage holds beyond its lifetime (the LLM stage: its connections and
        event loop); a process that runs many stages calls it after each."""


class FastExtractChunks(_Extract):
    """Extraction by heuristics (no LLM, a few ms a chunk)."""

    def __init__(self, settings: dict[str, Any], earlier_parts: list[str], run: RunFiles | None = None) -> None:
        super().__init__(settings, earlier_parts, run)
        self.language = fast_language(self.settings.extraction.language)

    def _extract_new(self, chunks: list[Row]) -> list[Row]:
        return [{**to_row(c["chunk_id"], c["doc_id"], self.fingerprint,
                          fast_extract(str(c["text"]), c["chunk_id"], str(c.get("file_path") or ""), self.language), 0),
                 "error": ""} for c in chunks]


class ExtractChunks(_Extract):
    """Extraction by the LLM, with ``extraction.gleaning_rounds`` "anything missed?" rounds."""

    def __init__(self, settings: dict[str, Any], earlier_parts: list[str], run: RunFiles | None = None) -> None:
        super().__init__(settings, earlier_parts, run)
        self.llm = BatchCaller(self.settings.llm)

    def _extract_new(self, chunks: list[Row]) -> list[Row]:
        return self.llm.each(self._extract, chunks)

    def close(self) -> None:
        self.llm.close()

    async def _extract(self, chunk: Row) -> Row:
        """The chunk's extraction row, with the token usage of its calls (``USAGE_COLUMNS``)."""
        ex = self.settings.extraction
        messages = prompts.extraction_messages(chunk["text"], ex.entity_types, ex.language)
        first, glean = LLMCall.of(self.settings, "extract"), LLMCall.of(self.settings, "glean")
        requests = 0
        result, error = Extraction(), ""
        try:
            answer = await self.llm.client.complete(messages, call=first)
            requests += 1
            result = extraction_result(answer, chunk["chunk_id"], chunk["file_path"])
            for _ in range(ex.gleaning_rounds):
                messages = prompts.gleaning_messages(messages, answer)
                answer = await self.llm.client.complete(messages, call=glean)
                requests += 1
                extra = parse_extraction(answer, chunk["chunk_id"], chunk["file_path"])
                if not (extra.entities or extra.relations):
                    break
                result.extend(extra)
        except LLMError as exc:
            result, error = Extraction(), str(exc)
        return {**to_row(chunk["chunk_id"], chunk["doc_id"], self.fingerprint, result, requests), "error": error,
                **(first.usage + glean.usage).counts()}


def extraction_stage(settings: Settings) -> type[_Extract]:
    """The extraction stage of ``settings``' extraction mode."""
    return FastExtractChunks if settings.extraction.mode == "fast" else ExtractChunks
