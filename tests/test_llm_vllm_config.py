"""The ray.data.llm vLLM extraction stage, checked on CPU (no vLLM, no GPU)."""

from __future__ import annotations

import copy
import importlib.util

import pytest

from lightrag_ray.config import ExtractionConfig, LLMConfig
from lightrag_ray.core.prompts import EXTRACT_HEADING
from lightrag_ray.models.vllm_processor import (
    VLLM_MISSING,
    build_vllm_extraction_processor,
    build_vllm_processor_config,
    extraction_postprocess,
    extraction_preprocess,
)

MODEL = "Qwen/Qwen2.5-7B-Instruct"


def _configs(**extraction: object) -> tuple[LLMConfig, ExtractionConfig]:
    llm = LLMConfig(backend="vllm", model=MODEL, temperature=0.0, max_tokens=512)
    return llm, ExtractionConfig(actors=3, **extraction)


def test_config_dict_defaults() -> None:
    cfg = build_vllm_processor_config(*_configs())
    assert cfg["model_source"] == MODEL
    assert cfg["concurrency"] == 3
    assert cfg["batch_size"] > 0
    assert "accelerator_type" not in cfg
    assert "placement_group_config" not in cfg  # one whole GPU per engine (Ray's default)
    engine = cfg["engine_kwargs"]
    assert engine["max_model_len"] >= 4096
    assert engine["enable_chunked_prefill"] is True
    assert engine["enable_prefix_caching"] is True


def test_config_dict_gpu_shapes() -> None:
    shared = build_vllm_processor_config(*_configs(num_gpus=0.5, num_cpus=0.25))
    assert shared["placement_group_config"] == {"bundle_per_worker": {"GPU": 0.5, "CPU": 0.25}}
    assert shared["engine_kwargs"]["gpu_memory_utilization"] == pytest.approx(0.45)
    parallel = build_vllm_processor_config(*_configs(num_gpus=2))
    assert parallel["engine_kwargs"]["tensor_parallel_size"] == 2
    with pytest.raises(ValueError, match="num_gpus"):
        build_vllm_processor_config(*_configs(num_gpus=1.5))


def test_config_rejects_gguf_and_packaged_models() -> None:
    extraction = ExtractionConfig()
    gguf_path, gguf_dir = LLMConfig(model="/m/x.gguf"), LLMConfig(model="/m", gguf_file="x.gguf")
    for llm in (gguf_path, gguf_dir, LLMConfig()):
        with pytest.raises(ValueError, match="HF model id"):
            build_vllm_processor_config(llm, extraction)


def test_preprocess_builds_extraction_messages() -> None:
    row = {"chunk_id": "chunk-1", "text": "Ada Lovelace worked with Charles Babbage in London."}
    out = extraction_preprocess(
        row, entity_types=["person", "location"], language="English", temperature=0.0, max_tokens=64
    )
    assert set(out) == {"messages", "sampling_params"}
    assert [m["role"] for m in out["messages"]] == ["system", "user"]
    assert out["messages"][0]["content"].startswith(EXTRACT_HEADING)
    assert "person, location" in out["messages"][0]["content"]
    assert row["text"] in out["messages"][1]["content"]
    assert out["sampling_params"] == {"temperature": 0.0, "max_tokens": 64}


def test_postprocess_keeps_chunk_id_and_answer() -> None:
    row = {"chunk_id": "chunk-1", "text": "t", "messages": [], "generated_text": "entity<|#|>A", "extra": 9}
    assert extraction_postprocess(row) == {"chunk_id": "chunk-1", "answer": "entity<|#|>A"}


def test_config_dict_is_accepted_by_ray_data_llm() -> None:
    llm_module = pytest.importorskip("ray.data.llm")
    cfg = build_vllm_processor_config(*_configs(num_gpus=0.5))
    config = llm_module.vLLMEngineProcessorConfig(**copy.deepcopy(cfg))
    assert config.model_source == MODEL
    assert config.concurrency == 3
    assert config.batch_size == cfg["batch_size"]
    assert config.accelerator_type is None
    assert config.engine_kwargs["max_model_len"] == cfg["engine_kwargs"]["max_model_len"]
    assert config.placement_group_config["bundle_per_worker"] == {"GPU": 0.5, "CPU": 0.25}


def test_build_processor_needs_vllm() -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    with pytest.raises(ImportError) as info:
        build_vllm_extraction_processor(*_configs())
    assert str(info.value) == VLLM_MISSING
    assert "pip install ray[llm]" in str(info.value)
