"""The two documented ways to start the app, as users run them: `serve run serve_config.yaml`
from the repo root, and `lightrag-ray serve --workspace DIR`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.net_helpers import free_port

ROOT = Path(__file__).resolve().parents[1]


def health_of_started_app(command: list[str], port: int, ray_cluster: Any, log_path: Path) -> dict[str, Any]:
    """Run ``command`` on the session's Ray cluster until /health answers; then stop it with
    Ctrl-C (SIGINT) and return the health report."""
    env = {**os.environ, "RAY_ADDRESS": ray_cluster.get_runtime_context().gcs_address}
    with log_path.open("w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and process.poll() is None:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
                if response.status_code == 200:
                    assert httpx.post(f"http://127.0.0.1:{port}/query/data", json={"query": "anything"},
                                      timeout=60).status_code == 200
                    return response.json()
            except httpx.HTTPError:
                pass
            time.sleep(2)
        raise AssertionError(log_path.read_text()[-3000:])
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        from ray import serve

        serve.shutdown()


def test_serve_run_starts_the_app_from_the_repo_root(ray_cluster, tmp_path):
    # The repo's file with one change: a fresh workspace instead of ./lightrag_demo. (Serve
    # builds the app in a task on the cluster, so a variable set here would not reach it.)
    config = yaml.safe_load((ROOT / "serve_config.yaml").read_text())
    config["applications"][0]["args"]["workspace"] = str(tmp_path / "ws")
    (tmp_path / "serve_config.yaml").write_text(yaml.safe_dump(config))
    serve_cli = Path(sys.executable).with_name("serve")
    health = health_of_started_app([str(serve_cli), "run", str(tmp_path / "serve_config.yaml")],
                                   config["http_options"]["port"], ray_cluster, tmp_path / "serve.log")
    assert health["status"] == "healthy" and health["workspace"] == str(tmp_path / "ws")
    assert health["extraction_mode"] == "fast" and health["llm_model"] is None


def test_lightrag_ray_serve_starts_the_app(ray_cluster, tmp_path):
    port = free_port()
    cli = Path(sys.executable).with_name("lightrag-ray")
    health = health_of_started_app([str(cli), "serve", "--workspace", str(tmp_path / "ws"), "--port", str(port)],
                                   port, ray_cluster, tmp_path / "cli.log")
    assert health["status"] == "healthy" and health["workspace"] == str(tmp_path / "ws")
    assert health["graph_version"] == 0 and health["documents"] == {}
