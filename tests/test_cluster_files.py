"""cluster/: the Dockerfile, KubeRay manifests and cluster-launcher config, checked offline.

No Docker, Kubernetes or cloud here, so these tests check what can be checked without them:
structure against the schemas Ray and KubeRay define, and agreement between the files (Ray
version, image tags, URIs, the RayService's serveConfigV2 vs serve_config.yaml).
"""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from lightrag_ray.config import Settings, load_settings
from lightrag_ray.ray_runtime import LOCAL_CLUSTER_ENV
from lightrag_ray.serve.app import AppArgs, app_settings
from tests.serve_schema import validate_serve_config

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "cluster"
KUBERAY = CLUSTER / "kuberay"
PODMONITOR_FILE = CLUSTER / "monitoring" / "podmonitor.yaml"
DOCKERFILE = CLUSTER / "docker" / "Dockerfile"

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
RAY_PIN = next(str(r.specifier).removeprefix("==") for r in map(Requirement, PYPROJECT["project"]["dependencies"])
               if r.name == "ray")
VERSION = PYPROJECT["project"]["version"]
TORCH_PIN = re.search(r'"torch==([^"]+)"', (ROOT / "scripts" / "bootstrap.sh").read_text()).group(1)
IMAGE_REPO = "ghcr.io/lightrag-ray/lightrag-ray"
IMAGES = {variant: f"{IMAGE_REPO}:{VERSION}-ray{RAY_PIN}-{variant}" for variant in ("cpu", "gpu")}
SHARED_CONFIG, INDEX_CONFIG, SECRET = "lightrag-ray-config", "lightrag-ray-index", "lightrag-ray-secrets"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _one(path: Path) -> dict[str, Any]:
    (doc,) = _docs(path)
    return doc


def _render_module():
    spec = importlib.util.spec_from_file_location("render_serve_config", KUBERAY / "render_serve_config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RAYCLUSTER, RAYJOB, RAYJOB_GPU, RAYSERVICE = (
    _one(KUBERAY / f) for f in ("raycluster.yaml", "rayjob.yaml", "rayjob-gpu.yaml", "rayservice.yaml"))
CLUSTER_SPECS = {  # every RayClusterSpec in the manifests
    "RayCluster": RAYCLUSTER["spec"],
    "RayJob": RAYJOB["spec"]["rayClusterSpec"],
    "RayJob-GPU": RAYJOB_GPU["spec"]["rayClusterSpec"],
    "RayService": RAYSERVICE["spec"]["rayClusterConfig"],
}
CONFIGMAPS = {d["metadata"]["name"]: d for d in _docs(KUBERAY / "configmap.yaml")}
SERVE_V2 = yaml.safe_load(RAYSERVICE["spec"]["serveConfigV2"])
LOCAL_SERVE = yaml.safe_load((ROOT / "serve_config.yaml").read_text())


def _app(config: dict[str, Any], name: str) -> dict[str, Any]:
    (app,) = [a for a in config["applications"] if a["name"] == name]
    return app


def _groups(spec: dict[str, Any]):
    """(name, group spec, is_head) for the head and every worker group."""
    yield "head", spec["headGroupSpec"], True
    for group in spec.get("workerGroupSpecs", []):
        yield group["groupName"], group, False


def _gpus(group: dict[str, Any]) -> int:
    return max(int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
               for c in group["template"]["spec"]["containers"])


# --- KubeRay: the fields of ray.io/v1 (ray-operator/apis/ray/v1/*_types.go) used here ----------------
# Required = the json tags without omitempty; additionalProperties: false at the levels written
# here catches a misspelt field (the API server would prune it silently).

