"""Many workspaces behind one Serve app (issue 30), over real HTTP: ``--workspaces-root``,
workspaces named by the ``LIGHTRAG-WORKSPACE`` header, the ``/w/{name}`` prefix or a chat
model's ``@name``; created by their first insert, isolated on every route, keys bound to some
of them, the least recently used closed past the cap and reopened on demand, deleted whole."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serve_helpers import DOC_A, DOC_C, run_app, wait_for

ADMIN = "admin-key"
KEY_A = "key-for-alpha"
H_ADMIN = {"X-API-Key": ADMIN}
ALPHA = {**H_ADMIN, "LIGHTRAG-WORKSPACE": "alpha"}
BETA = {**H_ADMIN, "LIGHTRAG-WORKSPACE": "beta"}
A_ONLY = {"X-API-Key": KEY_A}


@pytest.fixture(scope="module")
def app(ray_cluster, llm_server, tmp_path_factory):
    """An app over a workspaces root, at most 2 workspaces open; yields (base URL, root)."""
    from ray import serve

    root = tmp_path_factory.mktemp("roots") / "workspaces"
    url = run_app(root / "unused", llm_server.url, api_key=ADMIN, workspaces_root=str(root),
                  workspace_keys={KEY_A: ["alpha"]}, max_open_workspaces=2, shards=1)
    yield url, root
    serve.shutdown()


@pytest.fixture(scope="module")
def filled(app):
    """DOC_A in alpha (by the header), DOC_C in beta (by the path prefix), both processed."""
    url, _ = app
    with httpx.Client(base_url=url, timeout=120) as client:
        one = client.post("/documents/text", json={"text": DOC_A, "file_source": "acme.txt"}, headers=ALPHA)
        two = client.post("/w/beta/documents/text", json={"text": DOC_C, "file_source": "lisbon.txt"}, headers=H_ADMIN)
        assert one.status_code == 200 and two.status_code == 200, (one.text, two.text)
        for job, headers in ((one.json(), ALPHA), (two.json(), BETA)):
            client.headers.update(headers)
            assert wait_for(client, job["track_id"])["job_status"] == "processed"
    return app


def _get(url: str, path: str, headers: dict[str, str], **kwargs: Any) -> httpx.Response:
    return httpx.request(kwargs.pop("method", "GET"), f"{url}{path}", headers=headers, timeout=120, **kwargs)


def test_each_workspace_sees_only_its_own_documents_and_graph_on_every_route(filled):
    url, root = filled
    assert (root / "alpha").is_dir() and (root / "beta").is_dir()  # made by their first insert
    own = {"alpha": ("Acme", "Dora"), "beta": ("Dora", "Acme")}  # (a name of its own, one of the other's)
    for name, (mine, theirs) in own.items():
        for headers, prefix in (({**H_ADMIN, "LIGHTRAG-WORKSPACE": name}, ""), (H_ADMIN, f"/w/{name}")):
            texts = {
                "query/data": _get(url, f"{prefix}/query/data", headers, method="POST",
                                   json={"query": f"Who is {mine}?", "mode": "mix"}),
                "query context": _get(url, f"{prefix}/query", headers, method="POST",
                                      json={"query": f"Tell me about {mine}", "mode": "hybrid", "only_need_context": True}),
                "graphs": _get(url, f"{prefix}/graphs", headers, params={"label": "*", "max_depth": 3}),
                "labels": _get(url, f"{prefix}/graph/label/list", headers),
                "popular": _get(url, f"{prefix}/graph/label/popular", headers),
                "search": _get(url, f"{prefix}/graph/label/search", headers, params={"q": theirs[:3]}),
                "documents": _get(url, f"{prefix}/documents", headers),
                "paginated": _get(url, f"{prefix}/documents/paginated", headers, method="POST", json={}),
                "ollama context": _get(url, f"{prefix}/api/chat", headers, method="POST", json={
                    "model": "lightrag:latest", "stream": False,
                    "messages": [{"role": "user", "content": f"/context Who is {mine}?"}]}),
                "health": _get(url, f"{prefix}/health", headers),
            }
            for route, response in texts.items():
                assert response.status_code == 200, (name, prefix, route, response.text)
                assert theirs not in response.text, (name, prefix, route)
            for route in ("query/data", "query context", "labels", "documents", "ollama context"):
                assert mine in texts[route].text, (name, prefix, route)
            assert texts["health"].json()["workspace_name"] == name
            assert texts["health"].json()["documents"] == {"processed": 1}


def test_the_chat_model_name_picks_the_workspace(filled):
    url, _ = filled
    body = {"messages": [{"role": "user", "content": "Who is Dora Quinn?"}]}
    answered = _get(url, "/v1/chat/completions", H_ADMIN, method="POST", json={**body, "model": "lightrag-mix@beta"})
    assert answered.status_code == 200 and answered.json()["choices"][0]["message"]["content"], answered.text
    denied = _get(url, "/v1/chat/completions", A_ONLY, method="POST", json={**body, "model": "lightrag-mix@beta"})
    assert denied.status_code == 403 and denied.json()["error"]["param"] == "model", denied.text
    unknown = _get(url, "/v1/chat/completions", H_ADMIN, method="POST", json={**body, "model": "lightrag-mix@nowhere"})
    assert unknown.status_code == 404 and "nowhere" in unknown.json()["error"]["message"], unknown.text
    invalid = _get(url, "/v1/chat/completions", H_ADMIN, method="POST", json={**body, "model": "lightrag-mix@../beta"})
    assert invalid.status_code == 400, invalid.text


def test_a_key_bound_to_alpha_gets_403_for_beta_on_every_route(filled):
    url, _ = filled
    requests = [("GET", "/documents", None), ("POST", "/query/data", {"query": "Dora", "mode": "local"}),
                ("POST", "/query", {"query": "Dora", "mode": "naive"}), ("GET", "/graph/label/list", None),
                ("POST", "/documents/text", {"text": DOC_A}), ("GET", "/health", None),
                ("POST", "/api/chat", {"model": "lightrag:latest", "messages": [{"role": "user", "content": "Dora?"}]}),
                ("POST", "/v1/chat/completions", {"model": "lightrag-mix", "messages": [{"role": "user", "content": "x"}]})]
    for method, path, body in requests:
        for headers, prefix in (({**A_ONLY, "LIGHTRAG-WORKSPACE": "beta"}, ""), (A_ONLY, "/w/beta")):
            response = _get(url, f"{prefix}{path}", headers, method=method, json=body)
            assert response.status_code == 403, (prefix, path, response.status_code, response.text)
            assert "beta" in response.text, path
    mine = _get(url, "/documents", {**A_ONLY, "LIGHTRAG-WORKSPACE": "alpha"})
    assert mine.status_code == 200 and "Acme" in mine.text
    assert _get(url, "/documents", A_ONLY).status_code == 403  # nor the default workspace
    listed = _get(url, "/workspaces", A_ONLY).json()["workspaces"]
    assert [w["name"] for w in listed] == ["alpha"]
    assert _get(url, "/workspaces/beta", A_ONLY, method="DELETE").status_code == 403
    assert _get(url, "/documents", {"X-API-Key": "wrong", "LIGHTRAG-WORKSPACE": "alpha"}).status_code == 403


@pytest.mark.parametrize("name", ["../beta", "a/b", ".hidden", "-x", "x" * 65, "beta%2F.."])
def test_invalid_workspace_names_get_400(filled, name):
    url, _ = filled
    response = _get(url, "/documents", {**H_ADMIN, "LIGHTRAG-WORKSPACE": name})
    assert response.status_code == 400 and "invalid workspace name" in response.json()["detail"], response.text
    prefixed = _get(url, f"/w/{name}/documents", H_ADMIN)
    if "/" in name or "%" in name:  # the client or the proxy resolves the path first: never a workspace's data
        assert prefixed.status_code in (400, 404) and "Acme" not in prefixed.text, (name, prefixed.text)
    else:
        assert prefixed.status_code == 400 and "invalid workspace name" in prefixed.text, (name, prefixed.text)


def test_an_unknown_workspace_is_a_404_that_says_how_to_create_it(filled):
    url, root = filled
    for path in ("/documents", "/graph/label/list"):
        response = _get(url, path, {**H_ADMIN, "LIGHTRAG-WORKSPACE": "nowhere"})
        assert response.status_code == 404 and "unknown workspace 'nowhere'" in response.json()["detail"], response.text
    response = _get(url, "/w/nowhere/query/data", H_ADMIN, method="POST", json={"query": "x"})
    assert response.status_code == 404
    assert not (root / "nowhere").exists()  # reads never create a workspace


def test_past_the_cap_the_least_recently_used_workspace_is_closed_and_reopened_on_demand(filled):
    url, _ = filled
    for name in ("alpha", "beta", "default"):  # three workspaces used, at most two open
        assert _get(url, "/documents", {**H_ADMIN, "LIGHTRAG-WORKSPACE": name}).status_code == 200
    listed = {w["name"]: w for w in _get(url, "/workspaces", H_ADMIN).json()["workspaces"]}
    assert set(listed) == {"alpha", "beta", "default"}
    assert not listed["alpha"]["open"] and listed["beta"]["open"] and listed["default"]["open"], listed
    assert listed["alpha"]["documents"] == {"processed": 1} and listed["alpha"]["entities"] > 0
    started = time.monotonic()
    reopened = _get(url, "/query/data", ALPHA, method="POST", json={"query": "Who founded Acme Corporation?", "mode": "local"})
    assert reopened.status_code == 200 and "Acme" in reopened.text and "Dora" not in reopened.text, reopened.text
    assert time.monotonic() - started < 60
    listed = {w["name"]: w["open"] for w in _get(url, "/workspaces", H_ADMIN).json()["workspaces"]}
    assert listed["alpha"] and sum(listed.values()) <= 2, listed


def test_deleting_a_workspace_removes_everything_in_it(filled):
    url, root = filled
    made = _get(url, "/w/gamma/documents/text", H_ADMIN, method="POST", json={"text": DOC_C})
    assert made.status_code == 200, made.text
    gamma = {**H_ADMIN, "LIGHTRAG-WORKSPACE": "gamma"}
    with httpx.Client(base_url=url, headers=gamma, timeout=120) as client:
        assert wait_for(client, made.json()["track_id"])["job_status"] == "processed"
    deleted = _get(url, "/workspaces/gamma", H_ADMIN, method="DELETE")
    assert deleted.status_code == 200, deleted.text
    assert not (root / "gamma").exists()
    assert _get(url, "/documents", gamma).status_code == 404
    assert _get(url, "/workspaces/gamma", H_ADMIN, method="DELETE").status_code == 404
    assert "gamma" not in {w["name"] for w in _get(url, "/workspaces", H_ADMIN).json()["workspaces"]}
    # the others are untouched
    assert "Dora" in _get(url, "/documents", BETA).text


def test_status_lists_the_workspaces_of_a_root_with_their_counts(filled, capsys):
    from lightrag_ray.cli.main import main

    _, root = filled
    assert main(["status", "--workspaces-root", str(root), "--json"]) == 0
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)["workspaces"]}
    assert {"alpha", "beta", "default"} <= set(listed)
    assert listed["beta"]["documents"] == {"processed": 1} and listed["beta"]["entities"] > 0
    assert Path(listed["alpha"]["workspace"]) == root / "alpha"


def test_a_workspace_the_cluster_has_no_cpu_for_is_refused_with_a_clear_message(ray_cluster, monkeypatch, tmp_path):
    """Opening waits for free CPU for the workspace's actors (an actor Ray cannot place would
    hang the opening for good), then refuses with what to do."""
    import asyncio

    from lightrag_ray.config import load_settings
    from lightrag_ray.serve import owner
    from lightrag_ray.service import workspace_pool
    from lightrag_ray.service.workspaces import NoRoomForWorkspace

    monkeypatch.setattr(workspace_pool, "ROOM_WAIT_S", 0.5)
    settings = load_settings(overrides={"workspace": str(tmp_path / "single")}, environ={})
    host = owner.WorkspaceDeployment.func_or_class(settings.model_dump(), None, str(tmp_path / "root"))
    asyncio.run(host.pool.wait_for_room("small", 0.001))  # there is room for this
    with pytest.raises(NoRoomForWorkspace, match=r"no free CPU to open workspace 'huge' \(its actors reserve 1000;"):
        asyncio.run(host.pool.wait_for_room("huge", 1000.0))
    assert host.catalog.cpus_to_open(host.catalog.settings_for("new", create=True)) == pytest.approx(0.3)  # 2 shards + Lite


def test_the_owner_runs_only_its_listed_service_calls(ray_cluster, tmp_path):
    """The ingress reaches a workspace's service through the explicit list WorkspaceCalls: any
    other method (the job runner, closing, private helpers) is refused before a workspace opens."""
    import asyncio

    from lightrag_ray.config import load_settings
    from lightrag_ray.serve import owner
    from lightrag_ray.service.workspace_service import WorkspaceService

    assert owner.CALLS and all(not name.startswith("_") and callable(getattr(WorkspaceService, name))
                               for name in owner.CALLS)
    assert all(callable(getattr(owner.WorkspaceDeployment.func_or_class, name)) for name in owner.CALLS)
    settings = load_settings(overrides={"workspace": str(tmp_path / "single")}, environ={})
    host = owner.WorkspaceDeployment.func_or_class(settings.model_dump(), None, str(tmp_path / "root"))
    for method in ("run_job", "close", "memory_bytes", "_exclusive", "nonexistent"):
        with pytest.raises(AttributeError, match=f"may not call the workspace service's '{method}'"):
            asyncio.run(host.call("a", method))
    assert not host.pool.hosted  # nothing was opened


class _Service:
    """What the pool asks of a hosted workspace's service: whether it is busy, and closing it."""

    def __init__(self, busy: bool = False) -> None:
        self.write_lock = threading.Lock()
        if busy:
            self.write_lock.acquire()
        self.closed = False

    def unfinished_jobs(self) -> list[str]:
        return []

    def close(self) -> None:
        self.closed = True


