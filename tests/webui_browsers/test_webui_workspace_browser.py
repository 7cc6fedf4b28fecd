"""LightRAG's WebUI against one named workspace of a many-workspace app (issue 30), in headless
chromium: opened at ``/w/alpha/webui/``, it calls the API under that prefix (the runtime config's
``apiPrefix``), so its document list and graph are alpha's, never beta's."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.serve_helpers import DOC_A, DOC_C, wait_for
from tests.webui_browsers.chromium import headless_chromium
from tests.webui_browsers.test_webui_browser import clean_console, tab, wait_until


@pytest.fixture(scope="module")
def many_app(webui_root) -> str:
    """The package's app: DOC_A in alpha, DOC_C in beta; its base URL."""
    with httpx.Client(base_url=webui_root, timeout=120) as client:
        for name, text, source in (("alpha", DOC_A, "acme.txt"), ("beta", DOC_C, "lisbon.txt")):
            client.headers["LIGHTRAG-WORKSPACE"] = name
            job = client.post("/documents/text", json={"text": text, "file_source": source}).json()
            assert wait_for(client, job["track_id"])["job_status"] == "processed"
    return webui_root


@pytest.fixture(scope="module")
def browser(many_app) -> Iterator[Any]:
    yield from headless_chromium(many_app + "/w/alpha/")  # the prefixed root redirects to the prefixed WebUI


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