_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_POD_TEMPLATE = {
    "type": "object", "required": ["spec"],
    "properties": {"spec": {
        "type": "object", "required": ["containers"],
        "properties": {"containers": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["name", "image"],
            "properties": {"name": {"type": "string"}, "image": {"type": "string"}}}}}}},
}
_COMMON_GROUP = {"rayStartParams": _STR_MAP, "template": _POD_TEMPLATE}
RAY_CLUSTER_SPEC = {
    "type": "object", "required": ["headGroupSpec"], "additionalProperties": False,
    "properties": {
        "rayVersion": {"type": "string"},
        "enableInTreeAutoscaling": {"type": "boolean"},
        "autoscalerOptions": {
            "type": "object", "additionalProperties": False,
            "properties": {k: {} for k in ("resources", "image", "imagePullPolicy", "env", "envFrom", "volumeMounts",
                                            "securityContext", "idleTimeoutSeconds", "version")}
            | {"upscalingMode": {"enum": ["Default", "Aggressive", "Conservative"]}}},
        "headServiceAnnotations": _STR_MAP, "suspend": {"type": "boolean"}, "gcsFaultToleranceOptions": {},
        "headGroupSpec": {
            "type": "object", "required": ["rayStartParams", "template"], "additionalProperties": False,
            "properties": _COMMON_GROUP | {k: {} for k in ("serviceType", "headService", "enableIngress")}},
        "workerGroupSpecs": {"type": "array", "items": {
            "type": "object", "additionalProperties": False,
            "required": ["groupName", "minReplicas", "maxReplicas", "rayStartParams", "template"],
            "properties": _COMMON_GROUP | {
                "groupName": {"type": "string"},
                "replicas": {"type": "integer", "minimum": 0},
                "minReplicas": {"type": "integer", "minimum": 0},
                "maxReplicas": {"type": "integer", "minimum": 1},
                "numOfHosts": {"type": "integer"}, "scaleStrategy": {}, "suspend": {"type": "boolean"},
                "idleTimeoutSeconds": {"type": "integer"}}}},
    },
}
_META = {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}}}
KUBERAY_SCHEMAS = {
    "RayCluster": {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
                   "properties": {"apiVersion": {"const": "ray.io/v1"}, "metadata": _META,
                                  "spec": RAY_CLUSTER_SPEC | {"required": ["headGroupSpec", "rayVersion"]}}},
    "RayJob": {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
               "properties": {"apiVersion": {"const": "ray.io/v1"}, "metadata": _META, "spec": {
                   "type": "object", "required": ["entrypoint", "rayClusterSpec"], "additionalProperties": False,
                   "properties": {
                       "entrypoint": {"type": "string", "minLength": 1},
                       "rayClusterSpec": RAY_CLUSTER_SPEC | {"required": ["headGroupSpec", "rayVersion"]},
                       "shutdownAfterJobFinishes": {"type": "boolean"},
                       "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
                       "backoffLimit": {"type": "integer", "minimum": 0},
                       "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
                       **{k: {} for k in ("runtimeEnvYAML", "jobId", "submissionMode", "submitterPodTemplate",
                                          "submitterConfig", "metadata", "clusterSelector", "suspend",
                                          "entrypointNumCpus", "entrypointNumGpus", "entrypointResources",
                                          "managedBy", "deletionStrategy")}}}}},
    "RayService": {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
                   "properties": {"apiVersion": {"const": "ray.io/v1"}, "metadata": _META, "spec": {
                       "type": "object", "required": ["serveConfigV2", "rayClusterConfig"], "additionalProperties": False,
                       "properties": {
                           "serveConfigV2": {"type": "string"},
                           "rayClusterConfig": RAY_CLUSTER_SPEC | {"required": ["headGroupSpec", "rayVersion"]},
                           **{k: {} for k in ("upgradeStrategy", "serveService", "excludeHeadPodFromServeSvc",
                                              "serviceUnhealthySecondThreshold",
                                              "deploymentUnhealthySecondThreshold")}}}}},
}


def test_every_yaml_file_parses():
    files = sorted(CLUSTER.rglob("*.yaml"))
    assert {f.relative_to(CLUSTER).as_posix() for f in files} >= {
        "ray-cluster.yaml", "kuberay/raycluster.yaml", "kuberay/rayjob.yaml", "kuberay/rayjob-gpu.yaml",
        "kuberay/rayservice.yaml",
        "kuberay/configmap.yaml", "kuberay/secret.example.yaml", "monitoring/podmonitor.yaml", "monitoring/alerts.yaml"}
    for path in files:
        docs = _docs(path)
        assert docs and all(isinstance(d, dict) for d in docs), path
    for path in [*KUBERAY.glob("*.yaml"), PODMONITOR_FILE]:
        for doc in _docs(path):
            assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"], path
            assert doc["metadata"].get("namespace") == "lightrag", f"{path}: all objects live in namespace lightrag"


