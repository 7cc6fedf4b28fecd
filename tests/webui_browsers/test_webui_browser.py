"""LightRAG 1.5.7's own WebUI in a real browser against the Serve app (issue 14, "a drop-in for
LightRAG Server"): headless Debian chromium, driven by selenium through /usr/bin/chromedriver.

The app of test_serve (real Ray, Milvus Lite, the scripted LLM; no API key, so the WebUI runs
in its guest mode) serves the WebUI that ``lightrag-ray serve --webui`` finds: the installed
lightrag package's, else the cached download of lightrag-hku. One document is inserted over
HTTP before the browser opens, one is uploaded through the WebUI's upload dialog. The graph
canvas is WebGL (sigma.js): headless chromium draws it with SwiftShader (see the screenshots);
the checks read what the DOM shows of it: node and edge counts, the legend's entity types and
the properties panel of a node picked with the in-page node search.

Screenshots go to $LIGHTRAG_RAY_SCREENSHOTS, else a ``webui_screenshots`` folder in the
session's tmp dir. The browser's console must hold no SEVERE entry (failed requests included).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.scripted_llm import ANSWER_PREFIX
from tests.serve_helpers import wait_for
from tests.webui_browsers.chromium import headless_chromium

SEEDED = "Alice Smith founded Acme Corporation in Paris. Alice Smith hired Carol White at Acme Corporation."
UPLOADED = ("Ishmael sailed with Captain Ahab on the Pequod. Captain Ahab hunted Moby Dick across the Pacific Ocean. "
            "Starbuck warned Captain Ahab about Moby Dick.")
UI_WAIT_S = 90  # a slow shared machine: page loads, polls and layouts take their time
INDEX_WAIT_S = 300


@pytest.fixture(scope="module")
def webui_app(webui_root) -> str:
    """The package's app in its default workspace (requests naming none reach it, as a
    single-workspace app's do), one document inserted over HTTP; its base URL."""
    with httpx.Client(base_url=webui_root, timeout=120) as client:
        job = client.post("/documents/text", json={"text": SEEDED, "file_source": "acme.txt"}).json()
        assert wait_for(client, job["track_id"])["job_status"] == "processed"
    return webui_root


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where the screenshots go."""
    folder = Path(os.environ.get("LIGHTRAG_RAY_SCREENSHOTS") or tmp_path_factory.mktemp("webui_screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"WebUI screenshots in {folder}")
    return folder


@pytest.fixture(scope="module")
def browser(webui_app) -> Iterator[Any]:
    """Headless chromium at the app's root, with the console log kept."""
    yield from headless_chromium(webui_app + "/")  # the root redirects to the WebUI, as LightRAG Server's does


def wait_until(driver: Any, what: Callable[[Any], Any], message: str, timeout_s: float = UI_WAIT_S) -> Any:
    """``what(driver)`` once it is truthy (WebDriverWait), failing with ``message``; an element
    React replaced meanwhile (stale) counts as not yet."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    waiting = WebDriverWait(driver, timeout_s, poll_frequency=0.5, ignored_exceptions=[StaleElementReferenceException])
    return waiting.until(what, message)


def tab(driver: Any, name: str) -> Callable[[], Any]:
    """Open the WebUI tab ``name``; returns a function that finds its panel afresh (React may
    re-render it, which leaves an element found earlier stale)."""
    from selenium.webdriver.common.by import By

    button = wait_until(driver, lambda d: d.find_element(By.XPATH, f"//button[@role='tab' and normalize-space()='{name}']"),
                        f"no {name} tab")
    button.click()
    panel_id = button.get_attribute("aria-controls")

    def panel() -> Any:
        return driver.find_element(By.ID, panel_id)

    wait_until(driver, lambda d: panel().get_attribute("data-state") == "active", f"the {name} tab did not open")
    return panel


def only_option(driver: Any, text: str) -> Any:
    """The node search's option when it is the only one and reads ``text``, else None."""
    from selenium.webdriver.common.by import By

    options = driver.find_elements(By.CSS_SELECTOR, "[cmdk-item]")
    return options[0] if [option.text for option in options] == [text] else None


def clean_console(driver: Any) -> None:
    """No SEVERE entry in the browser's console since the last look (it is drained on reading)."""
    severe = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not severe, "\n".join(severe)


def test_root_opens_the_webui_on_the_documents_tab(browser, webui_app, shots):
    from selenium.webdriver.common.by import By

    wait_until(browser, lambda d: "All (1)" in d.find_element(By.TAG_NAME, "body").text, "the documents tab lists nothing")
    assert browser.current_url.startswith(webui_app + "/webui/")
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "Documents" in body and "Knowledge Graph" in body and "Retrieval" in body
    browser.find_element(By.ID, "toggle-filename-btn").click()  # file names instead of ids
    wait_until(browser, lambda d: "acme.txt" in d.find_element(By.TAG_NAME, "body").text, "acme.txt is not listed")
    assert "Completed (1)" in browser.find_element(By.TAG_NAME, "body").text
    browser.save_screenshot(str(shots / "1_documents.png"))
    clean_console(browser)


