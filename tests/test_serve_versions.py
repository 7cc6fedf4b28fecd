"""Readers of a served workspace see the graph of the last finished insert job (issue 15,
item 3: "/graphs shows a running job's half-merged entities").

The app runs over real HTTP on the session's Ray cluster with the scripted LLM (extraction
mode llm); its latency keeps an insert job running after its first chunks are merged. The
second job also reuses the first one's embedding worker (issue 12: warm inserts)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from lightrag_ray.storage.graph.actor import shard_actor_name
from tests.graph_helpers import shard_ref
from tests.net_helpers import free_port
from tests.test_index_pipeline import DOC_A, DOC_B
from tests.serve_helpers import replica_logs, wait_for

API_KEY = "versions-key"
SHARDS = 2


@pytest.fixture(scope="module")
def app(ray_cluster, llm_server, tmp_path_factory):
    """The app with the scripted LLM; yields (HTTP client, the settings it runs with)."""
    from ray import serve

    from lightrag_ray.serve.app import AppArgs, app_settings, build_app

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    args = AppArgs(workspace=str(tmp_path_factory.mktemp("versions") / "ws"), api_key=API_KEY, settings={
        "llm": {"backend": "openai", "base_url": llm_server.url, "timeout_s": 10, "backoff_s": 0.05,
                "max_retries": 1, "max_concurrency": 1},
        "extraction": {"mode": "llm", "actors": 1, "num_cpus": 0.2},
        "embedding": {"actors": 1},
        "chunking": {"chunk_tokens": 24, "overlap_tokens": 0},
        "graph": {"num_shards": SHARDS},
    })
    serve.run(build_app(args), name="lightrag", route_prefix="/")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": API_KEY}, timeout=120) as client:
        yield client, app_settings(args)
    serve.shutdown()


def reader_views(client: httpx.Client) -> dict[str, Any]:
    """What readers get: the whole graph (/graphs), the labels, a local query's data."""
    graph = client.get("/graphs", params={"label": "*", "max_nodes": 1000})
    labels = client.get("/graph/label/list")
    data = client.post("/query/data", json={"query": "Who is Ebenezer Scrooge?", "mode": "local",
                                            "ll_keywords": ["Ebenezer Scrooge"], "hl_keywords": []})
    assert graph.status_code == labels.status_code == data.status_code == 200, (graph.text, labels.text, data.text)
    return {"graph": graph.json(), "labels": sorted(labels.json()), "query": data.json()["data"]}


def live_entities(ray, settings) -> int:
    """Entities the shards hold now, merged or not (the writer's count, asked of the shard actors)."""
    shards = [ray.get_actor(shard_actor_name(settings.workspace, i, SHARDS), namespace=settings.ray.namespace)
              for i in range(SHARDS)]
    return sum(counts["entities"] for _, counts in ray.get([shard_ref(s, "counts") for s in shards]))


def embed_workers() -> list[str]:
    """Ids of the live EmbedWorker actors (embedding workers of insert jobs), from the GCS (the
    state API needs the dashboard, which the session's cluster does not start)."""
    from ray._private import state

    alive = state.actors(actor_state_name="ALIVE").values()
    return sorted(a["ActorID"] for a in alive if a["ActorClassName"].endswith("EmbedWorker"))


def test_readers_see_the_last_finished_job_while_an_insert_merges(app, llm, ray_cluster):
    client, settings = app
    first = client.post("/documents/text", json={"text": DOC_A, "file_source": "a.txt"}).json()
    assert wait_for(client, first["track_id"])["job_status"] == "processed"
    workers = embed_workers()
    assert len(workers) == 1  # the workspace owner keeps its jobs' embedding worker (embedding.actors: 1)
    before = reader_views(client)
    published = live_entities(ray_cluster, settings)
    assert published == len(before["labels"]) and "Fezziwig" not in before["labels"]
    assert before["query"]["relationships"]

    llm.latency_s = 1.0
    second = client.post("/documents/text", json={"text": DOC_B * 3, "file_source": "b.txt"}).json()
    deadline = time.monotonic() + 240
    while live_entities(ray_cluster, settings) == published and time.monotonic() < deadline:
        time.sleep(0.2)
    assert live_entities(ray_cluster, settings) > published, "the job merged no chunk"
    assert reader_views(client) == before  # no half-merged entity, relation or description
    assert client.get(f"/documents/track_status/{second['track_id']}").json()["job_status"] == "processing"

    llm.latency_s = 0.0
    assert wait_for(client, second["track_id"])["job_status"] == "processed"
    assert embed_workers() == workers  # the second job started no embedding worker: it used the first one's
    after = reader_views(client)
    assert {"Fezziwig", "Fred Holywell"} <= set(after["labels"])
    assert {"Fezziwig", "Fred Holywell"} <= {node["id"] for node in after["graph"]["nodes"]}
    names = {name for r in after["query"]["relationships"] for name in (r["src_id"], r["tgt_id"])}
    assert "Fezziwig" in names and names > {n for r in before["query"]["relationships"] for n in (r["src_id"], r["tgt_id"])}


