"""Where the built LightRAG WebUI comes from (``lightrag-ray serve --webui [PATH]``).

The WebUI is LightRAG's (MIT licensed), shipped built inside the lightrag-hku wheel under
``lightrag/api/webui/``; this repository does not hold a copy. Sources, first match wins:
PATH (a folder holding index.html, or a lightrag_hku-*.whl to extract), the ``lightrag``
package installed beside this one, the download cache, a new download (``pip download``).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WEBUI_VERSION = "1.5.7"  # the LightRAG release whose WebUI and REST API this server matches
WHEEL_PREFIX = "lightrag/api/webui/"


class WebUINotFound(RuntimeError):
    """No WebUI source could be found or fetched; the message says what to do."""


def cache_dir() -> Path:
    """The download cache: ``$XDG_CACHE_HOME/lightrag-ray/webui`` (~/.cache by default)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lightrag-ray" / "webui"


def _is_webui(folder: Path) -> bool:
    return (folder / "index.html").is_file()


def extract_wheel(wheel: Path, dest: Path) -> Path:
    """Extract only ``lightrag/api/webui/`` of a lightrag-hku wheel into ``dest`` (replaced
    atomically, so a half-written folder is never served); returns ``dest``."""
    with zipfile.ZipFile(wheel) as archive:
        members = [m for m in archive.infolist() if m.filename.startswith(WHEEL_PREFIX) and not m.is_dir()]
        if not any(m.filename == WHEEL_PREFIX + "index.html" for m in members):
            raise WebUINotFound(f"{wheel} holds no built WebUI ({WHEEL_PREFIX}index.html)")
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".webui-", dir=dest.parent))
        for member in members:
            target = staging / member.filename[len(WHEEL_PREFIX):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(member))
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    return dest


def installed_webui() -> Path | None:
    """The WebUI of an installed ``lightrag`` package, found without importing it."""
    spec = importlib.util.find_spec("lightrag")
    for location in (spec.submodule_search_locations or []) if spec else []:
        if _is_webui(Path(location) / "api" / "webui"):
            return Path(location) / "api" / "webui"
    return None


def fetch_webui(cache: Path | None = None, version: str = WEBUI_VERSION) -> Path:
    """The cached WebUI of lightrag-hku ``version``, downloaded (``pip download --no-deps``) and
    extracted on first use."""
    folder = (cache or cache_dir()) / version
    if _is_webui(folder):
        return folder
    with tempfile.TemporaryDirectory() as download:
        command = [sys.executable, "-m", "pip", "download", f"lightrag-hku=={version}", "--no-deps",
                   "--only-binary", ":all:", "--quiet", "-d", download]
        done = subprocess.run(command, capture_output=True, text=True)
        wheels = sorted(Path(download).glob("lightrag_hku-*.whl"))
        if done.returncode != 0 or not wheels:
            raise WebUINotFound(
                f"could not download lightrag-hku=={version} for its WebUI ({done.stderr.strip()[-500:]}). "
                "Install it (pip install lightrag-hku), or pass --webui PATH: a folder holding the built "
                "WebUI's index.html, or a lightrag_hku-*.whl file")
        return extract_wheel(wheels[0], folder)


def find_webui(path: str | None = None) -> Path:
    """The folder of the built WebUI: ``path`` if given (a folder, or a wheel extracted to the
    cache), else the installed ``lightrag`` package's, else the cached or a new download."""
    if path:
        given = Path(path).expanduser().resolve()
        if given.is_file() and given.suffix == ".whl":
            return extract_wheel(given, cache_dir() / given.stem)
        if _is_webui(given):
            return given
        raise WebUINotFound(f"--webui {path}: not a folder holding index.html, nor a lightrag_hku-*.whl file")
    return installed_webui() or fetch_webui()
