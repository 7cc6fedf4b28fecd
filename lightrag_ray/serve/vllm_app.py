"""vLLM on GPUs for the Serve app, through Ray Serve LLM (``ray.serve.llm``).

The lightrag app never imports vLLM: on GPU clusters a second Serve application,
``ray.serve.llm:build_openai_app``, hosts the model behind an OpenAI-compatible route
(``/llm/v1``), and the lightrag app's LLM deployment calls it with ``llm.backend: openai``.
``vllm_application`` writes that application's serve-config entry (the shape Ray's
documentation gives: ``args.llm_configs`` of LLMConfig fields); ``build_vllm_app`` builds
it in Python where ``ray[llm]`` is installed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

RAY_LLM_MISSING = "serving with vLLM needs `pip install ray[llm]` (vLLM) on the GPU nodes"
OPENAI_APP_IMPORT_PATH = "ray.serve.llm:build_openai_app"


class VLLMServeArgs(BaseModel):
    """One open model served by vLLM on GPUs."""

    model_config = ConfigDict(extra="forbid")

    model_id: str = Field("lightrag-llm", description="Name clients send as `model` (llm.model of the lightrag app).")
    model_source: str = Field(..., description="Hugging Face id or model directory, e.g. Qwen/Qwen2.5-7B-Instruct.")
    accelerator_type: str | None = Field(None, description="GPU type to schedule on, e.g. L4, A10G, H100.")
    tensor_parallel_size: int = Field(1, gt=0, description="GPUs per replica.")
    max_model_len: int = Field(8192, gt=0)
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(2, gt=0)
    target_ongoing_requests: int = Field(32, gt=0, description="Autoscaling target per replica.")


def vllm_llm_config(args: VLLMServeArgs) -> dict[str, Any]:
    """The ``LLMConfig`` fields (``ray.serve.llm.LLMConfig``) for ``args``."""
    config: dict[str, Any] = {
        "model_loading_config": {"model_id": args.model_id, "model_source": args.model_source},
        "engine_kwargs": {
            "max_model_len": args.max_model_len,
            "tensor_parallel_size": args.tensor_parallel_size,
            "gpu_memory_utilization": args.gpu_memory_utilization,
            "enable_prefix_caching": True,  # every keyword/answer prompt starts the same way
        },
        "deployment_config": {
            "autoscaling_config": {
                "min_replicas": args.min_replicas, "max_replicas": args.max_replicas,
                "target_ongoing_requests": args.target_ongoing_requests,
            },
        },
    }
    if args.accelerator_type:
        config["accelerator_type"] = args.accelerator_type
    return config


def vllm_application(args: VLLMServeArgs, name: str = "llm", route_prefix: str = "/llm") -> dict[str, Any]:
    """A serve-config ``applications`` entry serving the model at ``<route_prefix>/v1``."""
    return {
        "name": name, "route_prefix": route_prefix, "import_path": OPENAI_APP_IMPORT_PATH,
        "args": {"llm_configs": [vllm_llm_config(args)]},
    }


def build_vllm_app(args: VLLMServeArgs) -> Any:
    """The Ray Serve LLM OpenAI app for ``args`` (raises ImportError without ray[llm])."""
    try:
        from ray.serve.llm import LLMConfig, build_openai_app
    except ImportError as exc:
        raise ImportError(f"{RAY_LLM_MISSING} ({exc})") from exc
    return build_openai_app({"llm_configs": [LLMConfig(**vllm_llm_config(args))]})