# ---- a sync while readers query (issue 42) --------------------------------------------------
GUILD_OLD = "Zorvath Quillane founded the Amberlight Guild in Port Esmer in 1742."
GUILD_NEW = "Zorvath Quillane founded the Emberfall Company in Nettlewick in 1799."
FLEET = "Mirelle Dovanic commanded the Sable Fleet from Thornmoor."
SYNC_MODES = ("naive", "local", "global", "hybrid", "mix", "walk")


def mode_views(client: httpx.Client) -> dict[str, Any]:
    """Per mode, what /query/data returns about the founder and about the fleet (keywords given:
    no LLM call, so the held LLM blocks only the job)."""
    views = {}
    for mode in SYNC_MODES:
        for topic, names, themes in (("guild", ["Zorvath Quillane"], ["founding a guild"]),
                                     ("fleet", ["Mirelle Dovanic"], ["commanding a fleet"])):
            response = client.post("/query/data", json={"query": f"What did {names[0]} do?", "mode": mode,
                                                        "ll_keywords": names, "hl_keywords": themes})
            assert response.status_code == 200, response.text
            views[f"{mode}/{topic}"] = response.json()["data"]
    return views


def stored_chunk_texts() -> list[str]:
    """Every chunk row's text in the served default workspace's Milvus Lite file, unfiltered,
    through its owner."""
    from ray import serve

    dim = serve.get_deployment_handle("EmbedderDeployment", app_name="lightrag").dimension.remote().result()
    owner = serve.get_deployment_handle("WorkspaceDeployment", app_name="lightrag")
    hits = owner.vectors.remote("", "search", "chunks", np.ones((1, dim), dtype=np.float32), 1000, ["text"], None).result()
    return [hit["text"] for hit in hits[0]]


def test_readers_see_each_documents_old_or_new_version_while_a_sync_runs(app, llm):
    """A sync through the Serve app (POST /documents/scan with prune) replaces a file and removes
    another. While its LLM calls are held, with the new version's passages already in Milvus,
    every mode answers exactly as before the sync; once it is done, only from the new version."""
    client, settings = app
    inputs = Path(settings.workspace) / "inputs"
    inputs.mkdir(parents=True, exist_ok=True)
    (inputs / "guild.txt").write_text(GUILD_OLD)
    (inputs / "fleet.txt").write_text(FLEET)
    first = client.post("/documents/scan", json={"prune": True}).json()
    assert wait_for(client, first["track_id"])["job_status"] == "processed"
    before = mode_views(client)
    for mode in SYNC_MODES:
        assert "Amberlight" in str(before[f"{mode}/guild"]), mode
        assert "Sable Fleet" in str(before[f"{mode}/fleet"]), mode

    (inputs / "guild.txt").write_text(GUILD_NEW)
    (inputs / "fleet.txt").unlink()
    with llm.held():
        sync = client.post("/documents/scan", json={"prune": True}).json()
        assert "1 replaced" in sync["message"] and "1 removed" in sync["message"], sync
        deadline = time.monotonic() + 120
        while not any("Emberfall" in text for text in stored_chunk_texts()):  # the new passage is stored
            assert time.monotonic() < deadline, "the sync stored no chunk vector of the new version"
            time.sleep(0.2)
        assert any("Emberfall" in str(messages) for _, messages in llm.requests)  # extraction waits on the LLM
        during = mode_views(client)
        assert client.get(f"/documents/track_status/{sync['track_id']}").json()["job_status"] == "processing"
    assert during == before  # neither the new passage nor a missing old one, in any mode
    assert wait_for(client, sync["track_id"])["job_status"] == "processed"
    after = mode_views(client)
    for mode in SYNC_MODES:
        guild, fleet = str(after[f"{mode}/guild"]), str(after[f"{mode}/fleet"])
        assert "Emberfall" in guild and "Amberlight" not in guild, (mode, guild)
        assert "Sable Fleet" not in fleet and "Thornmoor" not in fleet, (mode, fleet)
    assert not any("Amberlight" in text or "Sable Fleet" in text for text in stored_chunk_texts())


# ---- an app without a reranker (issue 45) ---------------------------------------------------

def test_without_a_reranker_passages_keep_their_order_and_the_ingress_says_so_once(app):
    client, _ = app
    question = {"query": "Who is Ebenezer Scrooge?", "mode": "local", "ll_keywords": ["Ebenezer Scrooge"],
                "hl_keywords": []}
    asked, off = (client.post("/query/data", json={**question, **extra}).json() for extra in ({}, {"enable_rerank": False}))
    assert asked["metadata"]["retrieval"]["rerank"] == "no reranker configured"
    assert off["metadata"]["retrieval"]["rerank"] == "off"
    assert len(asked["data"]["chunks"]) > 1 and asked["data"]["chunks"] == off["data"]["chunks"]
    # every query of this module asked for reranking; each ingress replica said once that none reranks
    assert max(log.count("no reranker is configured") for log in replica_logs("Ingress")) == 1
