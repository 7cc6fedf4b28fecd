"""One Serve app for every module of this package (started once instead of once a module): it
serves a workspaces root, and each module works in a workspace of its own (its ``WORKSPACE``,
else the default one, which requests naming no workspace reach, as a single-workspace app's
do), so one module's inserts, edits and deletes never reach another's. Their actors hold
the session cluster's CPUs: a module's insert job closes the idle workspaces of the modules
before it (service.workspace_pool.room_for_job)."""

from __future__ import annotations

import pytest

from lightrag_ray.service.workspaces import DEFAULT_WORKSPACE
from tests.serve_helpers import client, index_samples, run_app  # noqa: F401 - client: a fixture


RERANK_MODEL = "scripted-rerank"


@pytest.fixture(scope="package")
def served(ray_cluster, llm_server, rerank_server, tmp_path_factory):
    """(base URL, workspaces root) of the package's app; it reranks with the scripted rerank server."""
    from ray import serve

    root = tmp_path_factory.mktemp("served")
    rerank = {"backend": "http", "base_url": rerank_server.url, "model": RERANK_MODEL, "api_key": "rerank-key"}
    yield run_app(root / "unused", llm_server.url, workspaces_root=str(root), settings={"rerank": rerank}), root
    serve.shutdown()


@pytest.fixture(scope="module")
def app(served, request):
    """(base URL, workspace folder) of the module's workspace: under /w/<WORKSPACE>, or the default one."""
    url, root = served
    name = getattr(request.module, "WORKSPACE", DEFAULT_WORKSPACE)
    return (url if name == DEFAULT_WORKSPACE else f"{url}/w/{name}"), root / name


@pytest.fixture(scope="module")
def indexed(client):
    """DOC_A, DOC_B and DOC_C indexed through the app into the module's workspace (index_samples)."""
    return index_samples(client)
