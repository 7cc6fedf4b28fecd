"""Where ``lightrag-ray serve --webui`` finds LightRAG's built WebUI (webui_source), the index
page's runtime config and path checks (serve.routes.webui), and the WebUI's files needing no API key."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest
from fastapi import HTTPException
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from lightrag_ray.serve import webui_source
from lightrag_ray.serve.http_guard import Access, RequestGuard
from lightrag_ray.serve.routes.webui import runtime_config, webui_file
from lightrag_ray.serve.webui_source import WebUINotFound, extract_wheel, fetch_webui, find_webui


def fake_wheel(path: Path, with_index: bool = True) -> Path:
    """A lightrag_hku wheel holding a tiny WebUI and some of the package around it."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("lightrag/__init__.py", "")
        archive.writestr("lightrag/api/lightrag_server.py", "")
        if with_index:
            archive.writestr("lightrag/api/webui/index.html", "<html><!-- __LIGHTRAG_RUNTIME_CONFIG__ --></html>")
        archive.writestr("lightrag/api/webui/assets/index-abc.js", "console.log(1)")
    return path


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    """The download cache in tmp_path; no installed lightrag package."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(webui_source, "installed_webui", lambda: None)
    return tmp_path / "cache" / "lightrag-ray" / "webui"


def test_a_wheel_gives_only_its_webui(tmp_path, cache):
    folder = find_webui(str(fake_wheel(tmp_path / "lightrag_hku-1.5.7-py3-none-any.whl")))
    assert folder == cache / "lightrag_hku-1.5.7-py3-none-any"
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "assets/index-abc.js", "index.html"]


def test_a_folder_is_used_as_it_is(tmp_path):
    folder = extract_wheel(fake_wheel(tmp_path / "w.whl"), tmp_path / "ui")
    assert find_webui(str(folder)) == folder.resolve()


def test_bad_paths_say_what_is_expected(tmp_path):
    with pytest.raises(WebUINotFound, match="not a folder holding index.html"):
        find_webui(str(tmp_path))
    with pytest.raises(WebUINotFound, match="holds no built WebUI"):
        find_webui(str(fake_wheel(tmp_path / "lightrag_hku-0.0.1-py3-none-any.whl", with_index=False)))


def test_the_download_is_cached_and_a_failed_one_says_what_to_do(tmp_path, cache, monkeypatch):
    commands: list[list[str]] = []

    def pip_download(command: list[str], **_: object) -> subprocess.CompletedProcess:
        commands.append(command)
        fake_wheel(Path(command[command.index("-d") + 1]) / "lightrag_hku-1.5.7-py3-none-any.whl")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(subprocess, "run", pip_download)
    assert find_webui() == cache / "1.5.7" and (cache / "1.5.7" / "index.html").is_file()
    assert find_webui() == cache / "1.5.7" and len(commands) == 1  # the cache, not a second download
    assert "lightrag-hku==1.5.7" in commands[0] and "--no-deps" in commands[0]
    monkeypatch.setattr(subprocess, "run", lambda command, **_: subprocess.CompletedProcess(command, 1, "", "no network"))
    with pytest.raises(WebUINotFound, match="no network.*pip install lightrag-hku.*--webui PATH"):
        fetch_webui(tmp_path / "other")


def test_index_config_and_paths(tmp_path):
    assert runtime_config("/site") == ('<script>window.__LIGHTRAG_CONFIG__ = {"apiPrefix": "/site", '
                                       '"webuiPrefix": "/site/webui/", "webuiTitle": null};</script>')
    assert "<\\/script>" in runtime_config("</script>")  # cannot close the script early
    folder = extract_wheel(fake_wheel(tmp_path / "w.whl"), tmp_path / "ui")
    assert webui_file(folder, "") == (folder / "index.html").resolve()
    assert webui_file(folder, "assets/index-abc.js").name == "index-abc.js"
    (tmp_path / "secret.txt").write_text("x")
    for bad in ("../secret.txt", "assets/../../secret.txt", "missing.js", "assets"):
        with pytest.raises(HTTPException):
            webui_file(folder, bad)


def test_the_webui_needs_no_key_and_the_api_still_does():
    inner = Starlette(routes=[Route("/{path:path}", lambda request: PlainTextResponse("ok"))])
    client = TestClient(RequestGuard(inner, settings=lambda: Access("KEY", 1024)))
    for path in ("/", "/webui", "/webui/", "/webui/assets/index-abc.js", "/ui/customization"):
        assert client.get(path).status_code == 200, path
    for path in ("/webuix", "/graphs", "/documents/supported_file_types"):
        assert client.get(path).status_code == 403, path


@pytest.mark.parametrize("flags, expected", [([], None), (["--webui"], ""), (["--webui", "ui/dist"], "ui/dist")])
def test_serve_webui_flag(flags, expected):
    from lightrag_ray.cli.main import _parser

    assert _parser().parse_args(["serve", "--workspace", "ws", *flags]).webui == expected
