"""LightRAG's WebUI in headless chromium: one app with the WebUI for the package's modules (no
API key, a workspaces root; each module fills workspaces of its own), started once."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.serve_helpers import run_app
from tests.webui_browsers.chromium import CHROMEDRIVER, CHROMIUM, INSTALL_HINT


@pytest.fixture(scope="package")
def chromium() -> None:
    """Fail at once, saying how to install them, when chromium or chromedriver is missing."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    if missing:
        pytest.fail(f"the WebUI browser test needs Debian's chromium and chromedriver; missing {missing}: {INSTALL_HINT}")


@pytest.fixture(scope="package")
def webui_root(chromium, ray_cluster, llm_server, tmp_path_factory) -> Iterator[str]:
    """The app with the WebUI over a workspaces root (one graph shard a workspace); its base URL."""
    from ray import serve

    from lightrag_ray.serve.webui_source import find_webui

    root = tmp_path_factory.mktemp("webui") / "root"
    yield run_app(root / "unused", llm_server.url, api_key=None, webui=str(find_webui()), workspaces_root=str(root),
                  shards=1)
    serve.shutdown()
