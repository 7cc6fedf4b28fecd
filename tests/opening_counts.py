"""Counting, in the test's process, what opening a workspace costs: Workspaces built and
manifest reads (a run or a served insert builds at most one and reads the manifest once)."""

from __future__ import annotations

import pytest

from lightrag_ray.storage.workspace import Workspace


class Opened:
    """Counts, in this process, the Workspaces built and the manifest reads."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from lightrag_ray.storage import manifest as manifests

        self.built: list[str] = []
        self.reads: list[str] = []
        init, load = Workspace.__init__, manifests.load

        def counted_init(workspace, uri):
            self.built.append(uri)
            init(workspace, uri)

        def counted_load(workspace):
            self.reads.append(workspace.uri)
            return load(workspace)

        monkeypatch.setattr(Workspace, "__init__", counted_init)
        monkeypatch.setattr(manifests, "load", counted_load)

    def take(self) -> tuple[int, int]:
        counts = (len(self.built), len(self.reads))
        self.built.clear(), self.reads.clear()
        return counts
