"""The Serve app's read path with a Milvus server: queries go from the ingress straight to
the graph shards and Milvus, so they keep being answered while the workspace owner (the
writer) is killed, and a killed shard costs a bounded wait or a 503, never a hang."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest
import ray

from tests.net_helpers import free_port
from tests.serve_helpers import DOC_A, DOC_B, DOC_C, wait_for

READ_TIMEOUT_S = 4.0
QUERY = {"query": "Who founded Acme Corporation?", "mode": "mix", "ll_keywords": ["Alice Smith"],
         "hl_keywords": ["founding"]}


@pytest.fixture(scope="module")
def app(ray_cluster, llm_server, milvus_standalone, tmp_path_factory):
    """The app over a workspace whose vectors live on the Milvus server; yields its URL."""
    from ray import serve

    from lightrag_ray.serve.app import AppArgs, build_app

    root = tmp_path_factory.mktemp("serve_read")
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    args = AppArgs(workspace=str(root / "ws"), settings={
        "llm": {"backend": "openai", "base_url": llm_server.url, "timeout_s": 5, "max_retries": 1},
        "extraction": {"mode": "fast", "actors": 1, "num_cpus": 0.2},
        "graph": {"num_shards": 2, "read_timeout_s": READ_TIMEOUT_S},
        "vectors": {"uri": milvus_standalone, "collection_prefix": f"read_{port}"},
    })
    serve.run(build_app(args), name="lightrag", route_prefix="/")
    url = f"http://127.0.0.1:{port}"
    with httpx.Client(base_url=url, timeout=120) as client:
        job = client.post("/documents/texts", json={"texts": [DOC_A, DOC_B, DOC_C]}).json()
        assert wait_for(client, job["track_id"])["job_status"] == "processed"
    yield url
    serve.shutdown()


class QueryLoad:
    """Clients in threads sending the same /query/data until stopped; records each answer."""

    def __init__(self, url: str, clients: int = 3) -> None:
        self.url = url
        self.results: list[tuple[int, float, dict[str, Any]]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(clients)]

    def _loop(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as client:
            while not self.stop.is_set():
                started = time.monotonic()
                response = client.post("/query/data", json=QUERY)
                self.results.append((response.status_code, time.monotonic() - started, response.json()))

    def __enter__(self) -> "QueryLoad":
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=90)


def _names(answer: dict[str, Any]) -> list[str]:
    return [e["entity_name"] for e in answer["data"]["entities"]]


def _serve_actor(part: str) -> Any:
    [found] = [a for a in ray.util.list_named_actors(all_namespaces=True) if part in a["name"] and a["namespace"] == "serve"]
    return ray.get_actor(found["name"], namespace="serve")


def test_queries_are_answered_while_the_workspace_owner_is_killed(app):
    with httpx.Client(base_url=app, timeout=60) as client:
        expected = client.post("/query/data", json=QUERY).json()
        assert "Alice Smith" in _names(expected)
        with QueryLoad(app) as load:
            time.sleep(1.0)
            ray.kill(_serve_actor("WorkspaceDeployment"), no_restart=True)
            killed_at = len(load.results)
            time.sleep(5.0)
        during = load.results[killed_at:]
        assert len(during) >= 5, "queries stopped while the owner was down"
        assert {status for status, _, _ in load.results} == {200}, [r[:2] for r in load.results if r[0] != 200]
        assert all(_names(answer) == _names(expected) for _, _, answer in load.results)
        deadline = time.monotonic() + 120  # Serve brings the owner back; it attaches to the live shards
        while client.get("/health").status_code != 200:
            assert time.monotonic() < deadline, "the workspace owner did not come back"
            time.sleep(1)
        assert _names(client.post("/query/data", json=QUERY).json()) == _names(expected)


def test_a_killed_shard_answers_503_or_waits_never_hangs(app):
    from lightrag_ray.storage.graph.actor import shard_actor_name

    with httpx.Client(base_url=app, timeout=60) as client:
        expected = _names(client.post("/query/data", json=QUERY).json())
        workspace = client.get("/health").json()["workspace"]
        with QueryLoad(app) as load:
            time.sleep(0.5)
            for shard in range(2):  # Ray restarts them from their snapshots
                ray.kill(ray.get_actor(shard_actor_name(workspace, shard, 2), namespace="lightrag_ray"), no_restart=False)
            time.sleep(6.0)
        assert load.results and all(seconds < READ_TIMEOUT_S + 5 for _, seconds, _ in load.results)
        for status, _, answer in load.results:
            assert status in (200, 503), answer
            if status == 503:
                assert answer["detail"].startswith("the knowledge graph is unavailable: graph shard")
            else:
                assert _names(answer) == expected
        deadline = time.monotonic() + 60
        while (response := client.post("/query/data", json=QUERY)).status_code != 200:
            assert time.monotonic() < deadline, response.text
            time.sleep(1)
        assert _names(response.json()) == expected
