"""Index a corpus on a Ray cluster of several nodes built on this machine
(``ray.cluster_utils.Cluster``); prints one JSON line. Run by tests/test_multinode.py in
its own process (a process joins only one Ray cluster).

One cluster, as on KubeRay: a head with 0 CPUs (the driver, no tasks or actors) and workers
of 2 CPUs each; Milvus is a server (``--milvus-uri``) and the workspaces paths every node sees.

``scaling``: LLM requests per second with the scripted LLM at a fixed latency, on one worker,
then on three (two workers added to the same cluster); every worker has the same CPUs and
hosts one extraction actor, so the requests in flight grow with the nodes. Then the Serve app
answers over the three workers with three ingress replicas, and the nodes that served are
recorded.

``node loss`` (then, on the same three workers): the corpus indexed again into a new
workspace, and a worker holding an extraction actor killed once a number of extraction
requests were answered. After indexing, a question is answered across the cluster and the
graph is exported for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# All nodes share this machine, so only one HTTP proxy can bind the port (serve_across starts
# one, on the head); on a real cluster every node runs one behind the load balancer and each
# prefers its own node's replicas. Here the one proxy spreads requests over the ingress
# replicas of every node instead.
os.environ.setdefault("RAY_SERVE_PROXY_PREFER_LOCAL_NODE_ROUTING", "0")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from lightrag_ray.config import Settings, load_settings  # noqa: E402
from lightrag_ray.service.indexing import index_paths  # noqa: E402
from tests.scripted_llm import ScriptedLLM  # noqa: E402

WATCHED = ("GraphShard", "ExtractChunks", "EmbedWorker")
LLM_KINDS = ("extract", "glean", "summary")
STARTED = time.monotonic()


def phase(message: str) -> None:
    """One line on stderr per step, with the seconds since start (the test shows them when a
    run times out)."""
    print(f"[scenario +{time.monotonic() - STARTED:.1f}s] {message}", file=sys.stderr, flush=True)


class TimedLLM(ScriptedLLM):
    """The scripted LLM, noting when each request arrived."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrivals: list[tuple[float, str]] = []

    def _record(self, kind: str, messages: list[dict[str, Any]]) -> str | None:
        self.arrivals.append((time.monotonic(), kind))
        return super()._record(kind, messages)

    def rate(self, since: int = 0) -> dict[str, float]:
        """Indexing LLM requests per second from the first arrival to the last answer."""
        times = [t for t, kind in self.arrivals[since:] if kind in LLM_KINDS]
        window = times[-1] + self.latency_s - times[0]
        # every request takes latency_s, so those in flight at t are those that arrived in (t - latency_s, t]
        peak = max(sum(1 for u in times if t - self.latency_s < u <= t) for t in times)
        return {"requests": len(times), "seconds": round(window, 2), "per_s": round(len(times) / window, 2),
                "peak_in_flight": peak}


def actor_nodes() -> dict[str, list[str]]:
    """Node ids of the watched actor classes' actors, per class, from the GCS (actors of a
    lost node are moved to their new node or forgotten, so take this before a loss)."""
    from ray._private import state

    nodes: dict[str, set[str]] = defaultdict(set)
    for actor in state.actors().values():
        name = actor.get("ActorClassName", "")
        for watched in WATCHED:
            if watched in name and actor["Address"]["NodeID"]:
                nodes[watched].add(actor["Address"]["NodeID"])
    return {k: sorted(v) for k, v in nodes.items()}


@ray.remote(num_cpus=0.1)
def _import_extraction() -> str:
    """Load what an extraction actor loads, on one node (its page cache and a first worker)."""
    import lightrag_ray.index.stages.extract  # noqa: F401

    return ray.get_runtime_context().get_node_id()


def worker_nodes() -> list[str]:
    """The alive nodes with CPUs (not the 0-CPU head)."""
    return [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]


def warm_nodes() -> None:
    """Every worker imports the extraction actors' modules once, so that the rate measured
    is the LLM's and not a fresh node's first Python start: on 2 cores, the extraction actors
    of two nodes just added started late in some runs (1.2-1.4x the one-node rate) and in time
    in others (2.5x)."""
    for node_id in worker_nodes():
        run_on_node(_import_extraction, node_id)