@pytest.mark.parametrize("kind", sorted(KUBERAY_SCHEMAS))
def test_kuberay_manifest_has_the_fields_its_kind_requires(kind):
    manifest = {"RayCluster": RAYCLUSTER, "RayJob": RAYJOB, "RayService": RAYSERVICE}[kind]
    assert manifest["kind"] == kind
    jsonschema.validate(manifest, KUBERAY_SCHEMAS[kind])


def test_gpu_rayjob_has_the_fields_a_rayjob_requires():
    assert RAYJOB_GPU["kind"] == "RayJob"
    jsonschema.validate(RAYJOB_GPU, KUBERAY_SCHEMAS["RayJob"])
    bad = copy.deepcopy(RAYJOB_GPU)
    bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][1]["maxReplica"] = 4
    with pytest.raises(jsonschema.ValidationError, match="maxReplica"):
        jsonschema.validate(bad, KUBERAY_SCHEMAS["RayJob"])


def test_the_kuberay_schema_catches_typos():
    bad = copy.deepcopy(RAYCLUSTER)
    bad["spec"]["workerGroupSpecs"][0]["maxReplica"] = 3
    with pytest.raises(jsonschema.ValidationError, match="maxReplica"):
        jsonschema.validate(bad, KUBERAY_SCHEMAS["RayCluster"])
    bad = copy.deepcopy(RAYCLUSTER)
    bad["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] = 0  # KubeRay wants strings
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, KUBERAY_SCHEMAS["RayCluster"])


