"""One Serve app for the chat APIs' modules (OpenAI and Ollama): they only read the workspace,
so they share the app test_serve starts per module, at package scope (one start and one
indexing of the sample documents instead of two)."""

from __future__ import annotations

import httpx
import pytest

from tests.test_serve import HEADERS, index_samples, run_app


@pytest.fixture(scope="package")
def app(ray_cluster, llm_server, tmp_path_factory):
    """The application, started with serve.run; yields (base URL, workspace path)."""
    from ray import serve

    workspace = tmp_path_factory.mktemp("chat_apis") / "ws"
    yield run_app(workspace, llm_server.url), workspace
    serve.shutdown()


@pytest.fixture(scope="package")
def client(app):
    with httpx.Client(base_url=app[0], headers=HEADERS, timeout=120) as c:
        yield c


@pytest.fixture(scope="package")
def indexed(client):
    """DOC_A, DOC_B and DOC_C indexed through the app."""
    return index_samples(client)
