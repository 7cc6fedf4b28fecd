"""The ray.data.llm processor configs (vLLM on GPUs, HTTP on CPU), checked on CPU: no vLLM,
no GPU, no Ray cluster. Ray's own config classes judge what we build."""

from __future__ import annotations

import copy
import importlib.util
import sys

import pydantic
import pytest

from lightrag_ray.config import ExtractionConfig, LLMConfig, Settings
from lightrag_ray.models.llm_processor import (
    ERROR_COLUMN,
    VLLM_MISSING,
    SECONDS_COLUMN,
    _postprocess,
    _settle,
    answer_of,
    http_processor_config,
    processor_config,
    request_fields,
    require_vllm,
    uses_processor,
    vllm_processor_config,
)
from lightrag_ray.models.openai_http import chat_payload
from lightrag_ray.models.usage import TokenUsage

data_llm = pytest.importorskip("ray.data.llm")
MODEL = "Qwen/Qwen2.5-7B-Instruct"
NO_VLLM = importlib.util.find_spec("vllm") is None


def _configs(llm: dict | None = None, **extraction: object) -> tuple[LLMConfig, ExtractionConfig]:
    fields = {"backend": "vllm", "model": MODEL, "temperature": 0.0, "max_tokens": 512, **(llm or {})}
    return LLMConfig(**fields), ExtractionConfig(**{"actors": 3, **extraction})


def test_vllm_config_defaults() -> None:
    cfg = vllm_processor_config(*_configs())
    assert cfg["model_source"] == MODEL
    assert cfg["concurrency"] == 3
    assert cfg["batch_size"] == LLMConfig().batch_size
    assert cfg["should_continue_on_error"] is True  # a bad row fails its chunk, not the run
    assert "accelerator_type" not in cfg
    assert "placement_group_config" not in cfg  # one whole GPU per engine (Ray's default)
    engine = cfg["engine_kwargs"]
    assert engine["max_model_len"] == LLMConfig().max_model_len >= 4096
    assert engine["enable_chunked_prefill"] is True
    assert engine["enable_prefix_caching"] is True


def test_vllm_config_gpu_shapes() -> None:
    shared = vllm_processor_config(*_configs(num_gpus=0.5, num_cpus=0.25))
    assert shared["placement_group_config"] == {"bundle_per_worker": {"GPU": 0.5, "CPU": 0.25}}
    assert shared["engine_kwargs"]["gpu_memory_utilization"] == pytest.approx(0.45)
    parallel = vllm_processor_config(*_configs(num_gpus=2))
    assert parallel["engine_kwargs"]["tensor_parallel_size"] == 2
    with pytest.raises(ValueError, match="num_gpus"):
        vllm_processor_config(*_configs(num_gpus=1.5))


def test_vllm_config_rejects_gguf_and_packaged_models() -> None:
    extraction = ExtractionConfig()
    gguf_path, gguf_dir = LLMConfig(model="/m/x.gguf"), LLMConfig(model="/m", gguf_file="x.gguf")
    for llm in (gguf_path, gguf_dir, LLMConfig()):
        with pytest.raises(ValueError, match="HF model id"):
            vllm_processor_config(llm, extraction)


@pytest.mark.parametrize(("llm", "extraction"), [
    ({}, {}),
    ({"batch_size": 128, "max_model_len": 16384}, {"actors": 8, "num_gpus": 1}),
    ({"batch_size": 16}, {"actors": 4, "num_gpus": 0.25, "num_cpus": 0.5}),
    ({"model": "/models/qwen2.5-7b-instruct"}, {"actors": 2, "num_gpus": 4}),
])
def test_vllm_config_is_accepted_by_ray_and_unknown_keys_are_not(llm: dict, extraction: dict) -> None:
    cfg = vllm_processor_config(*_configs(llm, **extraction))
    config = data_llm.vLLMEngineProcessorConfig(**copy.deepcopy(cfg))
    assert config.model_source == cfg["model_source"]
    assert (config.concurrency, config.batch_size) == (cfg["concurrency"], cfg["batch_size"])
    assert config.should_continue_on_error is True and config.accelerator_type is None
    assert config.engine_kwargs.items() >= cfg["engine_kwargs"].items()  # Ray adds task_type
    if "placement_group_config" in cfg:
        assert config.placement_group_config["bundle_per_worker"] == cfg["placement_group_config"]["bundle_per_worker"]
    with pytest.raises(pydantic.ValidationError, match="not_a_field"):
        data_llm.vLLMEngineProcessorConfig(**copy.deepcopy(cfg), not_a_field=1)


