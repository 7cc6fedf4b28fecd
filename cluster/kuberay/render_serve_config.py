"""The RayService's ``serveConfigV2``: the repo's serve_config.yaml with the cluster values.

    .venv/bin/python cluster/kuberay/render_serve_config.py          # print it
    .venv/bin/python cluster/kuberay/render_serve_config.py --check  # exit 1 if rayservice.yaml differs

Only the values in ``CLUSTER_VALUES`` / ``cluster_serve_config`` change; everything else
(deployments, autoscaling, body limit, embedder batching) is taken from serve_config.yaml,
so after editing serve_config.yaml re-render and paste the output into rayservice.yaml
(tests/test_cluster_files.py fails until they agree). Edit the constants below for your
bucket, Milvus service and model, then re-render.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RAYSERVICE = Path(__file__).resolve().parent / "rayservice.yaml"

WORKSPACE_URI = "s3://lightrag-bucket/workspace"  # same value as LIGHTRAG_RAY__WORKSPACE in configmap.yaml
MILVUS_URI = "http://milvus.milvus.svc.cluster.local:19530"  # Helm release "milvus" in namespace "milvus"
LLM_MODEL_ID = "lightrag-llm"  # name the vLLM app serves; llm.model of the lightrag app
LLM_MODEL_SOURCE = "Qwen/Qwen2.5-7B-Instruct"  # Hugging Face id, downloaded by the GPU workers
LLM_MAX_REPLICAS = 2  # vLLM replicas (1 GPU each): at most the GPU worker group's maxReplicas

# Keys of the serve config that take cluster values; tests/test_cluster_files.py allows
# exactly these to differ from serve_config.yaml.
CLUSTER_VALUES = {
    "proxy_location": "EveryNode",  # a proxy on every node with replicas; the K8s serve service spreads over them
    "http_options.host": "0.0.0.0",  # reachable through the pod IPs (the KubeRay serve service)
    "applications[lightrag].args.workspace": WORKSPACE_URI,
    "applications[lightrag].args.settings": {
        "llm": {"backend": "openai", "base_url": "http://127.0.0.1:8000/llm/v1", "model": LLM_MODEL_ID},
        "extraction": {"mode": "llm"},  # inserts through /documents/* extract with the GPU LLM
        "vectors": {"uri": MILVUS_URI},
    },
    "applications[llm]": "lightrag_ray.serve.vllm_app.vllm_application(...)",
}


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        merged[key] = _merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


def vllm_app() -> dict[str, Any]:
    """The GPU LLM application, written by the project's own helper."""
    sys.path.insert(0, str(ROOT))
    from lightrag_ray.serve.vllm_app import VLLMServeArgs, vllm_application

    return vllm_application(
        VLLMServeArgs(model_id=LLM_MODEL_ID, model_source=LLM_MODEL_SOURCE, min_replicas=1, max_replicas=LLM_MAX_REPLICAS)
    )


def cluster_serve_config(local: dict[str, Any] | None = None) -> dict[str, Any]:
    """serve_config.yaml (or ``local``) with the cluster values and the vLLM application."""
    config = copy.deepcopy(local if local is not None else yaml.safe_load((ROOT / "serve_config.yaml").read_text()))
    config["proxy_location"] = CLUSTER_VALUES["proxy_location"]
    config["http_options"]["host"] = CLUSTER_VALUES["http_options.host"]
    (app,) = [a for a in config["applications"] if a["name"] == "lightrag"]
    app["args"]["workspace"] = WORKSPACE_URI
    app["args"]["settings"] = _merge(app["args"].get("settings") or {}, CLUSTER_VALUES["applications[lightrag].args.settings"])
    config["applications"].append(vllm_app())
    return config


def render() -> str:
    return yaml.safe_dump(cluster_serve_config(), sort_keys=False, default_flow_style=False)


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        manifest = yaml.safe_load(RAYSERVICE.read_text())
        current = yaml.safe_load(manifest["spec"]["serveConfigV2"])
        if current != cluster_serve_config():
            print(f"{RAYSERVICE} is stale: paste the output of {Path(argv[0]).name} into spec.serveConfigV2", file=sys.stderr)
            return 1
        print("serveConfigV2 is up to date")
        return 0
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
