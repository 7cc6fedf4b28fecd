"""`serve run serve_config.yaml` from the repo root starts the app (the documented way)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_serve_run_starts_the_app_from_the_repo_root(ray_cluster, tmp_path):
    serve_cli = Path(sys.executable).with_name("serve")
    # The repo's file with one change: a fresh workspace instead of ./lightrag_demo. (Serve
    # builds the app in a task on the cluster, so a variable set here would not reach it.)
    config = yaml.safe_load((ROOT / "serve_config.yaml").read_text())
    config["applications"][0]["args"]["workspace"] = str(tmp_path / "ws")
    (tmp_path / "serve_config.yaml").write_text(yaml.safe_dump(config))
    env = {**os.environ, "RAY_ADDRESS": ray_cluster.get_runtime_context().gcs_address}  # the session's cluster
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen([str(serve_cli), "run", str(tmp_path / "serve_config.yaml")], cwd=ROOT, env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        health = None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                response = httpx.get("http://127.0.0.1:8000/health", timeout=5)
                if response.status_code == 200:
                    health = response.json()
                    break
            except httpx.HTTPError:
                pass
            time.sleep(2)
        assert health is not None, (tmp_path / "serve.log").read_text()[-3000:]
        assert health["status"] == "healthy" and health["workspace"] == str(tmp_path / "ws")
        assert health["extraction_mode"] == "fast" and health["llm_model"] is None
        assert httpx.post("http://127.0.0.1:8000/query/data", json={"query": "anything"}, timeout=60).status_code == 200
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        from ray import serve

        serve.shutdown()