@pytest.mark.parametrize(("llm", "extraction"), [
    ({}, {}),
    ({"batch_size": 4, "max_retries": 0, "backoff_s": 0.1, "timeout_s": 5}, {"actors": 1, "num_cpus": 0.2}),
    ({"base_url": "https://api.example.com/v1/", "api_key": "sk-test"}, {"actors": 16}),
])
def test_http_config_is_accepted_by_ray_and_unknown_keys_are_not(llm: dict, extraction: dict) -> None:
    llm_config, ex = _configs({"backend": "openai-batch", **llm}, **extraction)
    cfg = http_processor_config(llm_config, ex)
    config = data_llm.HttpRequestProcessorConfig(**cfg)
    assert config.url == llm_config.base_url.rstrip("/") + "/chat/completions"
    assert config.headers == {"Authorization": f"Bearer {llm_config.api_key}"}
    assert (config.concurrency, config.batch_size) == (ex.actors, llm_config.batch_size)
    assert (config.max_retries, config.base_retry_wait_time_in_s) == (llm_config.max_retries, llm_config.backoff_s)
    assert config.session_factory.keywords["timeout"].total == llm_config.timeout_s
    stage = data_llm.HttpRequestStageConfig(**cfg["http_request_stage"])
    assert stage.num_cpus == ex.num_cpus
    with pytest.raises(pydantic.ValidationError, match="not_a_field"):
        data_llm.HttpRequestProcessorConfig(**cfg, not_a_field=1)
    with pytest.raises(pydantic.ValidationError, match="not_a_field"):
        data_llm.HttpRequestStageConfig(**cfg["http_request_stage"], not_a_field=1)


def test_request_fields_per_backend() -> None:
    messages = [{"role": "user", "content": "hi"}]
    vllm, _ = _configs()
    assert request_fields(vllm, messages) == {"sampling_params": {"temperature": 0.0, "max_tokens": 512}}
    http, _ = _configs({"backend": "openai-batch"})
    assert request_fields(http, messages) == {"payload": chat_payload(http, messages)}
    assert request_fields(http, messages)["payload"]["messages"] == messages


def test_answers_errors_and_tokens_are_read_back() -> None:
    vllm, _ = _configs()
    assert answer_of(vllm, {"generated_text": "entity<|#|>A", "num_input_tokens": 30, "num_generated_tokens": 7}) == (
        "entity<|#|>A", "", TokenUsage(30, 7, calls=1))
    assert answer_of(vllm, {"generated_text": "", "num_generated_tokens": 0})[1] == "vLLM returned no text"
    http, _ = _configs({"backend": "openai-batch"})
    ok = {"choices": [{"message": {"role": "assistant", "content": "done"}}],
          "usage": {"prompt_tokens": 12, "completion_tokens": 3}}
    assert answer_of(http, {"http_response": ok}) == ("done", "", TokenUsage(12, 3, calls=1))
    no_usage = {"choices": [{"message": {"role": "assistant", "content": "done"}}]}
    assert answer_of(http, {"http_response": no_usage})[2] == TokenUsage(calls=1, unmetered=1)
    answer, error, usage = answer_of(http, {"http_response": {"error": {"message": "internal error"}}})
    assert (answer, usage) == ("", TokenUsage()) and "no choices" in error and "internal error" in error


def test_rows_an_engine_failed_are_parsed_as_failures() -> None:
    def parse(row: dict, answer: str, error: str) -> dict:
        return {"id": row["id"], "answer": answer, "error": error}

    failed = {"id": "c1", "messages": [], "generated_text": "", ERROR_COLUMN: "prompt too long"}
    settled = _settle(failed, parse=parse, columns=("id", "answer", "error"))
    assert settled["id"] == "c1" and settled["answer"] == "" and "prompt too long" in settled["error"]
    assert TokenUsage.of_row(settled) == TokenUsage() and settled[SECONDS_COLUMN] == -1.0
    vllm, _ = _configs()
    engine_row = {"id": "c2", "generated_text": "x", "num_input_tokens": 20, "num_generated_tokens": 4,
                  "time_taken_llm": 1.5, ERROR_COLUMN: "", "prompt": None}
    good = {**engine_row, **_postprocess(engine_row, parse=parse, llm=vllm)}
    assert _settle(good, parse=parse, columns=("id", "answer", "error")) == {
        "id": "c2", "answer": "x", "error": "", **TokenUsage(20, 4).counts(), SECONDS_COLUMN: 1.5}
    http, _ = _configs({"backend": "openai-batch"})
    untimed = _postprocess({"id": "c3", "http_response": {"choices": [{"message": {"content": "y"}}]}},
                           parse=parse, llm=http)
    assert untimed[SECONDS_COLUMN] == -1.0 and TokenUsage.of_row(untimed) == TokenUsage(unmetered=1)