@pytest.mark.parametrize("kind", sorted(CLUSTER_SPECS))
def test_head_does_no_work_and_groups_autoscale(kind):
    spec = CLUSTER_SPECS[kind]
    assert spec["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    assert spec["enableInTreeAutoscaling"] is True
    workers = spec["workerGroupSpecs"]
    assert any(_gpus(g) == 0 for g in workers), "a CPU worker group"
    for group in workers:
        assert 0 <= group["minReplicas"] <= group.get("replicas", group["minReplicas"]) <= group["maxReplicas"], group["groupName"]
    assert len({g["groupName"] for g in workers}) == len(workers)


@pytest.mark.parametrize("kind", ["RayCluster", "RayJob-GPU", "RayService"])
def test_gpu_worker_group_requests_nvidia_gpus(kind):
    gpu_groups = [g for g in CLUSTER_SPECS[kind]["workerGroupSpecs"] if _gpus(g) >= 1]
    assert gpu_groups, f"{kind} needs a worker group with resources.limits nvidia.com/gpu"
    for group in gpu_groups:
        for container in group["template"]["spec"]["containers"]:
            assert container["image"] == IMAGES["gpu"]


def test_ray_version_is_the_pin_everywhere():
    assert re.fullmatch(r"\d+\.\d+\.\d+", RAY_PIN)
    for kind, spec in CLUSTER_SPECS.items():
        assert spec["rayVersion"] == RAY_PIN, kind
    import ray

    assert ray.__version__ == RAY_PIN, "the venv's Ray is the pinned one"
    froms = [line.split()[1] for line in _dockerfile_instructions() if line.startswith("FROM ")]
    assert {f for f in froms if f.startswith("rayproject/")} == {f"rayproject/ray:{RAY_PIN}-py311",
                                                                  f"rayproject/ray:{RAY_PIN}-py311-gpu"}


def test_image_tags_are_the_same_in_every_manifest_and_the_launcher_config():
    used: dict[str, set[str]] = {}
    for kind, spec in CLUSTER_SPECS.items():
        for name, group, _ in _groups(spec):
            for container in group["template"]["spec"]["containers"]:
                used.setdefault(container["image"], set()).add(f"{kind}/{name}")
    launcher = yaml.safe_load((CLUSTER / "ray-cluster.yaml").read_text())
    used.setdefault(launcher["docker"]["image"], set()).add("ray-cluster.yaml")
    assert set(used) <= set(IMAGES.values()), used
    assert set(used) == set(IMAGES.values())
    # The RayService builds ray.serve.llm (needs vLLM, only in the -gpu image) on any node.
    for name, group, _ in _groups(CLUSTER_SPECS["RayService"]):
        assert all(c["image"] == IMAGES["gpu"] for c in group["template"]["spec"]["containers"]), name
    # Images the README and the Dockerfile say to build are these.
    readme, dockerfile = (CLUSTER / "README.md").read_text(), DOCKERFILE.read_text()
    for variant, image in IMAGES.items():
        command = f"docker build -f cluster/docker/Dockerfile --build-arg VARIANT={variant} -t {image} ."
        assert command in readme and command in dockerfile


def test_pods_read_the_configmap_and_secret_that_exist():
    secret = _one(KUBERAY / "secret.example.yaml")
    assert secret["kind"] == "Secret" and secret["metadata"]["name"] == SECRET
    assert set(CONFIGMAPS) == {SHARED_CONFIG, INDEX_CONFIG}
    for kind, spec in CLUSTER_SPECS.items():
        for name, group, _ in _groups(spec):
            for container in group["template"]["spec"]["containers"]:
                refs = container.get("envFrom", [])
                maps = [r["configMapRef"]["name"] for r in refs if "configMapRef" in r]
                secrets = [r["secretRef"]["name"] for r in refs if "secretRef" in r]
                assert SHARED_CONFIG in maps and secrets == [SECRET], f"{kind}/{name}"
                assert set(maps) <= set(CONFIGMAPS)
                assert (INDEX_CONFIG in maps) == (kind == "RayJob"), f"{kind}/{name}: the index LLM is the job's only"


def test_shared_configmap_sets_no_llm_settings():
    # LIGHTRAG_RAY__* variables override args.settings of the Serve app: LLM keys here would
    # point the RayService's lightrag app away from its vLLM application.
    for doc in (CONFIGMAPS[SHARED_CONFIG], _one(KUBERAY / "secret.example.yaml")):
        data = doc.get("data") or doc.get("stringData")
        assert not [k for k in data if k.startswith("LIGHTRAG_RAY__LLM__")]


def _job_settings() -> tuple[Settings, list[str]]:
    """The settings the RayJob's driver ends up with (CLI flags over the pods' environment)."""
    from lightrag_ray.cli.main import _overrides, _parser

    argv = shlex.split(RAYJOB["spec"]["entrypoint"])
    assert argv[:2] == ["lightrag-ray", "index"]
    args = _parser().parse_args(argv[1:])
    environ = {**CONFIGMAPS[SHARED_CONFIG]["data"], **CONFIGMAPS[INDEX_CONFIG]["data"]}
    return load_settings(args.config, _overrides(args), environ=environ), args.paths


def test_rayjob_indexes_object_storage_into_the_shared_workspace():
    spec = RAYJOB["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and spec["ttlSecondsAfterFinished"] > 0
    settings, paths = _job_settings()
    assert paths and all(p.startswith("s3://") for p in paths)
    assert settings.workspace == CONFIGMAPS[SHARED_CONFIG]["data"]["LIGHTRAG_RAY__WORKSPACE"]
    assert settings.workspace.startswith("s3://") and settings.milvus_uri().startswith("http")
    assert settings.llm.backend == "openai" and settings.extraction.mode == "llm"


def _gpu_job_settings() -> Settings:
    """The settings the GPU RayJob's driver ends up with: flags over the head's environment."""
    from lightrag_ray.cli.main import _overrides, _parser

    argv = shlex.split(RAYJOB_GPU["spec"]["entrypoint"])
    assert argv[:2] == ["lightrag-ray", "index"]
    args = _parser().parse_args(argv[1:])
    (head,) = RAYJOB_GPU["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
    environ = {**CONFIGMAPS[SHARED_CONFIG]["data"], **{e["name"]: e["value"] for e in head.get("env", [])}}
    return load_settings(args.config, _overrides(args), environ=environ)


def test_gpu_rayjob_runs_vllm_engines_that_fit_its_gpu_group():
    from ray.data.llm import vLLMEngineProcessorConfig

    from lightrag_ray.models.llm_processor import vllm_processor_config

    spec = RAYJOB_GPU["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and spec["ttlSecondsAfterFinished"] > 0
    settings = _gpu_job_settings()
    assert settings.llm.backend == "vllm" and settings.extraction.mode == "llm"
    assert settings.workspace.startswith("s3://") and settings.milvus_uri().startswith("http")
    config = vLLMEngineProcessorConfig(**vllm_processor_config(settings.llm, settings.extraction))
    assert config.concurrency == settings.extraction.actors
    # every pod has the vLLM image (the driver checks vLLM before it starts; CPU workers run
    # the tokenizer stages), and the engines fit the GPU group
    groups = list(_groups(spec["rayClusterSpec"]))
    assert all(c["image"] == IMAGES["gpu"] for _, g, _ in groups for c in g["template"]["spec"]["containers"])
    (gpu,) = [g for _, g, head in groups if not head and _gpus(g) >= 1]
    gpus_per_engine = settings.extraction.num_gpus or 1.0  # 0 means one whole GPU
    assert gpus_per_engine <= _gpus(gpu), "an engine (tensor parallel) must fit in one pod"
    engines_per_pod = int(_gpus(gpu) // gpus_per_engine) if gpus_per_engine >= 1 else int(_gpus(gpu) / gpus_per_engine)
    assert gpu["maxReplicas"] * engines_per_pod >= settings.extraction.actors
    assert any(_gpus(g) == 0 for _, g, head in groups if not head), "CPU workers for shards and tokenizers"


def test_rayservice_serve_config_passes_rays_schema_and_the_apps_args():
    schema = validate_serve_config(SERVE_V2)
    assert schema.proxy_location.value == "EveryNode" and schema.http_options.host == "0.0.0.0"
    args = AppArgs.model_validate(_app(SERVE_V2, "lightrag")["args"])
    settings = load_settings(args.config, defaults={**args.settings, "workspace": args.workspace}, environ={})
    assert Settings.model_validate(settings.model_dump()) == settings
    assert settings.workspace == CONFIGMAPS[SHARED_CONFIG]["data"]["LIGHTRAG_RAY__WORKSPACE"] == _job_settings()[0].workspace
    assert settings.milvus_uri() == CONFIGMAPS[SHARED_CONFIG]["data"]["LIGHTRAG_RAY__VECTORS__URI"]
    assert args.api_key is None, "the API key comes from the Secret, not the manifest"


def test_serve_hands_build_app_its_args_as_the_typed_model(monkeypatch):
    """Serve validates a builder's args only when its annotation is a class (no postponed annotations)."""
    from ray.serve._private.api import call_user_app_builder_with_args_if_necessary

    import lightrag_ray.serve.app as app_module

    class Seen(Exception):
        pass

    def capture(args):
        raise Seen(args)

    monkeypatch.setattr(app_module, "app_settings", capture)
    with pytest.raises(Seen) as seen:
        call_user_app_builder_with_args_if_necessary(app_module.build_app, _app(SERVE_V2, "lightrag")["args"])
    assert isinstance(seen.value.args[0], AppArgs)


def test_rayservice_settings_survive_the_pods_environment(monkeypatch):
    for key in [k for k in os.environ if k.startswith("LIGHTRAG_RAY")]:
        monkeypatch.delenv(key)
    for key, value in CONFIGMAPS[SHARED_CONFIG]["data"].items():
        monkeypatch.setenv(key, value)
    settings = app_settings(AppArgs.model_validate(_app(SERVE_V2, "lightrag")["args"]))
    llm_app = _app(SERVE_V2, "llm")
    (llm_config,) = llm_app["args"]["llm_configs"]
    assert settings.llm.backend == "openai"
    assert settings.llm.base_url == f"http://127.0.0.1:{SERVE_V2['http_options']['port']}{llm_app['route_prefix']}/v1"
    assert settings.llm.model == llm_config["model_loading_config"]["model_id"]


def test_vllm_application_fits_the_gpu_worker_group():
    (llm_config,) = _app(SERVE_V2, "llm")["args"]["llm_configs"]
    assert _app(SERVE_V2, "llm")["import_path"] == "ray.serve.llm:build_openai_app"
    gpus_per_replica = llm_config["engine_kwargs"]["tensor_parallel_size"]
    max_replicas = llm_config["deployment_config"]["autoscaling_config"]["max_replicas"]
    groups = [g for g in CLUSTER_SPECS["RayService"]["workerGroupSpecs"] if _gpus(g) >= 1]
    assert sum(g["maxReplicas"] * _gpus(g) for g in groups) >= max_replicas * gpus_per_replica


def _differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Dotted paths of the leaves that differ (a mapping missing on one side counts as empty)."""
    if isinstance(a, dict) or isinstance(b, dict):
        a, b = ({} if a is None else a), ({} if b is None else b)
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in a.keys() | b.keys() for d in _differences(a.get(k), b.get(k), f"{where}.{k}" if where else k)]
    return [] if a == b else [where]


def test_serve_config_v2_differs_from_serve_config_only_in_cluster_values():
    assert [a["name"] for a in SERVE_V2["applications"]] == [a["name"] for a in LOCAL_SERVE["applications"]] + ["llm"]
    local, cluster = _app(LOCAL_SERVE, "lightrag"), _app(SERVE_V2, "lightrag")
    assert cluster["deployments"] == local["deployments"]
    assert cluster["import_path"] == local["import_path"] and cluster["route_prefix"] == local["route_prefix"]
    local_top = {k: v for k, v in LOCAL_SERVE.items() if k != "applications"}
    cluster_top = {k: v for k, v in SERVE_V2.items() if k != "applications"}
    allowed = {"proxy_location", "http_options.host"}
    assert set(_differences(local_top, cluster_top)) <= allowed
    allowed_app = {"args.workspace", "args.settings.llm.backend", "args.settings.llm.base_url", "args.settings.llm.model",
                   "args.settings.extraction.mode", "args.settings.vectors.uri"}
    assert set(_differences(local, cluster)) <= allowed_app, set(_differences(local, cluster)) - allowed_app


def test_serve_config_v2_is_what_the_render_script_writes():
    render = _render_module()
    assert SERVE_V2 == render.cluster_serve_config(), "re-render: python cluster/kuberay/render_serve_config.py"
    assert render.main(["render_serve_config.py", "--check"]) == 0
    from lightrag_ray.serve.vllm_app import VLLMServeArgs, vllm_application

    assert _app(SERVE_V2, "llm") == vllm_application(VLLMServeArgs(
        model_id=render.LLM_MODEL_ID, model_source=render.LLM_MODEL_SOURCE, max_replicas=render.LLM_MAX_REPLICAS))


def test_local_serve_config_passes_rays_schema_too():
    validate_serve_config(LOCAL_SERVE)


# --- monitoring: every Ray pod's metrics agent, scraped through a PodMonitor ------------------------

METRICS_PORT = {"containerPort": 8080, "name": "metrics"}  # KubeRay's default --metrics-export-port
# Labels KubeRay puts on the pods it creates, besides ray.io/node-type (ray-operator: controllers/ray/
# common/pod.go, utils/constant.go)
KUBERAY_POD_LABELS = {"app.kubernetes.io/name": "kuberay", "app.kubernetes.io/created-by": "kuberay-operator",
                      "ray.io/cluster": "lightrag"}
# monitoring.coreos.com/v1 PodMonitor: the fields written here (additionalProperties catches typos)
PODMONITOR_SCHEMA = {
    "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"}, "kind": {"const": "PodMonitor"}, "metadata": _META,
        "spec": {"type": "object", "required": ["selector", "podMetricsEndpoints"], "additionalProperties": False,
                 "properties": {
                     "jobLabel": {"type": "string"}, "namespaceSelector": {"type": "object"},
                     "selector": {"type": "object", "additionalProperties": False,
                                  "properties": {"matchLabels": _STR_MAP, "matchExpressions": {"type": "array", "items": {
                                      "type": "object", "required": ["key", "operator"],
                                      "properties": {"operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]}}}}}},
                     "podMetricsEndpoints": {"type": "array", "minItems": 1, "items": {
                         "type": "object", "required": ["port"], "additionalProperties": False,
                         "properties": {"port": {"type": "string"}, "path": {"type": "string"},
                                        "interval": {"type": "string", "pattern": r"^\d+[smh]$"},
                                        "relabelings": {"type": "array"}}}}}},
    },
}


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a Kubernetes label selector matches ``labels``."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for rule in selector.get("matchExpressions", []):
        present, value = rule["key"] in labels, labels.get(rule["key"])
        if not {"In": present and value in rule.get("values", []), "NotIn": value not in rule.get("values", []),
                "Exists": present, "DoesNotExist": not present}[rule["operator"]]:
            return False
    return True


@pytest.mark.parametrize("kind", sorted(CLUSTER_SPECS))
def test_every_ray_container_names_its_metrics_port(kind):
    for name, group, _ in _groups(CLUSTER_SPECS[kind]):
        ray_container = group["template"]["spec"]["containers"][0]  # KubeRay runs `ray start` in the first
        assert METRICS_PORT in ray_container.get("ports", []), f"{kind}/{name}"
        assert group["rayStartParams"].get("metrics-export-port", "8080") == "8080", f"{kind}/{name}"


def test_podmonitor_scrapes_the_metrics_port_of_head_and_worker_pods():
    monitor = _one(PODMONITOR_FILE)
    jsonschema.validate(monitor, PODMONITOR_SCHEMA)
    spec = monitor["spec"]
    assert [e["port"] for e in spec["podMetricsEndpoints"]] == [METRICS_PORT["name"]]
    for node_type in ("head", "worker"):
        assert _selects(spec["selector"], KUBERAY_POD_LABELS | {"ray.io/node-type": node_type}), node_type
    assert not _selects(spec["selector"], {"app.kubernetes.io/name": "kuberay-operator"}), "not the operator's pod"
    bad = copy.deepcopy(monitor)
    bad["spec"]["podMetricsEndpoint"] = bad["spec"].pop("podMetricsEndpoints")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, PODMONITOR_SCHEMA)


# --- cluster launcher ----------------------------------------------------------------------------


def test_ray_cluster_yaml_passes_the_launcher_schema_in_the_ray_wheel():
    from ray.autoscaler._private.util import prepare_config, validate_config

    schema_file = Path(importlib.util.find_spec("ray").origin).parent / "autoscaler" / "ray-schema.json"
    assert schema_file.is_file()
    config = yaml.safe_load((CLUSTER / "ray-cluster.yaml").read_text())
    validate_config(config)  # jsonschema against ray-schema.json, as `ray up` does
    validate_config(prepare_config(copy.deepcopy(config)))  # after Ray fills in the AWS defaults
    bad = copy.deepcopy(config)
    bad["available_node_types"]["gpu_worker"]["max_worker"] = 4
    with pytest.raises(jsonschema.ValidationError):
        validate_config(bad)


def test_ray_cluster_yaml_has_a_cpu_head_and_gpu_workers():
    config = yaml.safe_load((CLUSTER / "ray-cluster.yaml").read_text())
    assert config["provider"]["type"] == "aws"
    types = config["available_node_types"]
    head = types[config["head_node_type"]]
    assert head["resources"] == {"CPU": 0} and "GPU" not in head["resources"]
    assert any("--num-cpus=0" in cmd for cmd in config["head_start_ray_commands"])
    gpu = [t for name, t in types.items() if t.get("resources", {}).get("GPU", 0) >= 1]
    assert gpu and all(0 <= t["min_workers"] < t["max_workers"] <= config["max_workers"] for t in gpu)
    assert config["docker"]["image"] == IMAGES["gpu"]


# --- Dockerfile (docker build cannot run here) ------------------------------------------------------


def _dockerfile_instructions() -> list[str]:
    """Instructions with continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        if not current and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        current += raw.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        lines.append(" ".join(current.split()) if not current.startswith("RUN ") else current)
        current = ""
    return lines


def _args(instructions: list[str]) -> dict[str, str]:
    return dict(line.split(None, 1)[1].split("=", 1) for line in instructions if line.startswith("ARG ") and "=" in line)


def test_dockerfile_builds_on_the_pinned_ray_image_chosen_by_variant():
    instructions = _dockerfile_instructions()
    assert instructions[0] == "ARG VARIANT=cpu", "VARIANT must be declared before FROM to be used in FROM"
    froms = [line.split()[1:] for line in instructions if line.startswith("FROM ")]
    stages = {f[2]: f[0] for f in froms if len(f) == 3 and f[1].upper() == "AS"}
    assert stages == {"base-cpu": f"rayproject/ray:{RAY_PIN}-py311", "base-gpu": f"rayproject/ray:{RAY_PIN}-py311-gpu"}
    assert froms[-1] == ["base-${VARIANT}"]
    args = _args(instructions)
    assert args["RAY_VERSION"] == RAY_PIN and args["TORCH_VERSION"] == TORCH_PIN == "2.13.0"
    assert not [line for line in instructions if line.startswith("ADD ")]


def test_dockerfile_copies_only_the_project():
    copies = [line.split()[1:] for line in _dockerfile_instructions() if line.startswith("COPY ")]
    sources = {s.rstrip("/") for c in copies for s in (c[:-1] if not c[0].startswith("--") else c[1:-1])}
    assert sources == {"pyproject.toml", "README.md", "serve_config.yaml", "lightrag_ray"}
    assert all((ROOT / s).exists() for s in sources)


def test_dockerfile_sets_the_malloc_threshold_of_a_local_cluster():
    envs = dict(line.split(None, 1)[1].split("=", 1) for line in _dockerfile_instructions() if line.startswith("ENV "))
    assert envs["MALLOC_MMAP_THRESHOLD_"] == LOCAL_CLUSTER_ENV["MALLOC_MMAP_THRESHOLD_"]


def _run_steps(variant: str, tmp_path: Path) -> tuple[int, list[list[str]]]:
    """Execute the Dockerfile's RUN steps with stub pip/python/lightrag-ray; the pip calls made."""
    stubs = tmp_path / f"bin-{variant}"
    stubs.mkdir()
    log = tmp_path / f"pip-{variant}.log"
    for tool in ("pip", "python", "lightrag-ray"):
        stub = stubs / tool
        body = f'printf "%s\\n" "$*" >> {shlex.quote(str(log))}\n' if tool == "pip" else ""
        stub.write_text(f"#!/bin/sh\n{body}exit 0\n")
        stub.chmod(0o755)
    instructions = _dockerfile_instructions()
    env = {**_args(instructions), "PATH": f"{stubs}:/usr/bin:/bin", "VARIANT": variant}
    for line in instructions:
        if line.startswith("RUN "):
            result = subprocess.run(["sh", "-c", line[4:]], env=env, capture_output=True, text=True, timeout=10)
            if result.returncode:
                return result.returncode, []
    calls = log.read_text().splitlines() if log.exists() else []
    return 0, [call.split() for call in calls]


def test_dockerfile_installs_torch_then_the_project(tmp_path):
    torch = f"torch=={TORCH_PIN}"
    code, cpu = _run_steps("cpu", tmp_path)
    assert code == 0 and cpu == [
        ["install", "--no-cache-dir", "--index-url", "https://download.pytorch.org/whl/cpu", torch],
        ["install", "--no-cache-dir", "."],
    ]
    code, gpu = _run_steps("gpu", tmp_path)
    assert code == 0 and gpu == [
        ["install", "--no-cache-dir", torch],
        ["install", "--no-cache-dir", f"ray[llm]=={RAY_PIN}"],
        ["install", "--no-cache-dir", "."],
    ]
    code, _ = _run_steps("tpu", tmp_path)
    assert code != 0, "an unknown VARIANT fails the build"
    # pyproject's torch requirement accepts the torch the image installs
    torch_req = next(r for r in map(Requirement, PYPROJECT["project"]["dependencies"]) if r.name == "torch")
    assert torch_req.specifier.contains(TORCH_PIN)