def test_upload_through_the_dialog_reaches_processed(browser, shots, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    document = tmp_path / "moby.txt"
    document.write_text(UPLOADED + "\n", encoding="utf-8")
    browser.find_element(By.XPATH, "//button[normalize-space()='Upload']").click()
    dialog = wait_until(browser, lambda d: d.find_element(By.CSS_SELECTOR, "[role=dialog]"), "no upload dialog")
    # PARQUET is ours (/documents/supported_file_types), not in the WebUI's own list: the dialog is ready
    wait_until(browser, lambda d: "PARQUET" in dialog.text, "the dialog does not list this server's file types")
    dialog.find_element(By.CSS_SELECTOR, "input[type=file]").send_keys(str(document))
    wait_until(browser, lambda d: "moby.txt" in dialog.text, "the dialog does not show the file")
    browser.save_screenshot(str(shots / "2_upload_dialog.png"))
    assert "Error" not in dialog.text, dialog.text
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()  # close the dialog
    wait_until(browser, lambda d: "Completed (2)" in d.find_element(By.TAG_NAME, "body").text,
               "the uploaded document did not reach processed (Completed)", INDEX_WAIT_S)
    assert "moby.txt" in browser.find_element(By.TAG_NAME, "body").text
    browser.save_screenshot(str(shots / "3_uploaded.png"))
    clean_console(browser)


def test_graph_tab_shows_the_entities_with_lightrags_properties(browser, shots):
    from selenium.webdriver.common.by import By

    browser.refresh()  # the graph as it is after the upload
    panel = tab(browser, "Knowledge Graph")
    counts = wait_until(browser, lambda d: re.search(r"node: ([1-9]\d*)\s+edge: ([1-9]\d*)", panel().text),
                        "the graph shows no nodes")
    assert int(counts.group(1)) >= 6 and int(counts.group(2)) >= 4  # both documents' entities
    assert panel().find_elements(By.TAG_NAME, "canvas")
    panel().find_element(By.XPATH, ".//button[.//*[contains(@class,'lucide-book-open')]]").click()  # the legend
    wait_until(browser, lambda d: "Legend" in panel().text, "no legend")
    legend = panel().text.split("Legend", 1)[1]
    assert "Person" in legend or "person" in legend  # entity types, from entity_type
    search = panel().find_element(By.CSS_SELECTOR, "input[placeholder='Search nodes in page...']")
    search.click()
    search.send_keys("Captain Ahab")
    option = wait_until(browser, lambda d: only_option(d, "Captain Ahab"),
                        "the node search does not narrow down to Captain Ahab")  # (it filters after a pause)
    option.click()
    wait_until(browser, lambda d: re.search(r"ID\s*:\s*Captain Ahab", panel().text), "no properties panel for Captain Ahab")
    properties = panel().text
    browser.save_screenshot(str(shots / "4_graph.png"))
    # the WebUI's names for entity_id, entity_type, file_path and source_id
    assert re.search(r"Name\s*:\s*Captain Ahab", properties), properties
    assert re.search(r"Type\s*:\s*person", properties), properties
    assert re.search(r"File\s*:\s*moby\.txt", properties), properties
    assert re.search(r"C-ID\s*:\s*chunk-[0-9a-f]+", properties), properties
    assert "Moby Dick" in properties  # a neighbour, from the edges
    clean_console(browser)


def test_retrieval_tab_answers_with_the_scripted_llm(browser, shots):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    panel = tab(browser, "Retrieval")
    query = browser.find_element(By.ID, "query-input")
    query.send_keys("Who hunted Moby Dick?")
    query.send_keys(Keys.ENTER)
    wait_until(browser, lambda d: ANSWER_PREFIX in panel().text, "no answer in the retrieval tab")
    wait_until(browser, lambda d: "Response time" in panel().text, "the answer did not finish")
    browser.save_screenshot(str(shots / "5_retrieval.png"))
    clean_console(browser)


def test_webui_files_are_served_as_lightrag_server_serves_them(webui_app):
    root = httpx.get(webui_app + "/", timeout=30)
    assert root.status_code == 307 and root.headers["location"] == "/webui/"
    index = httpx.get(webui_app + "/webui/", timeout=30)
    assert index.status_code == 200 and index.headers["cache-control"].startswith("no-cache")
    assert 'window.__LIGHTRAG_CONFIG__ = {"apiPrefix": "", "webuiPrefix": "/webui/"' in index.text
    asset = re.search(r'src="\./(assets/index-[^"]+\.js)"', index.text).group(1)
    script = httpx.get(f"{webui_app}/webui/{asset}", timeout=30)
    assert script.status_code == 200 and "immutable" in script.headers["cache-control"]
    assert "javascript" in script.headers["content-type"]
    assert httpx.get(webui_app + "/webui/%2e%2e/%2e%2e/etc/passwd", timeout=30).status_code == 404
