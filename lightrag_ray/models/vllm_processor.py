"""GPU extraction with Ray Data LLM: a ``ray.data.llm`` vLLM processor over chunk rows.

Rows in: ``{"chunk_id", "text", ...}``; rows out: ``{"chunk_id", "answer"}`` where
``answer`` is the raw extraction answer (LightRAG record format, see ``prompts``).
One extraction pass per chunk (no gleaning rounds on this path).

Ray 2.60 API used: ``vLLMEngineProcessorConfig(model_source, engine_kwargs, concurrency,
batch_size, placement_group_config, ...)`` and ``build_processor(config, preprocess=,
postprocess=)``. Chat templating, tokenisation and detokenisation run as CPU stages
(``chat_template_stage`` / ``tokenize_stage`` / ``detokenize_stage``, all on by default),
so ``llm.model`` must be an HF model id or an HF model directory (not a GGUF file).
"""

from __future__ import annotations

import importlib.util
import math
from functools import partial
from typing import Any

from lightrag_ray.config import ExtractionConfig, LLMConfig
from lightrag_ray.core.prompts import extraction_messages

VLLM_MISSING = "vLLM backend needs `pip install ray[llm]` on GPU nodes"
DEFAULT_MAX_MODEL_LEN = 8192
DEFAULT_BATCH_SIZE = 16


def build_vllm_processor_config(
    llm: LLMConfig,
    extraction: ExtractionConfig,
    *,
    max_model_len: int = DEFAULT_MAX_MODEL_LEN,
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> dict[str, Any]:
    """Keyword arguments for ``ray.data.llm.vLLMEngineProcessorConfig``.

    ``concurrency`` is ``extraction.actors`` (Ray 2.60 makes an int n an autoscaling
    pool of 1..n engines). GPUs per engine follow ``extraction.num_gpus``: 0 or 1 means
    one GPU, an integer n > 1 means tensor parallelism over n GPUs, a fraction f < 1
    packs engines onto one GPU (placement bundle GPU=f, ``gpu_memory_utilization`` 0.9*f).
    """
    model = llm.model
    if model.endswith(".gguf") or llm.gguf_file or model in {"default", "packaged"}:
        raise ValueError(
            f"llm.model={model!r}: the vllm backend needs an HF model id or an HF model "
            "directory (GGUF files and the packaged model are for backend=transformers)"
        )
    engine_kwargs: dict[str, Any] = {
        "max_model_len": max_model_len,
        "enable_chunked_prefill": True,
        "enable_prefix_caching": True,  # every request starts with the same system prompt
        "trust_remote_code": False,
    }
    config: dict[str, Any] = {
        "model_source": model,
        "engine_kwargs": engine_kwargs,
        "concurrency": extraction.actors,
        "batch_size": batch_size,
    }
    gpus = extraction.num_gpus
    if 0 < gpus < 1:
        engine_kwargs["gpu_memory_utilization"] = round(0.9 * gpus, 3)
        config["placement_group_config"] = {
            "bundle_per_worker": {"GPU": gpus, "CPU": extraction.num_cpus}
        }
    elif gpus > 1:
        if not float(gpus).is_integer():
            raise ValueError(f"extraction.num_gpus={gpus}: use a fraction below 1 or a whole number")
        engine_kwargs["tensor_parallel_size"] = math.floor(gpus)
    return config


def extraction_preprocess(
    row: dict[str, Any],
    *,
    entity_types: list[str],
    language: str,
    temperature: float,
    max_tokens: int,
) -> dict[str, Any]:
    """A chunk row -> ``messages`` (the extraction prompt) and vLLM ``sampling_params``."""
    return {
        "messages": extraction_messages(str(row["text"]), list(entity_types), language),
        "sampling_params": {"temperature": temperature, "max_tokens": max_tokens},
    }


def extraction_postprocess(row: dict[str, Any]) -> dict[str, Any]:
    """An engine output row -> ``{"chunk_id", "answer"}``."""
    return {"chunk_id": row["chunk_id"], "answer": row["generated_text"]}


def build_vllm_extraction_processor(
    llm: LLMConfig, extraction: ExtractionConfig, *, check_vllm: bool = True, **config_kwargs: Any
) -> Any:
    """A ``ray.data.llm`` Processor: ``processor(dataset_of_chunks)`` -> extraction answers.

    Raises ImportError when vLLM is not importable here (``check_vllm=False`` skips the
    check, e.g. on a CPU-only driver of a cluster whose GPU nodes have vLLM).
    """
    if check_vllm and importlib.util.find_spec("vllm") is None:
        raise ImportError(VLLM_MISSING)
    try:
        from ray.data.llm import build_processor, vLLMEngineProcessorConfig
    except ImportError as exc:
        raise ImportError(f"{VLLM_MISSING} ({exc})") from exc
    config = vLLMEngineProcessorConfig(**build_vllm_processor_config(llm, extraction, **config_kwargs))
    preprocess = partial(
        extraction_preprocess,
        entity_types=list(extraction.entity_types),
        language=extraction.language,
        temperature=llm.temperature,
        max_tokens=llm.max_tokens,
    )
    return build_processor(config, preprocess=preprocess, postprocess=extraction_postprocess)