def run_on_node(task: Any, node_id: str, seconds: float = 120) -> Any:
    """``task`` on node ``node_id``; a node the GCS lists as alive can still be unknown to the
    head's scheduler for a moment (TaskUnschedulableError), so that is retried."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return ray.get(task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote())
        except ray.exceptions.TaskUnschedulableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def add_worker(cluster: Cluster, num_cpus: int, attempts: int = 3, **node_args: Any) -> Any:
    """A worker node (``node_args``: more ``Cluster.add_node`` arguments, e.g.
    object_store_memory); Ray gives a raylet 30 s to register, which a loaded 2-core machine
    can miss, so the start is retried."""
    for _ in range(attempts - 1):
        try:
            return cluster.add_node(num_cpus=num_cpus, **node_args)
        except Exception as error:  # Ray raises a bare Exception on the startup timeout
            if "timed out during startup" not in str(error):
                raise
            phase(f"worker start timed out; retrying ({error})")
    return cluster.add_node(num_cpus=num_cpus, **node_args)


def when_extracted(llm: ScriptedLLM, requests: int, action: Callable[[], None]) -> None:
    """Run ``action`` in a thread once the LLM has answered ``requests`` extraction requests."""

    def wait_then_act() -> None:
        while llm.counts().get("extract", 0) < requests:
            time.sleep(0.05)
        action()

    threading.Thread(target=wait_then_act, daemon=True).start()


def settings_for(workspace: str, llm: ScriptedLLM, milvus_uri: str, address: str, **changes: Any) -> Settings:
    base: dict[str, Any] = {
        "workspace": workspace,
        "llm": {"backend": "openai", "base_url": llm.url, "timeout_s": 20, "backoff_s": 0.1, "max_retries": 3,
                "max_concurrency": 4},
        "extraction": {"actors": 2, "num_cpus": 0.2},
        "embedding": {"actors": 2, "num_cpus": 0.25},
        "graph": {"num_shards": 3},
        "vectors": {"uri": milvus_uri},
        "ray": {"address": address, "local_stages_max_mb": 0},  # Ray Data pools, even for this small corpus
    }
    for section, values in changes.items():
        base[section] = {**base.get(section, {}), **values}
    return load_settings(environ={}, overrides=base)


def query_across(settings: Settings, question: str) -> dict[str, Any]:
    """Answer ``question`` from the indexed workspace (shards on the workers, Milvus server)
    in mix mode, whose context holds the shards' entity and relation views."""
    from lightrag_ray.query.engine import QueryParam
    from lightrag_ray.service.session import LocalSession

    with LocalSession(settings) as session:
        result = asyncio.run(session.engine.query(question, QueryParam(mode="mix")))
        return {"answer": result.answer, "entities": len(result.context.entities),
                "relations": len(result.context.relations), "chunks": len(result.context.chunks),
                "graph": session.graph.export()}


def serve_across(settings: Settings, replicas: int, requests: int = 40) -> dict[str, Any]:
    """Serve the workspace with ``replicas`` ingress replicas; the nodes whose replicas answered
    ``/health`` and whether a query was answered."""
    import httpx
    from ray import serve

    from lightrag_ray.serve.app import AppArgs, build_app
    from tests.net_helpers import answers, free_port, wait_until

    port = free_port()
    serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": port},
                logging_config={"log_level": "WARNING"})
    args = AppArgs(settings=settings.model_dump(), ingress_replicas=replicas, ingress_max_replicas_per_node=1)
    serve.run(build_app(args), name="lightrag", route_prefix="/")
    # serve.run returns once the replicas are up; on a loaded machine the proxy routes a moment later
    wait_until(lambda: answers(f"http://127.0.0.1:{port}", "/health"), 120, "the app's /health through the proxy")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        served_by = {client.get("/health").json()["served_by"] for _ in range(requests)}
        query = client.post("/query/data", json={"query": "Who is mentioned?", "mode": "mix"})
    serve.shutdown()
    return {"served_by": sorted(served_by), "query_status": query.status_code,
            "query_chunks": len(query.json()["data"]["chunks"]) if query.status_code == 200 else 0}


