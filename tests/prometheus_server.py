"""A real Prometheus for tests: Debian's ``prometheus`` (scripts/test.sh installs it), scraping
given targets every second, on a free port of 127.0.0.1.

    with PrometheusServer(tmp_dir, ["127.0.0.1:8080"]) as server:
        server.query("up")  # the result list of /api/v1/query
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.net_helpers import ServerProcess, answers, free_port, wait_until

SCRAPE_INTERVAL = "1s"


class PromQLError(RuntimeError):
    """Prometheus refused a query (a parse or evaluation error)."""


class PrometheusServer(ServerProcess):
    """A Prometheus process under ``base_dir`` (config, TSDB, log) scraping ``targets``."""

    stop_timeout_s = 10.0

    def __init__(self, base_dir: str | Path, targets: list[str], start_timeout_s: float = 30.0) -> None:
        self.base_dir = Path(base_dir).resolve()
        self.targets = targets
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        """Write prometheus.yml, start the server and wait until it is ready; returns its URL."""
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus is not installed: run scripts/test.sh once, or apt-get install prometheus")
        config = self.base_dir / "prometheus.yml"
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
            "scrape_configs": [{"job_name": "ray", "static_configs": [{"targets": self.targets}]}],
        }))
        self.port = free_port()
        log_path = self.base_dir / "prometheus.log"
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={self.base_dir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        atexit.register(self.stop)
        try:
            wait_until(lambda: answers(self.url, "/-/ready"), self.start_timeout_s, "prometheus", self.process, log_path)
        except RuntimeError:
            self.stop()
            raise
        return self.url

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The result of an instant query (``data.result``); PromQLError if Prometheus refused it."""
        body = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10).json()
        if body.get("status") != "success":
            raise PromQLError(f"{expr!r}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]["result"]
