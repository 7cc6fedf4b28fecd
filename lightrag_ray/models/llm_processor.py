"""``ray.data.llm`` processors: the LLM as a Ray Data stage instead of a client.

Two backends build one: ``vllm`` (vLLM engines on GPU workers, ``vLLMEngineProcessorConfig``)
and ``openai-batch`` (an OpenAI-compatible server's ``/chat/completions``, called by
``HttpRequestProcessorConfig``: the same stage wiring, runnable on CPU). Callers give a
``prompt`` (row -> ``{"messages": ..., other columns}``) and a ``parse`` (row, answer, error
-> output row); this module adds what the engine needs (sampling parameters or the HTTP
payload), reads the answer back, and turns rows the engine failed into ``parse(row, "", error)``.

Ray 2.60 API used: ``build_processor(config, preprocess=, postprocess=,
preprocess_map_kwargs=, postprocess_map_kwargs=)``; vLLM rows carry ``messages`` and
``sampling_params`` in and ``generated_text`` out (chat templating, tokenising and
detokenising are CPU stages, so ``llm.model`` is an HF model id or directory, not a GGUF
file); HTTP rows carry ``payload`` in and ``http_response`` out. vLLM is imported only by
Ray's engine stage on the GPU workers, never here.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from functools import partial
from typing import Any

import aiohttp

from lightrag_ray.config import ExtractionConfig, LLMConfig
from lightrag_ray.models.llm import LLMError, Messages
from lightrag_ray.models.openai_http import chat_payload, completion_text
from lightrag_ray.models.usage import USAGE_COLUMNS, TokenUsage

PROCESSOR_BACKENDS = ("vllm", "openai-batch")
VLLM_MISSING = "llm.backend=vllm needs vLLM here and on the GPU nodes: pip install 'ray[llm]' (or use the -gpu image)"
ERROR_COLUMN = "__inference_error__"  # set by Ray on rows an engine failed (should_continue_on_error)
SECONDS_COLUMN = "llm_seconds"  # the engine's time for the row's request (vLLM's time_taken_llm); -1: unknown
CALL_COLUMNS = (*USAGE_COLUMNS, SECONDS_COLUMN)  # what every output row says of its call

Prompt = Callable[[dict[str, Any]], dict[str, Any]]
Parse = Callable[[dict[str, Any], str, str], dict[str, Any]]


def uses_processor(llm: LLMConfig) -> bool:
    """True when indexing calls this LLM through a ray.data.llm processor."""
    return llm.backend in PROCESSOR_BACKENDS


def require_vllm(llm: LLMConfig) -> None:
    """Raise ImportError(VLLM_MISSING) when ``llm`` needs vLLM and this Python has none."""
    if llm.backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ImportError(VLLM_MISSING)


def vllm_processor_config(llm: LLMConfig, extraction: ExtractionConfig) -> dict[str, Any]:
    """Keyword arguments for ``ray.data.llm.vLLMEngineProcessorConfig``.

    ``concurrency`` is ``extraction.actors`` (Ray 2.60 makes an int n an autoscaling pool of
    1..n engines). GPUs per engine follow ``extraction.num_gpus``: 0 or 1 means one GPU, an
    integer n > 1 tensor parallelism over n GPUs, a fraction f < 1 engines sharing a GPU
    (placement bundle GPU=f, ``gpu_memory_utilization`` 0.9*f).
    """
    model = llm.model
    if model.endswith(".gguf") or llm.gguf_file or model in {"default", "packaged"}:
        raise ValueError(
            f"llm.model={model!r}: the vllm backend needs an HF model id or an HF model "
            "directory (GGUF files and the packaged model are for backend=transformers)"
        )
    engine_kwargs: dict[str, Any] = {
        "max_model_len": llm.max_model_len,
        "enable_chunked_prefill": True,
        "enable_prefix_caching": True,  # every extraction request starts with the same system prompt
        "trust_remote_code": False,
    }
    config: dict[str, Any] = {
        "model_source": model,
        "engine_kwargs": engine_kwargs,
        "concurrency": extraction.actors,
        "batch_size": llm.batch_size,
        "should_continue_on_error": True,  # a failed row becomes a failed chunk, not a failed run
    }
    gpus = extraction.num_gpus
    if 0 < gpus < 1:
        engine_kwargs["gpu_memory_utilization"] = round(0.9 * gpus, 3)
        config["placement_group_config"] = {"bundle_per_worker": {"GPU": gpus, "CPU": extraction.num_cpus}}
    elif gpus > 1:
        if not float(gpus).is_integer():
            raise ValueError(f"extraction.num_gpus={gpus}: use a fraction below 1 or a whole number")
        engine_kwargs["tensor_parallel_size"] = math.floor(gpus)
    return config


def http_processor_config(llm: LLMConfig, extraction: ExtractionConfig) -> dict[str, Any]:
    """Keyword arguments for ``ray.data.llm.HttpRequestProcessorConfig``: ``extraction.actors``
    request actors of ``extraction.num_cpus`` each; Ray retries 429/408/502/503/504 answers
    ``llm.max_retries`` times from ``llm.backoff_s`` on, doubling."""
    return {
        "url": llm.base_url.rstrip("/") + "/chat/completions",
        "headers": {"Authorization": f"Bearer {llm.api_key}"},
        "batch_size": llm.batch_size,
        "concurrency": extraction.actors,
        "max_retries": llm.max_retries,
        "base_retry_wait_time_in_s": llm.backoff_s,
        "session_factory": partial(aiohttp.ClientSession, timeout=aiohttp.ClientTimeout(total=llm.timeout_s)),
        "http_request_stage": {"num_cpus": extraction.num_cpus},
    }


def request_fields(llm: LLMConfig, messages: Messages) -> dict[str, Any]:
    """What the engine stage reads from a row besides ``messages``."""
    if llm.backend == "vllm":
        return {"sampling_params": {"temperature": llm.temperature, "max_tokens": llm.max_tokens}}
    return {"payload": chat_payload(llm, messages)}


def answer_of(llm: LLMConfig, row: dict[str, Any]) -> tuple[str, str, TokenUsage]:
    """(answer, error, token usage) of an engine output row; answer or error is empty (a failed
    call adds no usage, an answer without the server's usage is unmetered)."""
    if llm.backend == "vllm":
        text = row.get("generated_text")
        if not (isinstance(text, str) and text):
            return "", "vLLM returned no text", TokenUsage()
        usage = TokenUsage(int(row.get("num_input_tokens") or 0), int(row.get("num_generated_tokens") or 0), calls=1)
        return text, "", usage
    body = row.get("http_response")
    try:
        text = completion_text(body)
        return text, "", TokenUsage.reported(body.get("usage") if isinstance(body, dict) else None)
    except LLMError as exc:
        return "", str(exc), TokenUsage()


def _preprocess(row: dict[str, Any], *, prompt: Prompt, llm: LLMConfig) -> dict[str, Any]:
    fields = prompt(row)
    return {**fields, **request_fields(llm, fields["messages"])}


def _postprocess(row: dict[str, Any], *, parse: Parse, llm: LLMConfig) -> dict[str, Any]:
    answer, error, usage = answer_of(llm, row)
    seconds = row.get("time_taken_llm")
    return {**parse(row, answer, error), **usage.counts(),
            SECONDS_COLUMN: float(seconds) if isinstance(seconds, (int, float)) and seconds >= 0 else -1.0}


def _settle(row: dict[str, Any], *, parse: Parse, columns: tuple[str, ...]) -> dict[str, Any]:
    """A row the engine failed (it skipped postprocess) -> ``parse(row, "", error)``; every
    row -> exactly ``columns`` and ``CALL_COLUMNS``."""
    error = row.get(ERROR_COLUMN)
    if error:
        row = {**parse(row, "", f"LLM engine failed on this row: {str(error)[:300]}"), **TokenUsage().counts(),
               SECONDS_COLUMN: -1.0}
    return {column: row[column] for column in (*columns, *CALL_COLUMNS)}


def processor_config(llm: LLMConfig, extraction: ExtractionConfig) -> Any:
    """The ``ray.data.llm`` config object of ``llm.backend`` (vllm or openai-batch)."""
    from ray.data import llm as data_llm

    if llm.backend == "vllm":
        require_vllm(llm)
        return data_llm.vLLMEngineProcessorConfig(**vllm_processor_config(llm, extraction))
    if llm.backend == "openai-batch":
        return data_llm.HttpRequestProcessorConfig(**http_processor_config(llm, extraction))
    raise ValueError(f"llm.backend={llm.backend!r} has no ray.data.llm processor (use one of {PROCESSOR_BACKENDS})")


def build_llm_processor(
    llm: LLMConfig, extraction: ExtractionConfig, *, prompt: Prompt, parse: Parse,
    columns: tuple[str, ...], map_args: dict[str, Any],
) -> Callable[[Any], Any]:
    """``dataset -> dataset``: prompt each row, ask the LLM, parse each answer into ``columns``
    (plus the call's token usage and time, ``CALL_COLUMNS``).

    ``prompt`` and ``parse`` run as the processor's preprocess and postprocess (Ray Data
    tasks with ``map_args``, e.g. ``num_cpus``); ``parse`` gets ``(row, answer, "")`` for an
    answer and ``(row, "", error)`` for a failed request or engine row.
    """
    from ray.data.llm import build_processor

    processor = build_processor(
        processor_config(llm, extraction),
        preprocess=partial(_preprocess, prompt=prompt, llm=llm),
        postprocess=partial(_postprocess, parse=parse, llm=llm),
        preprocess_map_kwargs=dict(map_args),
        postprocess_map_kwargs=dict(map_args),
    )
    settle = partial(_settle, parse=parse, columns=columns)
    return lambda dataset: processor(dataset).map(settle, **map_args)