def node_loss(cluster: Cluster, llm: TimedLLM, args: argparse.Namespace) -> dict[str, Any]:
    """Index the corpus on the cluster's workers, one killed mid-extraction (see the module doc)."""
    llm.latency_s = args.latency
    removed: dict[str, Any] = {}
    settings = settings_for(str(Path(args.workspace) / "node_loss"), llm, args.milvus_uri, cluster.address,
                            vectors={"collection_prefix": "node_loss_"})

    def remove_worker() -> None:
        removed["actor_nodes"] = actor_nodes()
        # a worker with an extraction actor (every worker holds a graph shard: they spread)
        hosts = set(removed["actor_nodes"].get("ExtractChunks", []))
        victim = next(node for node in list(cluster.worker_nodes) if node.node_id in hosts)
        removed["node_id"] = victim.node_id
        removed["actors_on_it"] = {k: v.count(victim.node_id) for k, v in removed["actor_nodes"].items()}
        removed["at_llm_requests"] = sum(llm.counts().values()) - sum(counts_before.values())
        cluster.remove_node(victim, allow_graceful=False)  # a crash, not a drain
        phase("worker removed")

    counts_before = llm.counts()
    if args.remove_worker_after:
        when_extracted(llm, counts_before.get("extract", 0) + args.remove_worker_after, remove_worker)
    started = time.monotonic()
    report = index_paths([args.corpus], settings, progress=None)
    seconds = time.monotonic() - started
    phase("indexed (node loss)")
    counts = {kind: n - counts_before.get(kind, 0) for kind, n in llm.counts().items()}
    query = query_across(settings, args.question)
    phase("question answered")
    return {
        "report": report.to_dict(), "seconds": round(seconds, 1), "llm_counts": counts,
        "removed": removed, "head": cluster.head_node.node_id, "alive_nodes": [n["NodeID"] for n in ray.nodes() if n["Alive"]],
        "query": query,
    }


def scaling(cluster: Cluster, llm: TimedLLM, args: argparse.Namespace) -> dict[str, Any]:
    """Requests per second on one worker, then three; the Serve app across them (module doc)."""
    llm.latency_s = args.scaling_latency
    figures: dict[str, Any] = {}
    half = len(list(Path(args.corpus).glob("*.txt"))) // 2
    for nodes in (1, 3):
        while len(worker_nodes()) < nodes:
            add_worker(cluster, 2)
        cluster.wait_for_nodes()
        phase(f"{nodes} worker(s) up")
        warm_nodes()
        phase(f"{nodes} worker(s) imported the extraction modules")
        placed: dict[str, list[str]] = {}
        # Mid-extraction (the actors of finished runs are not reported reliably).
        before = llm.counts().get("extract", 0)
        when_extracted(llm, before + half, lambda placed=placed: placed.update(actor_nodes()))
        settings = settings_for(
            str(Path(args.workspace) / f"nodes{nodes}"), llm, args.milvus_uri, cluster.address,
            extraction={"actors": nodes, "num_cpus": 0.5},  # one extraction actor a node
            embedding={"actors": 1, "num_cpus": 0.5}, vectors={"collection_prefix": f"scaling{nodes}_"},
        )
        since = len(llm.arrivals)
        started = time.monotonic()
        report = index_paths([args.corpus], settings, progress=None)
        phase(f"indexed on {nodes} worker(s)")
        figures[f"nodes_{nodes}"] = {
            **llm.rate(since), "index_seconds": round(time.monotonic() - started, 1),
            "chunks": report.chunks, "llm_requests": report.llm_requests,
            "extraction_nodes": len(placed.get("ExtractChunks", [])),
        }
    figures["serve"] = serve_across(settings, replicas=3)
    phase("served from the nodes")
    figures["nodes"] = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    return {"latency_s": args.scaling_latency, "max_concurrency": 4, **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--milvus-uri", required=True)
    parser.add_argument("--remove-worker-after", type=int, default=0,
                        help="node loss: kill a worker once this many extraction requests arrived (0: never)")
    parser.add_argument("--question", default="Who is mentioned in the passages?")
    parser.add_argument("--latency", type=float, default=0.2, help="node loss: scripted LLM seconds per request")
    parser.add_argument("--scaling-latency", type=float, default=0.5, help="scaling: scripted LLM seconds per request")
    args = parser.parse_args()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    add_worker(cluster, 2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, logging_level=logging.WARNING)
    ray.data.DataContext.get_current().enable_progress_bars = False
    phase("head and one worker up")
    with TimedLLM() as llm:
        result = {"scaling": scaling(cluster, llm, args), "node_loss": node_loss(cluster, llm, args)}
    ray.shutdown()
    cluster.shutdown()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
