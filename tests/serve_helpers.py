"""The Serve app as the tests start and fill it: the sample documents, ``run_app`` (serve.run
with an API key, a small body limit and the scripted LLM), waiting for an insert job, and
``index_samples`` (the samples inserted through the routes)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from lightrag_ray.core.ids import doc_id
from tests.net_helpers import free_port

API_KEY = "test-key-123"
HEADERS = {"X-API-Key": API_KEY}
DOC_A = ("Alice Smith founded Acme Corporation in Paris. Acme Corporation builds telescopes. "
         "Alice Smith hired Carol White at Acme Corporation.")
DOC_B = "Alice Smith met Bob Jones in London. Bob Jones writes novels about London."
DOC_C = "Dora Quinn sails from Lisbon. Dora Quinn studies whales near Lisbon."
MAX_BODY_MB = 0.05


def run_app(workspace: Path, llm_url: str, extraction_mode: str = "fast", shards: int = 2,
            settings: dict[str, Any] | None = None, **args: Any) -> str:
    """Start the application with serve.run (API key, small body limit, ``shards`` graph shards,
    the scripted LLM at ``llm_url``; ``settings``: more sections; ``args``: other or more AppArgs);
    returns its base URL. serve.shutdown() stops it."""
    from ray import serve

    from lightrag_ray.serve.app import AppArgs, build_app

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    app_args = AppArgs(
        **{"workspace": str(workspace), "api_key": API_KEY, "max_body_mb": MAX_BODY_MB, **args},
        settings={
            "llm": {"backend": "openai", "base_url": llm_url, "timeout_s": 5, "backoff_s": 0.05,
                    "max_retries": 1},
            "extraction": {"mode": extraction_mode, "actors": 1, "num_cpus": 0.2},
            "embedding": {"actors": 1},
            "graph": {"num_shards": shards},
            **(settings or {}),
        },
    )
    serve.run(build_app(app_args), name="lightrag", route_prefix="/")
    return f"http://127.0.0.1:{port}"


def wait_for(client: httpx.Client, track_id: str, timeout_s: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.get(f"/documents/track_status/{track_id}").json()
        if status["job_status"] not in ("pending", "processing"):
            return status
        time.sleep(1)
    raise AssertionError(f"job {track_id} still running after {timeout_s} s")


def index_samples(client: httpx.Client) -> dict[str, str]:
    """DOC_A by /documents/text and DOC_B + DOC_C by /documents/texts, both processed; their ids by letter."""
    one = client.post("/documents/text", json={"text": DOC_A, "file_source": "acme.txt"})
    assert one.status_code == 200, one.text
    many = client.post("/documents/texts", json={"texts": [DOC_B, DOC_C], "file_sources": ["london.md", "lisbon"]})
    assert many.status_code == 200, many.text
    ids = {"a": doc_id(DOC_A), "b": doc_id(DOC_B), "c": doc_id(DOC_C)}
    assert one.json()["doc_ids"] == [ids["a"]] and set(many.json()["doc_ids"]) == {ids["b"], ids["c"]}
    for job in (one.json(), many.json()):
        assert job["status"] == "success" and job["track_id"]
        done = wait_for(client, job["track_id"])
        assert done["job_status"] == "processed", done
        assert done["status_summary"] == {"processed": len(job["doc_ids"])}
        assert {d["doc_id"] for d in done["documents"]} == set(job["doc_ids"])
    return ids


@pytest.fixture(scope="module")
def client(app):
    """An HTTP client of the module's ``app`` (base URL, workspace folder), with the API key."""
    with httpx.Client(base_url=app[0], headers=HEADERS, timeout=120) as c:
        yield c


def replica_logs(deployment: str) -> list[str]:
    """The Serve log of each replica of ``deployment`` this session started (any app)."""
    import ray

    logs = Path(ray._private.worker._global_node.get_logs_dir_path()) / "serve"
    found = sorted(logs.glob(f"replica_*{deployment}*.log"))
    assert found, sorted(p.name for p in logs.iterdir())
    return [p.read_text(encoding="utf-8", errors="replace") for p in found]


def owner_log_text() -> str:
    """Every workspace owner's Serve log of this session, joined."""
    return "".join(replica_logs("WorkspaceDeployment"))
