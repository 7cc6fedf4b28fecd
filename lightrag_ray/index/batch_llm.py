"""Extraction, gleaning and summaries as ``ray.data.llm`` processor passes (backends
``vllm`` and ``openai-batch``; see ``models/llm_processor.py``).

Same prompts, parsing, failure rule, cache rows and output rows as the actor stages of
``index/stages/extract.py``; only the LLM call is a Ray Data stage. Extraction is one pass over the
chunks the cache lacks; each gleaning round is another pass over only the chunks whose
last answer added records; summaries take one pass per map-reduce level. A chunk's row
reaches the caller (and the extraction cache, before) from the last pass it needs, batch by
batch as the pass streams. A request or engine row that fails, an unusable answer, or a
pass that dies (e.g. retries used up) fails only the chunks it had not returned yet.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayError

from lightrag_ray.config import ExtractionConfig, Settings
from lightrag_ray.core import prompts
from lightrag_ray.core.ids import chunk_text_key
from lightrag_ray.core.parsing import parse_extraction
from lightrag_ray.core.records import Extraction
from lightrag_ray.index.stages.extract import extraction_result
from lightrag_ray.index.summaries import level_messages, summary_limits
from lightrag_ray.models.llm import LLMError
from lightrag_ray.models.llm_processor import SECONDS_COLUMN, build_llm_processor
from lightrag_ray.models.usage import CallKind, LLMCall, TokenUsage
from lightrag_ray.storage.extraction_cache import SCHEMA, extraction_fingerprint, from_row, to_row, write_rows
from lightrag_ray.storage.workspace import Workspace

Row = dict[str, Any]
EXTRACTION_COLUMNS = (*SCHEMA.names, "file_path", "conversation", "answer", "error")
SUMMARY_COLUMNS = ("hash", "group", "answer", "error")


class ExtractionPass:
    """Prompt and parse of the first extraction request (``glean=False``) or of a gleaning
    round over the conversation so far (``glean=True``). Output rows are cache rows (for
    this one answer) plus the conversation, the answer and the error."""

    def __init__(self, extraction: ExtractionConfig, glean: bool) -> None:
        self.entity_types = list(extraction.entity_types)
        self.language = extraction.language
        self.glean = glean
        self.kind: CallKind = "glean" if glean else "extract"

    def prompt(self, row: Row) -> Row:
        if self.glean:
            messages = prompts.gleaning_messages(json.loads(row["conversation"]), str(row["answer"]))
        else:
            messages = prompts.extraction_messages(str(row["text"]), self.entity_types, self.language)
        return {"messages": messages, "conversation": json.dumps(messages, ensure_ascii=False)}

    def parse(self, row: Row, answer: str, error: str) -> Row:
        chunk_id, file_path = str(row["chunk_id"]), str(row["file_path"] or "")
        result = Extraction()
        if not error:
            try:
                result = (parse_extraction(answer, chunk_id, file_path) if self.glean
                          else extraction_result(answer, chunk_id, file_path))
            except LLMError as exc:
                error = str(exc)
        return {**to_row(chunk_id, str(row["doc_id"]), "", result, 1), "file_path": file_path,
                "conversation": str(row.get("conversation") or ""), "answer": "" if error else answer, "error": error}


class SummaryPass:
    """A prompt made by the driver (``level_messages``) -> the stripped answer."""

    kind: CallKind = "summary"

    def prompt(self, row: Row) -> Row:
        return {"messages": json.loads(row["conversation"])}

    def parse(self, row: Row, answer: str, error: str) -> Row:
        return {"hash": str(row["hash"]), "group": int(row["group"]), "answer": answer.strip(), "error": error}


@dataclass
class _Chunk:
    """A chunk's extraction so far, between gleaning passes."""

    doc_id: str
    file_path: str
    result: Extraction
    conversation: str
    answer: str
    usage: TokenUsage  # of its calls so far
    requests: int = 1

    def advance(self, row: Row) -> bool:
        """Take one gleaning answer; True when it added records (worth another round)."""
        self.requests += 1
        self.usage += TokenUsage.of_row(row)
        extra = from_row(row)
        if row["error"] or not (extra.entities or extra.relations):
            return False
        self.result.extend(extra)
        self.conversation, self.answer = row["conversation"], row["answer"]
        return True

    def glean_row(self, chunk_id: str) -> Row:
        return {"chunk_id": chunk_id, "doc_id": self.doc_id, "file_path": self.file_path,
                "conversation": self.conversation, "answer": self.answer}