def test_an_insert_job_closes_idle_workspaces_while_the_cluster_lacks_its_cpus(ray_cluster, tmp_path):
    """Open workspaces' actors can hold every CPU, and a job's tasks would then wait for good:
    before a job, idle workspaces are closed, least recently used first, never a busy one or
    the job's own; with none left to close the job starts anyway."""
    import asyncio

    import ray

    from lightrag_ray.config import load_settings
    from lightrag_ray.service.workspace_pool import HostedWorkspace, WorkspacePool
    from lightrag_ray.service.workspaces import WorkspaceCatalog

    catalog = WorkspaceCatalog(load_settings(overrides={"workspace": str(tmp_path / "x")}, environ={}), str(tmp_path))
    services = {"old": _Service(), "busy": _Service(busy=True), "newer": _Service(), "mine": _Service()}

    async def scenario() -> None:
        pool = WorkspacePool(catalog, open_service=None)  # type: ignore[arg-type]  # nothing opens here
        for epoch, (name, service) in enumerate(services.items()):
            pool.hosted[name] = HostedWorkspace(name, service, epoch)  # type: ignore[arg-type]
        await pool.room_for_job("mine", 0.001)  # room: nothing closed
        assert list(pool.hosted) == ["old", "busy", "newer", "mine"]
        await pool.room_for_job("mine", ray.cluster_resources()["CPU"] + 1)  # never room: every idle one closed
        assert list(pool.hosted) == ["busy", "mine"]

    asyncio.run(scenario())
    assert [name for name, service in services.items() if service.closed] == ["old", "newer"]
