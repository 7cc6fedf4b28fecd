"""The workspaces one app serves, by name: one workspace (the settings' own), or every folder
under a workspaces root, each with its own files, graph shards and vectors (a Milvus Lite file
in its folder; on a Milvus server, collections under a prefix of its own).

Names are 1-64 letters, digits, '-' or '_', starting with a letter or digit, so a name can
never reach outside the root.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path
from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.service import status
from lightrag_ray.storage import manifest as manifests
from lightrag_ray.storage.vector_owner import LITE_OWNER_CPUS
from lightrag_ray.storage.vectors import KINDS, is_server_uri
from lightrag_ray.storage.workspace import Workspace

DEFAULT_WORKSPACE = "default"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


class InvalidWorkspaceName(ValueError):
    """A workspace name that is not 1-64 letters, digits, '-' or '_' starting with a letter or digit (HTTP 400)."""


class UnknownWorkspace(LookupError):
    """A workspace the app does not hold (HTTP 404)."""


class NoRoomForWorkspace(RuntimeError):
    """The cluster has no free CPU for another workspace's actors and none can be closed (HTTP 503)."""


def check_name(name: str) -> str:
    """``name`` when it is a valid workspace name; InvalidWorkspaceName otherwise."""
    if not _NAME.match(name):
        raise InvalidWorkspaceName(
            f"invalid workspace name {name[:80]!r}: use 1-64 letters, digits, '-' or '_', starting with a letter or digit")
    return name


def collection_prefix(base: str, name: str) -> str:
    """The Milvus collection prefix of workspace ``name`` on a shared server (Milvus names
    allow no '-': the name's hash keeps 'a-b' and 'a_b' apart)."""
    return f"{base}_{name.replace('-', '_')}_{hashlib.md5(name.encode()).hexdigest()[:6]}"


class WorkspaceCatalog:
    """Name -> settings of the workspaces an app serves. Without ``root``: the one workspace of
    ``settings``, called ``default``. With ``root``: every folder under it; a new name is
    created on first write (``create=True``)."""

    def __init__(self, settings: Settings, root: str | None = None, default: str = DEFAULT_WORKSPACE) -> None:
        if root is not None and "://" in root.removeprefix("file://"):
            raise ValueError(f"--workspaces-root must be a local folder, not {root}")
        self.settings = settings
        self.root = Path(root.removeprefix("file://")).resolve() if root is not None else None
        self.default = check_name(default)

    @property
    def multi(self) -> bool:
        return self.root is not None

    def resolve(self, name: str) -> str:
        """The workspace a request means: ``name``, or the default for ""."""
        return check_name(name) if name else self.default

    def settings_for(self, name: str, create: bool = False) -> Settings:
        """The settings of workspace ``name`` ("" the default); UnknownWorkspace when the app
        holds none of that name (with ``create``, a new one under the root is made)."""
        name = self.resolve(name)
        if self.root is None:
            if name != self.default:
                raise UnknownWorkspace(f"unknown workspace {name!r}: this app serves one workspace ({self.default!r}); "
                                       "start it with --workspaces-root to serve many")
            return self.settings
        folder = self.root / name
        if not folder.is_dir():
            if not create:
                raise UnknownWorkspace(f"unknown workspace {name!r}: insert a document into it first "
                                       f"(POST /documents/text with LIGHTRAG-WORKSPACE: {name})")
            folder.mkdir(parents=True, exist_ok=True)
        update: dict[str, Any] = {"workspace": str(folder)}
        if self.settings.vectors.uri and is_server_uri(self.settings.vectors.uri):
            update["vectors"] = self.settings.vectors.model_copy(
                update={"collection_prefix": collection_prefix(self.settings.vectors.collection_prefix, name)})
        return self.settings.model_copy(update=update)

    def cpus_to_open(self, settings: Settings) -> float:
        """The CPUs a writer reserves to open a workspace of ``settings``: its graph shard actors
        and, with Milvus Lite, the actor owning the file."""
        recorded = manifests.load(Workspace(settings.workspace)).num_shards
        graph = settings.graph
        lite = not is_server_uri(settings.milvus_uri())
        return (recorded or graph.shards_for(0)) * graph.replicas * graph.num_cpus + (LITE_OWNER_CPUS if lite else 0.0)

    def names(self) -> list[str]:
        """Every workspace's name, sorted."""
        if self.root is None:
            return [self.default]
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and _NAME.match(p.name))

    def summary(self, name: str) -> dict[str, Any]:
        """Name, folder and counts (documents by status, entities, relations) of one workspace."""
        settings = self.settings_for(name)
        workspace = Workspace(settings.workspace)
        found = status.counts(workspace) if manifests.exists(workspace) else {}
        return {"name": self.resolve(name), "workspace": settings.workspace,
                "documents": found.get("documents", {}), "entities": found.get("entities", 0),
                "relations": found.get("relations", 0), "graph_version": found.get("graph_version", 0)}

    def remove(self, name: str) -> None:
        """Delete workspace ``name``'s files and, on a Milvus server, its collections (the
        caller has closed it first)."""
        if self.root is None:
            raise ValueError("this app serves one workspace; deleting it needs --workspaces-root")
        settings = self.settings_for(name)
        uri = settings.milvus_uri()
        if is_server_uri(uri):
            from pymilvus import MilvusClient

            vec = settings.vectors
            client = MilvusClient(uri=uri, token=vec.token, db_name=vec.db_name)
            try:
                for kind in KINDS:
                    client.drop_collection(f"{vec.collection_prefix}_{kind}")
            finally:
                client.close()
        shutil.rmtree(settings.workspace)
