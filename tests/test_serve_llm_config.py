"""The vLLM (Ray Serve LLM) application config, checked on CPU against Ray's own sources."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
import yaml

from lightrag_ray.serve.vllm_app import VLLMServeArgs, build_vllm_app, vllm_application, vllm_llm_config
from tests.serve_schema import validate_serve_config

ROOT = Path(__file__).resolve().parents[1]


def _fields_of(path: Path, class_name: str) -> set[str]:
    """Annotated fields of a pydantic class in a Ray source file (read, not imported:
    importing ray.serve.llm needs vLLM)."""
    tree = ast.parse(path.read_text())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name)
    return {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def _ray_llm_config_file() -> Path:
    spec = importlib.util.find_spec("ray")
    return Path(spec.origin).parent / "llm" / "_internal" / "serve" / "core" / "configs" / "llm_config.py"


def test_llm_config_uses_only_fields_ray_defines():
    config = vllm_llm_config(VLLMServeArgs(model_source="Qwen/Qwen2.5-7B-Instruct", accelerator_type="L4",
                                           tensor_parallel_size=2))
    source = _ray_llm_config_file()
    assert set(config) <= _fields_of(source, "LLMConfig")
    assert set(config["model_loading_config"]) <= _fields_of(source, "ModelLoadingConfig")
    assert config["engine_kwargs"]["tensor_parallel_size"] == 2 and config["accelerator_type"] == "L4"
    from ray.serve.config import AutoscalingConfig
    from ray.serve.schema import DeploymentSchema

    assert set(config["deployment_config"]) <= set(DeploymentSchema.model_fields)
    AutoscalingConfig.model_validate(config["deployment_config"]["autoscaling_config"])


def test_vllm_application_sits_beside_the_lightrag_app_in_one_valid_serve_config():
    config = yaml.safe_load((ROOT / "serve_config.yaml").read_text())
    config["applications"].append(vllm_application(VLLMServeArgs(model_source="Qwen/Qwen2.5-7B-Instruct")))
    schema = validate_serve_config(config)
    llm_app = schema.applications[1]
    assert llm_app.import_path == "ray.serve.llm:build_openai_app" and llm_app.route_prefix == "/llm"


def test_args_reject_unknown_keys():
    with pytest.raises(ValueError):
        VLLMServeArgs(model_source="m", gpus=2)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_build_needs_ray_llm_and_says_so():
    with pytest.raises(ImportError, match=r"ray\[llm\]"):
        build_vllm_app(VLLMServeArgs(model_source="Qwen/Qwen2.5-7B-Instruct"))