class ProcessorRuns:
    """The LLM work of one indexing run through ray.data.llm processors.

    ``map_args`` are the Ray options of the pre/postprocess tasks (``num_cpus``, ...). Output
    rows carry the token usage of their calls (``USAGE_COLUMNS``), as the engine or server reported it.
    """

    def __init__(self, settings: Settings, workspace: Workspace, map_args: dict[str, Any]) -> None:
        self.settings = settings
        self.workspace = workspace
        self.map_args = map_args
        self.fingerprint = extraction_fingerprint(settings)
        self.text_keys: dict[str, str] = {}  # chunk id -> text key of the chunks being extracted

    def _pass(self, stage: ExtractionPass | SummaryPass, columns: tuple[str, ...], rows: list[Row],
              key: Callable[[Row], Any]) -> Iterator[list[Row]]:
        """``rows`` through a new processor, output batch by batch as it comes. If the pass
        dies, each row it has not returned comes back as ``stage.parse(row, "", reason)``."""
        llm = self.settings.llm
        run = build_llm_processor(llm, self.settings.extraction, prompt=stage.prompt, parse=stage.parse,
                                  columns=columns, map_args=self.map_args)
        # One block per batch, put by the driver (as pipeline._blocks_of), so every engine gets work.
        blocks = max(1, math.ceil(len(rows) / llm.batch_size))
        dataset = run(ray.data.from_items(rows, override_num_blocks=blocks))
        left = {key(row): row for row in rows}
        try:
            for batch in dataset.iter_batches(batch_size=None, batch_format="pandas"):
                out = batch.to_dict("records")
                for row in out:
                    left.pop(key(row), None)
                self._record_calls(stage.kind, out)
                yield out
        except RayError as exc:
            lines = str(exc).strip().splitlines() or [""]
            reason = f"LLM processor failed: {type(exc).__name__}: {lines[-1][:300]}"
            failed = [stage.parse(row, "", reason) for row in left.values()]
            self._record_calls(stage.kind, failed)
            yield failed

    def _record_calls(self, kind: CallKind, rows: list[Row]) -> None:
        """The ``llm_*`` metrics of the processor's calls behind ``rows``: a row whose call was
        answered (it has usage, reported or unmetered) is ok, any other an error; latency where
        the engine timed it (vLLM)."""
        call = LLMCall.of(self.settings, kind)
        for row in rows:
            usage = TokenUsage.of_row(row)
            seconds = float(row.get(SECONDS_COLUMN, -1.0))
            call.record("ok" if usage.total or usage.unmetered else "error", seconds if seconds >= 0 else None, usage)

    def extract(self, chunks: list[Row]) -> Iterator[list[Row]]:
        """Chunk rows -> batches of rows as ``ExtractChunks`` returns them (cache columns +
        ``error``); good rows are in the extraction cache before they are yielded."""
        ex = self.settings.extraction
        rows = [{k: chunk[k] for k in ("chunk_id", "doc_id", "file_path", "text")} for chunk in chunks]
        self.text_keys = {row["chunk_id"]: chunk_text_key(str(row["text"])) for row in rows}
        current: dict[str, _Chunk] = {}
        for rounds_left in range(ex.gleaning_rounds, -1, -1):
            stage = ExtractionPass(ex, glean=rounds_left < ex.gleaning_rounds)
            going: dict[str, _Chunk] = {}
            for out in self._pass(stage, EXTRACTION_COLUMNS, rows, key=lambda row: row["chunk_id"]):
                done = []
                for row in out:
                    chunk = current.get(row["chunk_id"])
                    if chunk is None:
                        chunk = _Chunk(row["doc_id"], row["file_path"], from_row(row), row["conversation"],
                                       row["answer"], TokenUsage.of_row(row))
                        more = not row["error"]
                    else:
                        more = chunk.advance(row)
                    if more and rounds_left:
                        going[row["chunk_id"]] = chunk
                    else:
                        done.append(self._done(row["chunk_id"], chunk, row["error"]))
                yield self._written(done)
            if not going:
                return
            current = going
            rows = [chunk.glean_row(chunk_id) for chunk_id, chunk in going.items()]

    def _done(self, chunk_id: str, chunk: _Chunk, error: str) -> Row:
        result = Extraction() if error else chunk.result
        return {**to_row(chunk_id, chunk.doc_id, self.fingerprint, result, chunk.requests,
                         self.text_keys.get(chunk_id, "")), "error": error, **chunk.usage.counts()}

    def _written(self, rows: list[Row]) -> list[Row]:
        good = [{k: row[k] for k in SCHEMA.names} for row in rows if not row["error"]]
        if good:
            write_rows(self.workspace, good)
        return rows

    def summarize(self, items: list[Row]) -> list[Row]:
        """Rows (kind, name, hash, base, fragments) -> rows (hash, summary, error, token usage), as
        ``SummarizeItems`` returns them: one pass per map-reduce level."""
        limits = summary_limits(self.settings)
        names = {str(item["hash"]): (str(item["kind"]), str(item["name"])) for item in items}
        bases = {str(item["hash"]): str(item.get("base") or "") for item in items}
        fragments = {str(item["hash"]): [str(f) for f in item["fragments"]] for item in items}
        results: list[Row] = []
        spent: dict[str, TokenUsage] = defaultdict(TokenUsage)
        while fragments:
            rows = [{"hash": item, "group": group, "conversation": json.dumps(messages, ensure_ascii=False)}
                    for item, parts in fragments.items()
                    for group, messages in enumerate(
                        level_messages(*names[item], parts, base=bases.get(item, ""), **limits))]
            bases = {}  # only the first level starts from a previous summary
            answers: dict[str, dict[int, Row]] = defaultdict(dict)
            for out in self._pass(SummaryPass(), SUMMARY_COLUMNS, rows, key=lambda row: (row["hash"], int(row["group"]))):
                for row in out:
                    answers[row["hash"]][int(row["group"])] = row
                    spent[row["hash"]] += TokenUsage.of_row(row)
            fragments = {}
            for item, groups in answers.items():
                errors = [row["error"] for row in groups.values() if row["error"]]
                if errors:
                    results.append({"hash": item, "summary": "", "error": errors[0], **spent[item].counts()})
                elif len(groups) == 1:
                    results.append({"hash": item, "summary": groups[0]["answer"], "error": "", **spent[item].counts()})
                else:
                    fragments[item] = [groups[group]["answer"] for group in sorted(groups)]
        return results
