"""The chat APIs' modules (OpenAI and Ollama) only read their workspace, so they share one, with
the sample documents indexed once, on the package's app."""

from __future__ import annotations

import httpx
import pytest

from tests.serve_helpers import HEADERS, index_samples


@pytest.fixture(scope="package")
def app(served):
    """(base URL, workspace folder) of the chat APIs' workspace."""
    url, root = served
    return f"{url}/w/chat", root / "chat"


@pytest.fixture(scope="package")
def client(app):
    with httpx.Client(base_url=app[0], headers=HEADERS, timeout=120) as c:
        yield c


@pytest.fixture(scope="package")
def indexed(client):
    """DOC_A, DOC_B and DOC_C indexed through the app."""
    return index_samples(client)
