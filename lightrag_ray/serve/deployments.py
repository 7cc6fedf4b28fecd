"""The back-end Serve deployments: embedder (request batching), LLM and workspace owner,
and the adapters through which the ingress's QueryEngine awaits them.

The FastAPI ingress (``serve.app``) runs the QueryEngine. It reads the graph shards (and a
Milvus server) directly; it reaches the embedder, the LLM and, for a Milvus Lite file
(one process only), the owner's vector lookups through deployment handles, awaited on its
event loop. Resources are fractional so the whole app fits on 2 cores; the options here
are defaults that ``serve_config.yaml`` may override.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from ray import serve

from lightrag_ray.config import EmbeddingConfig, LLMConfig, Settings
from lightrag_ray.models.embedding import make_query_embedder
from lightrag_ray.models.llm import LLMClient, LLMError, Messages, make_llm_client
from lightrag_ray.query.stores import ThreadedVectorIndex
from lightrag_ray.ray_runtime import BACKGROUND_NICENESS, SERVING_NICENESS, lower_thread_priority, niceness_options

# Every replica (and the graph shards the workspace owner starts) runs at niceness 0, an
# insert job's driver thread, tasks and actors at 19 (below Serve's proxy at Ray's default
# 15), so on nodes that do both the queries come first (scripts/bench_serve.py --during-insert).
SERVING = niceness_options(SERVING_NICENESS)
# A stopping replica checks for requests still running every this many seconds (Serve's
# default, 2 s, made stopping the app's three tiers take 6 s with nothing running).
STOPPING = {"graceful_shutdown_wait_loop_s": 0.25}


class HandleEmbedder:
    """TextEmbedder (query.stores) over the Embedder deployment, awaited."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(await self.handle.embed.remote(list(texts)))


class BlockingHandleEmbedder:
    """The blocking Embedder protocol over the Embedder deployment, for the owner's
    write path (deletes re-embed what they changed, in a worker thread)."""

    def __init__(self, handle: Any, dim: int) -> None:
        self.handle = handle
        self.dim = dim

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.handle.embed.remote(list(texts)).result())


@serve.deployment(
    ray_actor_options={"num_cpus": 0.5, **SERVING},
    autoscaling_config={"min_replicas": 1, "max_replicas": 2, "target_ongoing_requests": 16},
    max_ongoing_requests=128,
    **STOPPING,
)
class EmbedderDeployment:
    """The embedding model; concurrent single texts are embedded together in one batch."""

    def __init__(self, config: dict[str, Any], max_batch_size: int = 64, batch_wait_timeout_s: float = 0.01) -> None:
        self.embedder = make_query_embedder(EmbeddingConfig.model_validate(config))
        self.embed_one.set_max_batch_size(max_batch_size)
        self.embed_one.set_batch_wait_timeout_s(batch_wait_timeout_s)

    @serve.batch(max_batch_size=64, batch_wait_timeout_s=0.01)
    async def embed_one(self, texts: list[str]) -> list[np.ndarray]:
        return list(await asyncio.to_thread(self.embedder.embed, texts))

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts``, each batched with other callers' texts."""
        return np.stack(await asyncio.gather(*(self.embed_one(t) for t in texts)))

    def dimension(self) -> int:
        return int(self.embedder.dim)


def cause_message(exc: BaseException) -> str:
    """The message of an exception raised in another deployment, without Ray's remote traceback."""
    return str(getattr(exc, "cause", None) or exc)


def llm_failure(exc: BaseException) -> str:
    """What a client is told when the LLM deployment failed."""
    return f"the LLM failed: {cause_message(exc)}"


class HandleLLM:
    """The LLMClient protocol over the LLM deployment."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def complete(self, messages: Messages, *, max_tokens: int | None = None) -> str:
        return await self.handle.complete.remote(messages, max_tokens)

    async def stream(self, messages: Messages, *, max_tokens: int | None = None) -> AsyncIterator[str]:
        async for piece in self.handle.options(stream=True).stream.remote(messages, max_tokens):
            yield piece

    async def aclose(self) -> None:
        return None


@serve.deployment(ray_actor_options={"num_cpus": 0.1, **SERVING}, max_ongoing_requests=256, **STOPPING)
class LLMDeployment:
    """An OpenAI-compatible upstream (or a local transformers model) for keywords and answers.

    With ``llm.backend: none`` it holds no model (the ingress then answers context only),
    so serve_config.yaml can always name this deployment.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        llm = LLMConfig.model_validate(config)
        self.client = make_llm_client(llm) if llm.backend != "none" else None

    def _client(self) -> LLMClient:
        if self.client is None:
            raise LLMError("no LLM configured (llm.backend is none)")
        return self.client

    async def complete(self, messages: Messages, max_tokens: int | None = None) -> str:
        return await self._client().complete(messages, max_tokens=max_tokens)

    async def stream(self, messages: Messages, max_tokens: int | None = None) -> AsyncIterator[str]:
        async for piece in self._client().stream(messages, max_tokens=max_tokens):
            yield piece


