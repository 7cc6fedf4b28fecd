"""The ingress's view of the app's workspaces: for each one a Space (its settings, its writer on
the workspace owner, its query engine), opened on first use and dropped least recently used.

The owner opens a workspace (its graph shards, its vectors) before any reader may use it, and
says which opening it is (``epoch``): a Space is checked with the owner at most every
``RECHECK_S`` seconds, and rebuilt when the owner has closed and reopened the workspace
meanwhile (its shards are new actors then).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from lightrag_ray.config import Settings
from lightrag_ray.models.llm import LLMClient
from lightrag_ray.models.rerank import Reranker
from lightrag_ray.query.engine import QueryEngine
from lightrag_ray.query.stores import ThreadedVectorIndex, VectorIndex
from lightrag_ray.serve.deployments import HandleEmbedder
from lightrag_ray.serve.owner import HandleVectorIndex, WriterHandle, raise_refusal
from lightrag_ray.service.opening import OpenWorkspace, open_workspace

RECHECK_S = 1.0


@dataclass
class Space:
    """One workspace as the routes use it (serve.routes.replica.Space)."""

    name: str
    epoch: int
    settings: Settings
    writer: WriterHandle
    input_dir: str
    source: OpenSpaces
    checked: float = field(default_factory=time.monotonic)
    opened: OpenWorkspace | None = None
    query_engine: QueryEngine | None = None
    opening: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def engine(self) -> QueryEngine:
        """The workspace's query engine, opened on first use as a ``reader`` (service.opening):
        graph reads go straight to the shard actors, vector reads to a Milvus server, or to the
        owner of a Milvus Lite file."""
        async with self.opening:
            if self.query_engine is None:
                source = self.source
                dim = await source.embedder_handle.dimension.remote()
                self.opened = await asyncio.to_thread(open_workspace, self.settings, "reader", embedding_dim=dim)
                vectors: VectorIndex = HandleVectorIndex(source.owner, self.name)
                if self.opened.vectors is not None:  # a Milvus server: searched from here
                    vectors = ThreadedVectorIndex(self.opened.vectors)
                self.query_engine = QueryEngine(self.opened.settings, source.embedder, vectors, self.opened.graph_reader(),
                                                source.llm, source.reranker)
        return self.query_engine

    def close(self) -> None:
        """Release what the engine opened here (a Milvus server's client)."""
        if self.opened is not None:
            self.opened.close()


class OpenSpaces:
    """The Spaces of one ingress replica, at most ``max_open``, least recently used dropped.
    ``input_dir``: the folder /documents/scan indexes (with ``many``, one subfolder per
    workspace); None: each workspace's ``inputs`` folder."""

    def __init__(self, owner: Any, embedder: Any, llm: LLMClient | None, reranker: Reranker | None,
                 input_dir: str | None, many: bool, max_open: int) -> None:
        self.owner = owner
        self.embedder_handle = embedder  # the Embedder deployment
        self.embedder = HandleEmbedder(embedder)
        self.llm = llm
        self.reranker = reranker
        self.input_dir = input_dir
        self.many = many
        self.max_open = max_open
        self.spaces: OrderedDict[str, Space] = OrderedDict()

    def _input_dir(self, name: str, settings: Settings) -> str:
        if self.input_dir is None:
            return f"{settings.workspace}/inputs"
        return f"{self.input_dir}/{name}" if self.many else self.input_dir

    async def get(self, name: str, create: bool = False) -> Space:
        """Workspace ``name`` ("" the default); UnknownWorkspace from the owner when it holds none
        of that name (``create``: it makes one)."""
        space = self.spaces.get(name)
        if space is None or create or time.monotonic() - space.checked > RECHECK_S:
            opened = raise_refusal(await self.owner.open.remote(name, create))
            if space is None or space.epoch != opened["epoch"]:
                if space is not None:
                    await asyncio.to_thread(space.close)
                settings = Settings.model_validate(opened["settings"])
                space = Space(opened["name"], opened["epoch"], settings, WriterHandle(self.owner, opened["name"]),
                              self._input_dir(opened["name"], settings), self)
            space.checked = time.monotonic()
            self.spaces[name] = space
        self.spaces.move_to_end(name)
        while len(self.spaces) > self.max_open:
            _, dropped = self.spaces.popitem(last=False)
            await asyncio.to_thread(dropped.close)
        return space

    async def forget(self, name: str) -> None:
        """Drop workspace ``name``'s Space (the workspace was deleted)."""
        space = self.spaces.pop(name, None)
        if space is not None:
            await asyncio.to_thread(space.close)