def test_backends_that_use_a_processor() -> None:
    assert [b for b in ("openai", "openai-batch", "transformers", "vllm", "none")
            if uses_processor(LLMConfig(backend=b))] == ["openai-batch", "vllm"]
    http = processor_config(*_configs({"backend": "openai-batch"}))
    assert isinstance(http, data_llm.HttpRequestProcessorConfig)
    with pytest.raises(ValueError, match="no ray.data.llm processor"):
        processor_config(*_configs({"backend": "openai"}))


@pytest.mark.skipif(not NO_VLLM, reason="vLLM is installed here")
def test_vllm_backend_without_vllm_fails_with_what_to_install(tmp_path) -> None:
    from lightrag_ray.index.pipeline import IndexRun
    from lightrag_ray.service.indexing import WriterOnDemand

    with pytest.raises(ImportError) as info:
        require_vllm(_configs()[0])
    assert str(info.value) == VLLM_MISSING and "pip install 'ray[llm]'" in VLLM_MISSING
    require_vllm(_configs({"backend": "openai-batch"})[0])  # no vLLM needed
    with pytest.raises(ImportError, match="ray\\[llm\\]"):
        processor_config(*_configs())
    settings = Settings(workspace=str(tmp_path / "ws"), llm=_configs()[0])
    with pytest.raises(ImportError, match="ray\\[llm\\]"):
        IndexRun(WriterOnDemand(settings), progress=None)
    assert not (tmp_path / "ws").exists(), "nothing is written before the check"
    assert "vllm" not in sys.modules, "a CPU install never imports vllm"


@pytest.mark.skipif(not NO_VLLM, reason="vLLM is installed here")
def test_cli_vllm_backend_without_vllm_is_one_line_before_any_work(tmp_path, capsys) -> None:
    from lightrag_ray.cli.main import main

    book = tmp_path / "book.txt"
    book.write_text("Ebenezer Scrooge kept his counting house in London.", encoding="utf-8")
    code = main(["index", str(book), "--workspace", str(tmp_path / "ws"), "--llm-backend", "vllm",
                 "--llm-model", MODEL])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "vllm" in err[0] and "pip install" in err[0]
    assert not (tmp_path / "ws").exists()


def test_gpu_smoke_script_indexes_the_book_with_the_vllm_backend(tmp_path) -> None:
    """scripts/gpu_smoke.sh with a stub `lightrag-ray` (no GPU here): the command it runs is a
    valid vllm indexing command, and it prints the counts and tokens/s of the report."""
    import json
    import os
    import shlex
    import subprocess
    from pathlib import Path

    from lightrag_ray.cli.main import _overrides, _parser
    from lightrag_ray.config import load_settings

    root = Path(__file__).resolve().parents[1]
    stub_dir = tmp_path / "bin"
    stub_dir.mkdir()
    calls = tmp_path / "calls"
    report = {"chunks": 40, "chunks_failed": 0, "entities": 500, "relations": 800, "summaries": 20,
              "llm_requests": 80, "llm_completion_tokens": 40000, "seconds": 20.0, "errors": []}
    stub = stub_dir / "lightrag-ray"
    stub.write_text(f"#!/bin/sh\necho \"$LIGHTRAG_RAY__EXTRACTION__NUM_GPUS $*\" > {shlex.quote(str(calls))}\n"
                    f"echo {shlex.quote(json.dumps(report))}\n")
    stub.chmod(0o755)
    env = {**os.environ, "PATH": f"{stub_dir}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(root / "scripts" / "gpu_smoke.sh"), "/models/qwen", "2", "0.5"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "entities 500, relations 800" in result.stdout and "2000 tokens/s" in result.stdout

    gpus, *argv = calls.read_text().split()
    assert argv[0] == "index" and argv[1].endswith("christmas_carol/mock_data.txt") and Path(argv[1]).is_file()
    args = _parser().parse_args(argv)
    settings = load_settings(None, _overrides(args), environ={"LIGHTRAG_RAY__EXTRACTION__NUM_GPUS": gpus})
    assert settings.llm.backend == "vllm" and settings.llm.model == "/models/qwen"
    assert (settings.extraction.actors, settings.extraction.num_gpus) == (2, 0.5)
    config = data_llm.vLLMEngineProcessorConfig(**vllm_processor_config(settings.llm, settings.extraction))
    assert config.placement_group_config["bundle_per_worker"]["GPU"] == 0.5


def test_index_help_says_what_each_backend_does_and_where(capsys) -> None:
    from lightrag_ray.cli.main import main

    with pytest.raises(SystemExit):
        main(["index", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for backend, where in [("openai", "extraction actors"), ("openai-batch", "ray.data.llm's HTTP request processor"),
                           ("transformers", "each extraction actor"), ("vllm", "GPU workers"), ("none", "no LLM")]:
        assert f"{backend} = " in text and where in text, backend
    assert "pip install 'ray[llm]'" in text