class HandleVectorIndex:
    """VectorIndex (query.stores) over the Workspace deployment: the way to a Milvus Lite
    file, which only its owner's process may open."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    async def search(self, kind: str, vectors: np.ndarray, top_k: int, output_fields: list[str]) -> list[list[dict[str, Any]]]:
        return await self.handle.search.remote(kind, vectors, top_k, output_fields)

    async def get(self, kind: str, ids: list[str], output_fields: list[str]) -> list[dict[str, Any]]:
        return await self.handle.get.remote(kind, ids, output_fields)


@dataclass
class Refused:
    """A write the workspace owner refused (busy, a rejected insert, an impossible edit),
    returned instead of raised: Serve logs every exception a replica raises as an ERROR
    with its traceback, and these are normal 400/404/409 answers."""

    error: Exception


class WriterHandle:
    """The workspace deployment's handle as the ingress uses it (``await
    writer.delete.remote(doc_ids)``); a refusal is raised again here, as the exception the
    service raised."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __getattr__(self, name: str) -> Any:
        return _RefusalRaising(getattr(self.handle, name))


class _RefusalRaising:
    def __init__(self, method: Any) -> None:
        self.method = method

    async def remote(self, *args: Any) -> Any:
        result = await self.method.remote(*args)
        if isinstance(result, Refused):
            raise result.error
        return result


@serve.deployment(ray_actor_options={"num_cpus": 0.1, **SERVING}, max_ongoing_requests=512, health_check_timeout_s=120,
                  **STOPPING)
class WorkspaceDeployment:
    """The single writer of the workspace: it owns the graph shard actors (detached, so
    they outlive a crash of this replica and keep serving reads) and, with Milvus Lite, the
    Milvus file, whose vector lookups it answers.

    Exactly one replica: a Milvus Lite file admits one process and the graph one writer.
    Insert jobs run one after another in the background; queries never wait for them.
    """

    def __init__(self, settings: dict[str, Any], embedder: Any) -> None:
        self.settings = Settings.model_validate(settings)
        self.embedder_handle = embedder
        self.service = None
        self.ready = asyncio.Lock()
        self.jobs: asyncio.Queue[str] = asyncio.Queue()
        self.worker: asyncio.Task | None = None
        # One long-lived, nicer thread for insert jobs (niceness is per thread on Linux
        # and cannot be lowered back, so the shared thread pool must not be used).
        self.job_thread = ThreadPoolExecutor(1, "insert-job", initializer=lower_thread_priority,
                                             initargs=(BACKGROUND_NICENESS,))

    async def _service(self):
        """Open the workspace on first use (needs the embedder's dimension)."""
        from lightrag_ray.service.workspace_service import WorkspaceService

        async with self.ready:
            if self.service is None:
                dim = await self.embedder_handle.dimension.remote()
                embedder = BlockingHandleEmbedder(self.embedder_handle, dim)
                self.service = await asyncio.to_thread(WorkspaceService, self.settings, embedder)
                for track_id in self.service.unfinished_jobs():  # cut short by a restart: run again
                    self.jobs.put_nowait(track_id)
                self.worker = asyncio.create_task(self._run_jobs())
        return self.service

    async def _run_jobs(self) -> None:
        while True:
            track_id = await self.jobs.get()
            await asyncio.get_running_loop().run_in_executor(self.job_thread, self.service.run_job, track_id, BACKGROUND_NICENESS)

    def __del__(self) -> None:
        """Serve's graceful shutdown of this replica: stop the (detached) shard actors and
        release Milvus. A crashed replica never gets here, so its shards keep serving."""
        if self.service is not None:
            self.service.close()
        self.job_thread.shutdown(wait=False)

    async def check_health(self) -> None:
        """Serve's periodic probe; also opens the workspace right after start."""
        await self._service()

    async def search(self, kind: str, vectors: Any, top_k: int, output_fields: list[str]):
        """Vector search in the Milvus (Lite) store this replica owns."""
        return await ThreadedVectorIndex((await self._service()).vectors).search(kind, vectors, top_k, output_fields)

    async def get(self, kind: str, ids: list[str], output_fields: list[str]):
        """Stored rows by id from the Milvus (Lite) store this replica owns."""
        return await ThreadedVectorIndex((await self._service()).vectors).get(kind, ids, output_fields)

    def __getattr__(self, name: str) -> Any:
        """Every public method of the WorkspaceService, awaited in a worker thread
        (``handle.delete.remote(doc_ids)``); a job it returns that waits to run is queued."""
        from lightrag_ray.service.workspace_service import WorkspaceService

        if name.startswith("_") or not callable(getattr(WorkspaceService, name, None)):
            raise AttributeError(name)

        async def call(*args: Any) -> Any:
            try:
                result = await asyncio.to_thread(getattr(await self._service(), name), *args)
            except WorkspaceService.REFUSALS as exc:
                return Refused(exc)
            if name in WorkspaceService.QUEUEING and result is not None and result["status"] == "pending":
                self.jobs.put_nowait(result["track_id"])
            return result

        call.__name__ = name
        return call
