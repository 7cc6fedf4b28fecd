"""Indexing across a 3-node Ray cluster built on this machine, with Milvus as a server and
the workspace on a path every node sees (issue 6).

One cluster, for both tests, runs in a subprocess (tests/multinode_scenario.py): this process is joined to
the session's single-node cluster, which builds the reference graph.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lightrag_ray.service.indexing import index_paths
from tests.graph_helpers import dump_graph

ROOT = Path(__file__).resolve().parents[1]
PASSAGES = 36  # 9 LLM batches of 4: 3 per extraction actor on 3 nodes


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    """The first HotpotQA passages, one file each."""
    passages = json.loads((shared_data / "hotpotqa" / "hotpotqa_train_corpus.json").read_text(encoding="utf-8"))
    folder = tmp_path_factory.mktemp("corpus")
    for i, sentences in enumerate(list(passages.values())[:PASSAGES]):
        (folder / f"p{i:02d}.txt").write_text("".join(sentences), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def scenario(milvus_server, corpus, tmp_path_factory):
    """One cluster (tests/multinode_scenario.py): the scaling runs, then the run with a worker lost."""
    workspace = tmp_path_factory.mktemp("multinode")
    return _scenario("--corpus", str(corpus), "--workspace", str(workspace), "--milvus-uri", milvus_server,
                     "--remove-worker-after", str(PASSAGES // 2), "--question", "What is Demon Dice?", timeout=840)


def _scenario(*args: str, timeout: int) -> dict:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    try:
        done = subprocess.run([sys.executable, "-m", "tests.multinode_scenario", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as timed_out:
        stderr = timed_out.stderr.decode(errors="replace") if isinstance(timed_out.stderr, bytes) else timed_out.stderr or ""
        steps = [line for line in stderr.splitlines() if line.startswith("[scenario")]
        pytest.fail(f"the scenario ran past {timeout} s; its steps:\n" + "\n".join(steps) + "\n" + stderr[-3000:])
    assert done.returncode == 0, done.stderr[-6000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(900)
def test_three_nodes_with_a_worker_lost_give_the_single_node_graph(ray_cluster, llm, make_settings, scenario, corpus):
    result = scenario["node_loss"]
    shown = {k: result[k] for k in ("seconds", "llm_counts", "removed")}
    print("\n[multinode node-loss]", json.dumps(shown))

    # A worker was lost mid-extraction, with shards and extraction actors on it.
    assert result["removed"]["node_id"] not in result["alive_nodes"]
    assert result["removed"]["at_llm_requests"] < result["report"]["llm_requests"]
    on_victim = result["removed"]["actors_on_it"]
    assert on_victim.get("GraphShard", 0) >= 1 and on_victim.get("ExtractChunks", 0) >= 1, on_victim
    # Shard and extraction actors ran on more than one node, and none on the 0-CPU head.
    placed = result["removed"]["actor_nodes"]
    for name in ("GraphShard", "ExtractChunks"):
        assert len(placed[name]) >= 2 and result["head"] not in placed[name], placed

    # Every document processed.
    report = result["report"]
    assert report["docs_new"] == PASSAGES and report["docs_failed"] == 0 and report["chunks_failed"] == 0
    assert report["chunks_extracted"] == report["chunks"] >= PASSAGES

    # A question answered across the cluster, from the Milvus server and the shards.
    query = result["query"]
    assert query["answer"] and query["chunks"] > 0 and query["entities"] > 0, query

    # The graph equals a single-node run's, merged fields included.
    single = make_settings("single", graph={"num_shards": 3})
    single_report = index_paths([str(corpus)], single, progress=None)
    assert (report["entities"], report["relations"]) == (single_report.entities, single_report.relations)
    reference = json.loads(json.dumps(dump_graph(single)))
    assert query["graph"] == reference


@pytest.mark.timeout(900)
def test_llm_requests_per_second_grow_with_nodes_and_ingress_replicas_serve_from_several_nodes(scenario):
    result = scenario["scaling"]
    print("\n[multinode scaling]", json.dumps(result))
    one, three = result["nodes_1"], result["nodes_3"]
    assert one["chunks"] == three["chunks"] >= PASSAGES
    assert three["extraction_nodes"] == 3
    # LLM-bound: three extraction actors (one a node) keep more requests in flight than one.
    # The requests per second are printed, not asserted: on 2 cores they ranged 1.2x-2.5x the
    # one-node rate from run to run (the new nodes' actors start late in some runs).
    assert three["peak_in_flight"] > one["peak_in_flight"], result
    # Three ingress replicas of the Serve app answered from more than one node, and a query
    # read the shards and the Milvus server from there.
    served = result["serve"]
    assert len(served["served_by"]) >= 2 and set(served["served_by"]) <= set(result["nodes"]), result
    assert served["query_status"] == 200 and served["query_chunks"] > 0, served
