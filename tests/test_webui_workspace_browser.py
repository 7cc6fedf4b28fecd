"""LightRAG's WebUI against one named workspace of a many-workspace app (issue 30), in headless
chromium: opened at ``/w/alpha/webui/``, it calls the API under that prefix (the runtime config's
``apiPrefix``), so its document list and graph are alpha's, never beta's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.serve_helpers import DOC_A, DOC_C, run_app, wait_for
from tests.test_webui_browser import CHROMEDRIVER, CHROMIUM, chromium, clean_console, tab, wait_until  # noqa: F401


@pytest.fixture(scope="module")
def many_app(chromium, ray_cluster, llm_server, tmp_path_factory) -> Iterator[str]:
    """A workspaces root with the WebUI: DOC_A in alpha, DOC_C in beta; yields the base URL."""
    from ray import serve

    from lightrag_ray.serve.webui_source import find_webui

    root = tmp_path_factory.mktemp("webui_many") / "root"
    base = run_app(root / "unused", llm_server.url, api_key=None, webui=str(find_webui()), workspaces_root=str(root),
                   shards=1)
    with httpx.Client(base_url=base, timeout=120) as client:
        for name, text, source in (("alpha", DOC_A, "acme.txt"), ("beta", DOC_C, "lisbon.txt")):
            client.headers["LIGHTRAG-WORKSPACE"] = name
            job = client.post("/documents/text", json={"text": text, "file_source": source}).json()
            assert wait_for(client, job["track_id"])["job_status"] == "processed"
    yield base
    serve.shutdown()


@pytest.fixture(scope="module")
def browser(many_app) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900",
                 "--enable-unsafe-swiftshader"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.get(many_app + "/w/alpha/")  # the prefixed root redirects to the prefixed WebUI
    yield driver
    driver.quit()


def test_the_webui_under_a_workspace_prefix_shows_that_workspace_only(browser, many_app):
    from selenium.webdriver.common.by import By

    def body() -> str:
        return browser.find_element(By.TAG_NAME, "body").text

    wait_until(browser, lambda d: "All (1)" in body(), "alpha's documents tab lists nothing")
    assert browser.current_url.startswith(many_app + "/w/alpha/webui/")
    browser.find_element(By.ID, "toggle-filename-btn").click()
    wait_until(browser, lambda d: "acme.txt" in body(), "acme.txt (alpha's) is not listed")
    assert "lisbon.txt" not in body()
    graphs = {name: httpx.get(f"{many_app}/w/{name}/graphs", params={"label": "*", "max_depth": 3}, timeout=60).json()
              for name in ("alpha", "beta")}
    sizes = {name: (len(g["nodes"]), len(g["edges"])) for name, g in graphs.items()}
    assert sizes["alpha"] != sizes["beta"], sizes  # so the counts the WebUI shows tell them apart
    panel = tab(browser, "Knowledge Graph")
    counts = wait_until(browser, lambda d: re.search(r"node: ([1-9]\d*)\s+edge: (\d+)", panel().text),
                        "alpha's graph shows no nodes")
    assert (int(counts.group(1)), int(counts.group(2))) == sizes["alpha"], (counts.group(0), sizes)
    clean_console(browser)
